"""Which files a package has and which libraries its Makefile builds, per backend.

    every backend   Makefile, package.json, config/<file>, include/<Pkg>.hpp,
                    src/<Pkg>Interface.cpp, src/ops/<Op>.cpp, emulator/<Pkg>_kernels.py (stubs)
    CPU             makefiles/Makefile.linux-x86_64, makefiles/Makefile.android-aarch64; targets
                    cpu_x86, cpu_android
    GPU             src/kernels/<Op>.cl (embedded into the library at build time); gpu_android
    HTP             targets htp_x86 (host-side prepare), htp_<arch> per dsp arch, htp_aarch64
    DSP             v68 and later: the HTP layout, targets dsp_x86, dsp_<arch>, dsp_aarch64;
                    v65/v66: src/dsp_v65_v66/ (its own interface, one library per op), dsp_<arch>

The libraries are named as the vendor's generated makefiles name them (`names.library`): a QNN
package (XML configs) builds build/<target>/libQnn<Pkg>.so (HTP, DSP) or
libs/<target>/lib<Pkg>.so (CPU, GPU); an SNPE UDO package (JSON configs) builds
libs/<target>/libUdo<Pkg>Impl<Core>.so and, from src/reg/<Pkg>RegLib.cpp, the registration
library libs/<x86-64_linux_clang | arm64-v8a>/libUdo<Pkg>Reg.so (built by the x86 and aarch64
targets, or reg_x86 / reg_aarch64 where the backend has none). The package keeps its name on every
backend; `make clean` removes every folder the Makefile builds into (build/, libs/).

A DSP package for v65/v66 only has no src/<Pkg>Interface.cpp or src/ops/: its sources live under
src/dsp_v65_v66/ whatever other arches are listed, so adding v68 never moves a file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

from .names import QNN, SNPE, impl_library, library, op_library, registration_library, snpe_core
from .tables import (
    Toolchain,
    sdk_htp_archs,
    snpe_datatypes,
    snpe_layout,
    split_archs,
    toolchain,
)
from .views import OpView

LEGACY_DIR = "src/dsp_v65_v66"


@dataclass(frozen=True)
class Lib:
    """One shared library a Makefile target builds."""

    output: str
    sources: tuple[str, ...]
    platform: str  # x86 | aarch64 | v73 ...
    vars: str = ""  # the prefix of its make variables (REG_: the SNPE registration library's)

    @property
    def toolchain(self) -> Toolchain:
        return toolchain(self.platform)


@dataclass(frozen=True)
class MakeTarget:
    name: str
    comment: str
    libs: tuple[Lib, ...]
    makefile: str = "Makefile"  # the file holding its rules (CPU: one per platform)


@dataclass(frozen=True)
class Embed:
    """An OpenCL kernel embedded into a generated C++ source at build time."""

    output: str
    source: str
    symbol: str


@dataclass(frozen=True)
class Rendered:
    """A file rendered from a template with extra context (e.g. the op)."""

    path: str
    template: str
    context: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Layout:
    files: tuple[Rendered, ...]
    targets: tuple[MakeTarget, ...]
    embeds: tuple[Embed, ...] = ()
    includes: tuple[str, ...] = ()  # include folders of the backend's SDK headers
    notes: tuple[str, ...] = ()  # said at the top of the Makefile
    makefile: str = "common/Makefile.j2"  # the template of the top Makefile

    @property
    def clean(self) -> tuple[str, ...]:
        """The top folders of everything the Makefile builds (what `make clean` removes)."""
        outputs = [lib.output for t in self.targets for lib in t.libs]
        outputs += [e.output for e in self.embeds]
        return tuple(sorted({o.split("/", 1)[0] for o in outputs}))


@dataclass(frozen=True)
class UdoRegistration:
    """What an SNPE UDO registration library says of its package: the core type the ops run on,
    that core's implementation library, and the SnpeUdo enums of datatypes and layouts."""

    core: str  # SNPE_UDO_CORETYPE_DSP
    impl_library: str  # libUdo<Pkg>ImplDsp.so

    def datatypes(self, names: tuple[str, ...]) -> tuple[str, ...]:
        return snpe_datatypes(names)

    def layout(self, name: str) -> str:
        return snpe_layout(name)


@dataclass(frozen=True)
class Naming:
    """Whose package this is: its name, backend and the vendor layout (names.QNN or SNPE)."""

    name: str
    backend: str
    flavor: str = QNN

    def lib(self, platform: str, sources: tuple[str, ...]) -> Lib:
        return Lib(library(self.name, self.backend, platform, self.flavor), sources, platform)


def layout(name: str, backend: str, archs: tuple[str, ...], ops: tuple[OpView, ...],
           flavor: str = QNN) -> Layout:
    pkg = Naming(name, backend, flavor)
    found = BACKEND_LAYOUTS[backend](pkg, archs, ops)
    return _with_registration(pkg, found) if flavor == SNPE else found


REG_PLATFORMS = ("x86", "aarch64")  # the registration library runs on the CPU of either


