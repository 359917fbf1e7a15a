"""Loading a recipe's numpy kernels: a Python file whose module-level OpPackage objects hold the
implementations of the package's custom ops.

    package = OpPackage("SoftplusPackage")

    @package.op("Softplus")
    def softplus(x, *, beta=1.0): ...

The file is the user's code: an exception while importing it is the user's step failing
(StepFailed), named with the file and the line.
"""

from __future__ import annotations

import importlib.util
import sys
import traceback
from collections.abc import Iterable
from pathlib import Path

from ..errors import StepFailed, UserError
from .oppkg import OpPackage, OpPackageError


def load_kernels(path: str | Path) -> list[OpPackage]:
    """The op packages a kernels file defines (in the order they appear)."""
    path = Path(path)
    name = f"udo_build_kernels_{abs(hash(str(path.resolve())))}"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UserError("cannot load the kernels file", file=path, hint="is it a .py file?")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except FileNotFoundError:
        raise UserError("kernels file not found", file=path) from None
    except OpPackageError as exc:
        raise StepFailed("kernels", f"{path}: {exc}") from None
    except Exception as exc:  # the user's module raised: their code, their step
        raise StepFailed("kernels", f"{path}{_where(exc, path)}: importing it raised "
                         f"{type(exc).__name__}: {exc}") from None
    finally:
        sys.modules.pop(name, None)
    packages = [v for v in vars(module).values() if isinstance(v, OpPackage)]
    if not packages:
        raise UserError("the kernels file defines no OpPackage", file=path,
                        hint='add: package = OpPackage("<PackageName>") and register the ops '
                             "with @package.op(...)")
    return packages


def _where(exc: BaseException, path: Path) -> str:
    frames = [f for f in traceback.extract_tb(exc.__traceback__)
              if Path(f.filename).resolve() == path.resolve()]
    return f":{frames[-1].lineno}" if frames else ""


def merged(name: str, packages: Iterable[OpPackage]) -> OpPackage:
    """One package named `name` holding every implementation of `packages`."""
    out = OpPackage(name)
    for pkg in packages:
        try:
            out.merge(pkg)
        except OpPackageError as exc:
            raise StepFailed("kernels", str(exc)) from None
    return out


def packages_for(bundle: object, kernel_files: Iterable[Path]) -> dict[str, OpPackage]:
    """The bundle's custom-op package built from the kernels files (required when the bundle
    has custom ops; {} when it has none)."""
    opdefs = getattr(bundle, "opdefs", None)
    model = bundle.model
    name = opdefs["name"] if opdefs else None
    used = sorted({n.op for n in model.graph.nodes if n.package != "default"})
    files = list(kernel_files)
    if not used:
        return {}
    if not files or name is None:
        raise UserError(f"the model uses custom ops {', '.join(used)} of package {name}",
                        hint="give their numpy kernels (kernels: in the recipe, or "
                             "--kernels FILE)")
    return {name: merged(name, [p for f in files for p in load_kernels(Path(f))])}
