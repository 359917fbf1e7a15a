"""Generate one op package: a pure function from the resolved op definitions to the package's
files (relative path -> bytes), rendered from the templates under `templates/`.

Every backend's package keeps the op package's name (PackageName, UDO_PACKAGE_NAME): its
registration validates op configs naming that package, which is the package the converted model's
custom nodes name; its libraries are named as the vendor's tools name them (`names.library`).

The output depends only on the arguments (no clock, no paths of the machine, sorted iteration):
equal inputs give equal bytes, so the store deduplicates packages.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from ..opdef.model import OpDef, OpPackageDef
from . import GENERATOR_VERSION
from .layout import Layout, layout
from .names import QNN, c_string, docstring, one_line, provider
from .stub import StubOp, stub_ops
from .views import OpView, op_view

TEMPLATES = Path(__file__).parent / "templates"
MANIFEST_SCHEMA = "udo-build/package"
MANIFEST_VERSION = 2  # 2: the package keeps its name on every backend; "flavor", "provider"


@dataclass(frozen=True)
class PackageView:
    """The package as templates see it."""

    name: str  # SoftplusPackage: the PackageName, on every backend
    domain: str
    version: str
    backend: str
    digest: str  # of the resolved op definitions
    generator: int
    archs: tuple[str, ...]
    configs: tuple[str, ...]  # file names under config/
    flavor: str = QNN  # the vendor layout: names.QNN (XML configs) or names.SNPE (JSON configs)

    @property
    def base(self) -> str:
        """The name the emulator's kernels package takes (the package's own)."""
        return self.name

    @property
    def provider(self) -> str:
        """The interface provider symbol a loader asks the library for."""
        return provider(self.name)

    @property
    def macro(self) -> str:
        """SoftplusPackage -> SOFTPLUS_PACKAGE (a prefix for macros)."""
        return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", self.name).upper()


def generate(package: OpPackageDef, archs: Sequence[str], configs: Mapping[str, bytes],
             op_configs: Mapping[str, str], stubs: Sequence[tuple[OpDef, str]] = (),
             flavor: str = QNN) -> dict[str, bytes]:
    """The files of `package` (resolved for one backend), relative path -> bytes.

    archs: the dsp arches to build for (HTP, DSP); configs: the op config files by their (unique)
    file names; op_configs: op name -> the file name of the config defining it; stubs: the
    generic definitions of the ops without numpy kernels, with their config's file name;
    flavor: the vendor layout the libraries are named after (names.QNN or names.SNPE).
    """
    if package.backend is None:
        raise ValueError("generate needs a package resolved for one backend")
    pkg = PackageView(package.name, package.domain, package.version, package.backend,
                      package.digest(), GENERATOR_VERSION, tuple(archs), tuple(sorted(configs)),
                      flavor)
    ops = tuple(op_view(op, op_configs.get(op.name, "")) for op in package.ops)
    found = layout(pkg.name, pkg.backend, pkg.archs, ops, flavor)
    context = {"pkg": pkg, "ops": ops, "layout": found}
    files: dict[str, bytes] = {f"config/{name}": configs[name] for name in pkg.configs}
    files[f"include/{pkg.name}.hpp"] = _render("common/header.hpp.j2", context)
    files["Makefile"] = _render(found.makefile, context)
    for item in found.files:
        files[item.path] = _render(item.template, {**context, **item.context})
    stub = stub_ops(list(stubs))
    if stub:
        files[stub_path(pkg.name)] = kernels_stub(pkg.name, stub)
    files["package.json"] = manifest(pkg, ops, found, stub)
    return dict(sorted(files.items()))


def stub_path(base: str) -> str:
    return f"emulator/{base}_kernels.py"


def kernels_stub(base: str, stubs: tuple[StubOp, ...]) -> bytes:
    """The numpy kernels stub module of package `base` (also written by `udo-build init`)."""
    return _render("emulator/kernels.py.j2", {"pkg": {"base": base}, "stubs": stubs})


def manifest(pkg: PackageView, ops: tuple[OpView, ...], found: Layout,
             stubs: tuple[StubOp, ...]) -> bytes:
    """package.json: what the package holds, canonical (sorted keys, no time)."""
    doc = {
        "schema": MANIFEST_SCHEMA, "version": MANIFEST_VERSION,
        "generator_version": pkg.generator, "package": pkg.name, "domain": pkg.domain,
        "package_version": pkg.version, "backend": pkg.backend, "archs": list(pkg.archs),
        "flavor": pkg.flavor, "provider": pkg.provider,
        "opdef_digest": pkg.digest, "configs": [f"config/{c}" for c in pkg.configs],
        "ops": [_op_entry(pkg, op, found, {s.name for s in stubs}) for op in ops],
        "targets": [{"name": t.name, "outputs": [lib.output for lib in t.libs]}
                    for t in found.targets],
    }
    return (json.dumps(doc, indent=2, sort_keys=True, ensure_ascii=False) + "\n").encode()


def _op_entry(pkg: PackageView, op: OpView, found: Layout, stubbed: set[str]) -> dict[str, Any]:
    op_files = [f.path for f in found.files if getattr(f.context.get("op"), "name", "") == op.name]
    return {"name": op.name, "config": f"config/{op.config}" if op.config else None,
            "sources": sorted(op_files),
            "kernels_stub": stub_path(pkg.name) if op.name in stubbed else None}


def config_file_names(names: Sequence[str | None], formats: Sequence[str]) -> list[str]:
    """Unique, safe file names for the config copies: the given names (base names only), else
    `config-<i>.<format>`; a repeated name gets -2, -3 ... before its suffix."""
    taken: set[str] = set()
    found = []
    for i, (name, fmt) in enumerate(zip(names, formats, strict=True)):
        base = (name or "").replace("\\", "/").rsplit("/", 1)[-1]
        if base in ("", ".", "..") or not base.isprintable():
            base = f"config-{i}.{fmt}"
        stem, suffix = PurePosixPath(base).stem, PurePosixPath(base).suffix
        candidate, n = base, 1
        while candidate in taken:
            n += 1
            candidate = f"{stem}-{n}{suffix}"
        taken.add(candidate)
        found.append(candidate)
    return found


# -- templates ----------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _environment() -> Any:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FileSystemLoader(str(TEMPLATES)), undefined=jinja2.StrictUndefined,
        autoescape=False, trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True,
    )
    env.filters.update(c_string=c_string, comment=one_line, docstring=docstring, pystr=_pystr)
    return env


def _pystr(text: str) -> str:
    """A Python string literal (double-quoted)."""
    return json.dumps(str(text), ensure_ascii=False)


def _render(template: str, context: dict[str, Any]) -> bytes:
    return _environment().get_template(template).render(context).encode("utf-8")
