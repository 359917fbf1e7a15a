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
libs/<target>/libUdo<Pkg>Impl<Core>.so. The package keeps its name on every backend.

A DSP package for v65/v66 only has no src/<Pkg>Interface.cpp or src/ops/: its sources live under
src/dsp_v65_v66/ whatever other arches are listed, so adding v68 never moves a file.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .names import QNN, library, op_library
from .tables import Toolchain, sdk_htp_archs, split_archs, toolchain
from .views import OpView

LEGACY_DIR = "src/dsp_v65_v66"


@dataclass(frozen=True)
class Lib:
    """One shared library a Makefile target builds."""

    output: str
    sources: tuple[str, ...]
    platform: str  # x86 | aarch64 | v73 ...

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
    return BACKEND_LAYOUTS[backend](Naming(name, backend, flavor), archs, ops)


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
