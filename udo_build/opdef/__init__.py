"""Op configs (XML OpDefCollection, SNPE JSON UDO config) -> one normalized op package model.

`load_config` reads one file of either format; `recipe_package` combines the configs a recipe
names into the recipe's packages (one, or a set of several: `model.split_packages`);
`resolve_all` resolves it for every backend the recipe builds, reporting every problem at once
and warning where a BACKEND_SPECIFIC item takes the vendor's typing.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import Diagnostics, Problem, UserError, raise_if_any

if TYPE_CHECKING:
    from .model import OpDef, OpPackageDef, PackageId

__all__ = ["OpPackageDef", "check_declared_backends", "declared_backends", "load_config",
           "recipe_package", "resolve_all", "resolve_backend", "split_packages"]


def __getattr__(name: str) -> Any:  # the model is imported when first used, not with vocab
    if name in ("OpPackageDef", "resolve_backend", "split_packages"):
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
    """The ops of all `configs` as one set of packages.

    Configs naming the same package add their ops to it; every other package stays its own (a
    member of the set: `model.split_packages` gives them back, each generated into its own
    folder, library and interface, as the vendor tools build each package of a config). With
    one package, the recipe's name, domain and version win; with several, `name` must be one of
    them (it picks the set's first package, whose domain and version the recipe's replace).
    """
    from .model import OpPackageDef

    packages = [pkg for config in configs for pkg in load_config(config, diag)]
    names = list(dict.fromkeys(p.name for p in packages))
    if name and len(names) > 1 and name not in names:
        raise UserError(f"package.name {name} is none of the packages the op configs define: "
                        f"{', '.join(names)}", field="package.name",
                        hint="each package keeps its own name: drop package.name, or give one "
                             "of them")
    if name and name not in names:  # one package, renamed by the recipe
        for pkg in packages:
            diag.warn(Problem(
                f"package name {pkg.name} differs from the recipe's package.name {name}; "
                "the recipe's is used", file=pkg.ops[0].origin.file if pkg.ops else None))
        packages, names = [replace(p, name=name) for p in packages], [name]
    main = name or names[0]
    ids = _package_ids(packages, names, main, domain, version)
    ops: dict[str, OpDef] = {}
    problems: list[Problem] = []
    for pkg in packages:
        for op in pkg.ops:
            if op.name in ops:
                other = ops[op.name].origin
                problems.append(op.origin.problem(
                    f"op {op.name} is defined twice",
                    hint=f"the other definition is at {other.file}:{other.line}"))
            ops.setdefault(op.name, replace(op, package="" if pkg.name == main else pkg.name))
    raise_if_any(problems)
    own = next(i for i in ids if i.name == main)
    members = tuple([own, *(i for i in ids if i.name != main)]) if len(ids) > 1 else ()
    return OpPackageDef(own.name, own.domain, own.version, tuple(ops.values()),
                        source_format=packages[0].source_format, members=members)


def _package_ids(packages: list[OpPackageDef], names: list[str], main: str, domain: str | None,
                 version: str | None) -> list[PackageId]:
    """Each package's identity, from its first config; the recipe's domain and version replace
    the main package's."""
    from .model import PackageId

    first = {n: next(p for p in packages if p.name == n) for n in names}
    return [PackageId(n, domain if domain is not None and n == main else first[n].domain,
                      (version if n == main else None) or first[n].version) for n in names]


def resolve_all(package: OpPackageDef, backends: Iterable[str],
                diag: Diagnostics | None = None) -> dict[str, OpPackageDef]:
    """The package resolved for each backend; one UserError with every problem of all;
    warnings (the vendor's typing of BACKEND_SPECIFIC) go to `diag`."""
    from .model import resolve_backend

    resolved: dict[str, OpPackageDef] = {}
    problems: list[Problem] = []
    for backend in backends:
        try:
            resolved[backend] = resolve_backend(package, backend, diag)
        except UserError as exc:
            problems.extend(exc.problems)
    raise_if_any(problems)
    return resolved


def declared_backends(package: OpPackageDef) -> tuple[str, ...]:
    """Every backend udo-build builds that some op of the package runs on, in BACKENDS order."""
    from .vocab import BACKENDS

    return tuple(b for b in BACKENDS if any(b in op.backends for op in package.ops))


def check_declared_backends(package: OpPackageDef, diag: Diagnostics | None = None) -> None:
    """The rules of every backend the file itself declares, as if each were built.

    A config is only as good as its worst backend: Repeated inputs on a DSP or HTP op, or a
    package that no backend can build, are errors even when no backend is asked for (`opdef
    show FILE` without --backend), as the vendor generator would refuse them; its warnings (a
    BACKEND_SPECIFIC item typed as the vendor does) go to `diag`.
    """
    resolve_all(package, declared_backends(package), diag)
