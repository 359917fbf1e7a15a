"""Op configs (XML OpDefCollection, SNPE JSON UDO config) -> one normalized op package model.

`load_config` reads one file of either format; `recipe_package` combines the configs a recipe
names into the recipe's package; `resolve_all` resolves it for every backend the recipe builds,
reporting every unresolved op and tensor at once.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import Diagnostics, Problem, UserError, raise_if_any

if TYPE_CHECKING:
    from .model import OpDef, OpPackageDef

__all__ = ["OpPackageDef", "check_declared_backends", "declared_backends", "load_config",
           "recipe_package", "resolve_all", "resolve_backend"]


def __getattr__(name: str) -> Any:  # the model is imported when first used, not with vocab
    if name in ("OpPackageDef", "resolve_backend"):
        from . import model

        return getattr(model, name)
    raise AttributeError(name)


def config_format(path: Path) -> str:
    """'xml' or 'json', by the file's first meaningful byte, else by its suffix."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(512).lstrip(b"\xef\xbb\xbf \t\r\n")
    except OSError:
        head = b""
    if head.startswith(b"<"):
        return "xml"
    if head.startswith(b"{"):
        return "json"
    suffix = path.suffix.lower()
    if suffix in (".xml", ".json"):
        return suffix[1:]
    raise UserError("not an op config: expected an XML OpDefCollection or a JSON UDO config",
                    file=path, hint="op configs are .xml or .json files")


def load_config(path: str | Path, diag: Diagnostics) -> tuple[OpPackageDef, ...]:
    """Every op package one config file defines (XML: one; JSON: one per UdoPackage_<i>)."""
    path = Path(path)
    if config_format(path) == "xml":
        from .xml_config import load_xml_config

        return (load_xml_config(path, diag),)
    from .json_config import load_json_config

    return load_json_config(path, diag)


def recipe_package(name: str | None, domain: str | None, version: str | None,
                   configs: Iterable[Path], diag: Diagnostics) -> OpPackageDef:
    """The ops of all `configs` as one package; the recipe's name, domain and version win."""
    from .model import OpPackageDef

    packages = [pkg for config in configs for pkg in load_config(config, diag)]
    first = packages[0]
    ops: dict[str, OpDef] = {}
    problems: list[Problem] = []
    for pkg in packages:
        if name and pkg.name != name:
            diag.warn(Problem(
                f"package name {pkg.name} differs from the recipe's package.name {name}; "
                "the recipe's is used", file=pkg.ops[0].origin.file if pkg.ops else None))
        for op in pkg.ops:
            if op.name in ops:
                other = ops[op.name].origin
                problems.append(op.origin.problem(
                    f"op {op.name} is defined twice",
                    hint=f"the other definition is at {other.file}:{other.line}"))
            ops.setdefault(op.name, op)
    raise_if_any(problems)
    return OpPackageDef(name or first.name, domain if domain is not None else first.domain,
                        version or first.version, tuple(ops.values()),
                        source_format=first.source_format)


def resolve_all(package: OpPackageDef, backends: Iterable[str]) -> dict[str, OpPackageDef]:
    """The package resolved for each backend; one UserError with every problem of all."""
    from .model import resolve_backend

    resolved: dict[str, OpPackageDef] = {}
    problems: list[Problem] = []
    for backend in backends:
        try:
            resolved[backend] = resolve_backend(package, backend)
        except UserError as exc:
            problems.extend(exc.problems)
    raise_if_any(problems)
    return resolved


def declared_backends(package: OpPackageDef) -> tuple[str, ...]:
    """Every backend udo-build builds that some op of the package runs on, in BACKENDS order."""
    from .vocab import BACKENDS

    return tuple(b for b in BACKENDS if any(b in op.backends for op in package.ops))


def check_declared_backends(package: OpPackageDef) -> None:
    """The rules of every backend the file itself declares, as if each were built.

    A config is only as good as its worst backend: Repeated inputs on a DSP or HTP op, or a
    BACKEND_SPECIFIC datatype left unresolved for HTP, are errors even when no backend is
    asked for (`opdef show FILE` without --backend), as the vendor generator would refuse them.
    """
    resolve_all(package, declared_backends(package))