def _with_registration(pkg: Naming, found: Layout) -> Layout:
    """An SNPE UDO package with its registration library: the source, and the library per
    platform, built by the backend's target for that platform or by a reg_<platform> one."""
    reg = UdoRegistration(snpe_core(pkg.backend), impl_library(pkg.name, pkg.backend))
    source = Rendered(f"src/reg/{pkg.name}RegLib.cpp", "snpe/reg_lib.cpp.j2", {"reg": reg})
    targets = list(found.targets)
    for platform in REG_PLATFORMS:
        lib = Lib(registration_library(pkg.name, platform), (source.path,), platform, "REG_")
        at = next((i for i, t in enumerate(targets)
                   if any(x.platform == platform for x in t.libs)), None)
        if at is None:
            targets.append(MakeTarget(f"reg_{platform}", "the SNPE UDO registration library "
                                      f"({platform})", (lib,)))
        else:
            targets[at] = replace(targets[at], libs=(*targets[at].libs, lib))
    grown = dict(zip(found.targets, targets, strict=False))
    # a file rendered for one target (the CPU's per-platform makefiles) renders the grown one
    files = [replace(f, context={**f.context, "target": grown[f.context["target"]]})
             if "target" in f.context else f for f in found.files]
    return replace(found, files=(*files, source), targets=tuple(targets))


def _sources(name: str, ops: tuple[OpView, ...], folder: str = "src") -> list[Rendered]:
    return [Rendered(f"{folder}/{name}Interface.cpp", "{family}/interface.cpp.j2"),
            *(Rendered(f"{folder}/ops/{op.name}.cpp", "{family}/op.cpp.j2", {"op": op})
              for op in ops)]


def _family(files: list[Rendered], family: str) -> list[Rendered]:
    return [Rendered(f.path, f.template.format(family=family), f.context) for f in files]


def _htp_style(pkg: Naming, archs: tuple[str, ...], ops: tuple[OpView, ...], prefix: str
               ) -> tuple[list[Rendered], list[MakeTarget]]:
    files = _family(_sources(pkg.name, ops), "htp")
    sources = tuple(f.path for f in files)
    targets = [MakeTarget(f"{prefix}_x86", "host-side library for offline prepare (x86-64 Linux)",
                      (pkg.lib("x86", sources),))]
    targets += [MakeTarget(f"{prefix}_{arch}", f"the library the HTP runs ({arch})",
                       (pkg.lib(arch, sources),)) for arch in archs]
    targets.append(MakeTarget(f"{prefix}_aarch64", "library for online prepare on the device "
                          "(Android aarch64)", (pkg.lib("aarch64", sources),)))
    return files, targets


def _htp(pkg: Naming, archs: tuple[str, ...], ops: tuple[OpView, ...]) -> Layout:
    _, hexagon = split_archs(archs)
    notes: tuple[str, ...] = ()
    if not hexagon:
        hexagon = sdk_htp_archs()
        notes = (f"no dsp arch was given: htp_<arch> targets for every arch the SDK supports "
                 f"({', '.join(hexagon)}); the recipe's prepare matrix (or --arch) narrows "
                 "them",)
    files, targets = _htp_style(pkg, hexagon, ops, "htp")
    return Layout(tuple(files), tuple(targets), includes=("HTP",), notes=notes)


def _dsp(pkg: Naming, archs: tuple[str, ...], ops: tuple[OpView, ...]) -> Layout:
    legacy, hexagon = split_archs(archs)
    files: list[Rendered] = []
    targets: list[MakeTarget] = []
    if hexagon or not legacy:
        files, targets = _htp_style(pkg, hexagon, ops, "dsp")
    if legacy:
        part = _family(_sources(pkg.name, ops, LEGACY_DIR), "dsp")
        files += part
        interface, op_files = part[0].path, part[1:]
        older = []
        for arch in legacy:
            libs = [pkg.lib(arch, (interface,))]
            libs += [Lib(op_library(pkg.name, f.context["op"].name, arch, pkg.flavor),
                         (f.path,), arch) for f in op_files]
            older.append(MakeTarget(f"dsp_{arch}", f"the registration library and one "
                                f"implementation library per op ({arch})", tuple(libs)))
        at = 1 if targets else 0  # in arch order: after dsp_x86, before dsp_v68 and later
        targets[at:at] = older
    return Layout(tuple(files), tuple(targets), includes=("DSP", "HTP"))


def _cpu(pkg: Naming, archs: tuple[str, ...], ops: tuple[OpView, ...]) -> Layout:
    files = _family(_sources(pkg.name, ops), "cpu")
    sources = tuple(f.path for f in files)
    targets = (
        MakeTarget("cpu_x86", "x86-64 Linux", (pkg.lib("x86", sources),),
               "makefiles/Makefile.linux-x86_64"),
        MakeTarget("cpu_android", "Android aarch64", (pkg.lib("aarch64", sources),),
               "makefiles/Makefile.android-aarch64"),
    )
    files += [Rendered(t.makefile, "cpu/Makefile.platform.j2", {"target": t}) for t in targets]
    return Layout(tuple(files), targets, includes=("CPU",), makefile="cpu/Makefile.j2")


def _gpu(pkg: Naming, archs: tuple[str, ...], ops: tuple[OpView, ...]) -> Layout:
    files = _family(_sources(pkg.name, ops), "gpu")
    files += [Rendered(f"src/kernels/{op.name}.cl", "gpu/kernel.cl.j2", {"op": op})
              for op in ops]
    embeds = tuple(Embed(f"build/gen/{op.name}_cl.cpp", f"src/kernels/{op.name}.cl",
                         f"k{op.name}KernelSource") for op in ops)
    sources = (*(f.path for f in files if f.path.endswith(".cpp")),
               *(e.output for e in embeds))
    targets = (MakeTarget("gpu_android", "Android aarch64 (Adreno GPU)",
                      (pkg.lib("aarch64", sources),)),)
    return Layout(tuple(files), targets, embeds, includes=("GPU",))


BACKEND_LAYOUTS: dict[str, Callable[[Naming, tuple[str, ...], tuple[OpView, ...]], Layout]] = {
    "CPU": _cpu, "GPU": _gpu, "DSP": _dsp, "HTP": _htp,
}
