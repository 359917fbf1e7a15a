"""Loading a recipe's numpy kernels: a Python file whose module-level OpPackage objects hold the
implementations of the package's custom ops.

    package = OpPackage("SoftplusPackage")

    @package.op("Softplus")
    def softplus(x, *, beta=1.0): ...

The file is the user's code: an exception while importing it is the user's step failing
(StepFailed), named with the file and the line.

A kernels file's module name reaches what a build writes (a record names each custom op's kernel
as `module.function`), so it is made from what the build's keys name, never from a path or
hash(): `packages_for` names it after the bundle's op package (`udo_build_kernels_<Package>`,
with the file's index when there are several), so that editing a comment in the kernels file
leaves the records the same bytes (and what depends on them cached); `load_kernels` on its own
names it after the sha256 of the file's bytes. The bytes run are the bytes read (once), and no
bytecode cache is written beside the user's file.
"""

from __future__ import annotations

import hashlib
import importlib.util
import sys
import threading
import traceback
from collections.abc import Iterable, Sequence
from pathlib import Path

from ..errors import StepFailed, UserError
from .oppkg import OpPackage, OpPackageError

NATIVE_SUFFIX = ".so"
_LOADING = threading.RLock()  # one module per name in sys.modules while it runs


def module_name(data: bytes) -> str:
    """The module name of a kernels file with these bytes (the same on every machine)."""
    return f"udo_build_kernels_{hashlib.sha256(data).hexdigest()[:16]}"


def load_kernels(path: str | Path, module: str | None = None) -> list[OpPackage]:
    """The op packages a kernels file defines (in the order they appear), run as the module
    `module` (default: named after the file's bytes)."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UserError("kernels file not found", file=path) from None
    except OSError as exc:
        raise UserError(f"cannot read the kernels file: {exc.strerror or exc}", file=path) \
            from None
    name = module or module_name(data)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise UserError("cannot load the kernels file", file=path, hint="is it a .py file?")
    loaded = importlib.util.module_from_spec(spec)
    with _LOADING:
        sys.modules[name] = loaded  # dataclasses and typing look their module up while it runs
        try:
            exec(compile(data, str(path), "exec", dont_inherit=True), loaded.__dict__)
        except OpPackageError as exc:
            raise StepFailed("kernels", f"{path}: {exc}") from None
        except Exception as exc:  # the user's module raised: their code, their step
            raise StepFailed("kernels", f"{path}{_where(exc, path)}: importing it raised "
                             f"{type(exc).__name__}: {exc}") from None
        finally:
            sys.modules.pop(name, None)
    packages = [v for v in vars(loaded).values() if isinstance(v, OpPackage)]
    if not packages:
        raise UserError("the kernels file defines no OpPackage", file=path,
                        hint='add: package = OpPackage("<PackageName>") and register the ops '
                             "with @package.op(...)")
    return packages


def _where(exc: BaseException, path: Path) -> str:
    if isinstance(exc, SyntaxError) and exc.lineno:
        return f":{exc.lineno}"
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


def packages_for(bundle: object, kernel_files: Sequence[Path]) -> dict[str, OpPackage]:
    """The bundle's custom-op package built from the kernels files (required when the bundle
    has custom ops; {} when it has none); a `.so` among them is a native kernels library
    (`udo-build build-cpu`) whose ops replace the numpy ones."""
    opdefs = getattr(bundle, "opdefs", None)
    model = bundle.model
    name = opdefs["name"] if opdefs else None
    used = sorted({n.op for n in model.graph.nodes if n.package != "default"})
    files = [f for f in kernel_files if Path(f).suffix != NATIVE_SUFFIX]
    native = [Path(f) for f in kernel_files if Path(f).suffix == NATIVE_SUFFIX]
    if not used:
        return {}
    if not files or name is None:
        raise UserError(f"the model uses custom ops {', '.join(used)} of package {name}",
                        hint="give their numpy kernels (kernels: in the recipe, or "
                             "--kernels FILE)")
    modules = [f"udo_build_kernels_{name}" + (f"_{i}" if len(files) > 1 else "")
               for i in range(len(files))]
    package = merged(name, [p for f, module in zip(files, modules, strict=True)
                            for p in load_kernels(Path(f), module)])
    for library in native:  # C++ op bodies in place of the generic numpy ones (native.py)
        from .native import with_native

        package = with_native(package, library, opdefs)
    # op definitions of several packages (opdef.model.OpPackageDef.members): each node names its
    # own, and the kernels serve them all
    return {n: package for n in [name, *(m["name"] for m in opdefs.get("members", ()))]}
