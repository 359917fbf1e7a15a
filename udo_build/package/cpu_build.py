"""Compiling a generated CPU op package for the host, so the emulator runs its C++ op bodies in
place of the numpy kernels (udo_build/kernels/native.py loads the library).

    udo-build build-cpu out/softplus-demo/packages/CPU/SoftplusPackage

compiles every C++ source below the package's `src/` (as its Makefiles pick them up by
pattern: the interface, `src/ops/*.cpp`, and any file the user adds; not `src/reg/`, the SNPE
registration library) and a shim udo-build writes (`build/host-emulator/udo_build_shim.cpp`)
with `g++ -std=c++17 -O2 -shared -fPIC` against the package's `include/` and the stand-in
headers (or the QNN SDK's, `--include`) into `build/host-emulator/lib<Package>.so`. The shim
builds the vendor's `QnnCpuOpPackage_Node_t` from plain buffers and calls the op through the
package's interface provider, as the CPU backend does (the ops register themselves with
REGISTER_OP). Ops whose body still says "udo-build: write ..." are compiled but not offered.

The library is a user's build product, never a store output: a recipe names it
(`package.cpu_library`) and the actions that run kernels take it as an input keyed by its
bytes. g++ runs in the package folder on relative paths, so the bytes depend only on the sources,
the flags and the compiler.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..kernels.native import (
    DTYPES,
    INIT_FAILED,
    PARAM_SCALAR,
    PARAM_STRING,
    PARAM_TENSOR,
    SHIM_ABI,
    UNKNOWN_OP,
)

STANDIN_INCLUDE = Path(__file__).parent / "standin" / "include"
BUILD_DIR = Path("build") / "host-emulator"
SHIM_NAME = "udo_build_shim.cpp"
FLAGS = ("-std=c++17", "-O2", "-shared", "-fPIC", "-fvisibility=hidden", "-Wall")


@dataclass(frozen=True)
class CpuPackage:
    """What the compile needs of a generated CPU package (from its package.json)."""

    folder: Path
    name: str
    ops: tuple[str, ...]  # the ops whose body the user wrote (the others keep numpy)
    sources: tuple[str, ...]  # relative to the folder
    unwritten: tuple[str, ...] = ()  # ops whose source still says "udo-build: write ..."

    @staticmethod
    def read(folder: Path) -> CpuPackage:
        manifest = folder / "package.json"
        try:
            data = json.loads(manifest.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise UserError("not a generated op package: no package.json", file=folder,
                            hint="generate one: udo-build package CONFIG --backend CPU --out DIR"
                            ) from None
        except (OSError, ValueError) as exc:
            raise UserError(f"cannot read package.json: {exc}", file=manifest) from None
        if data.get("backend") != "CPU":
            raise UserError(f"the package is for the {data.get('backend')} backend, not CPU",
                            file=manifest, hint="build-cpu compiles CPU packages")
        sources = package_sources(folder)
        unwritten = tuple(op["name"] for op in data["ops"] if _unwritten(folder, op))
        ops = tuple(op["name"] for op in data["ops"] if op["name"] not in unwritten)
        return CpuPackage(folder, data["package"], ops, sources, unwritten)

    @property
    def library(self) -> Path:
        return self.folder / BUILD_DIR / f"lib{self.name}.so"


# the folders below src/ that build libraries of their own (the SNPE UDO registration library,
# the older DSPs' per-op libraries), as the Makefiles leave them out of $(SOURCES)
OWN_LIBRARIES = ("src/reg/", "src/dsp_v65_v66/")


def package_sources(folder: Path) -> tuple[str, ...]:
    """Every C++ source below the package's src/ (relative, sorted), as its Makefiles pick them
    up by pattern: a file the user adds is built too."""
    found = (p.relative_to(folder).as_posix() for p in (folder / "src").rglob("*.cpp")
             if p.is_file())
    return tuple(sorted(s for s in found if not s.startswith(OWN_LIBRARIES)))


def _unwritten(folder: Path, op: dict[str, Any]) -> bool:
    marker = f"udo-build: write the {op['name']} kernel here"
    for source in op["sources"]:
        try:
            if marker in (folder / source).read_text(encoding="utf-8"):
                return True
        except OSError as exc:
            raise UserError(f"cannot read the op source: {exc.strerror or exc}",
                            file=folder / source) from None
    return False


@dataclass(frozen=True)
class CpuLibrary:
    """A compiled host library of a CPU package."""

    path: Path
    package: str
    ops: tuple[str, ...]
    unwritten: tuple[str, ...]
    command: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        return {"library": str(self.path), "package": self.package, "ops": list(self.ops),
                "unwritten": list(self.unwritten), "command": list(self.command)}


def shim_source(package: str, ops: Sequence[str]) -> str:
    """The C++ of the shim: the C ABI of udo_build.kernels.native over the package's ops
    (`ops`: those it offers, whose body is written), called through the package's interface."""
    codes = "\n".join(f"    case {code}: return {name};" for code, name in DTYPES.values())
    offered = "\n".join(f'    "{op}",' for op in ops)
    return _SHIM.format(abi=SHIM_ABI, codes=codes, package=package, ops=",".join(ops),
                        offered=offered, scalar=PARAM_SCALAR, tensor=PARAM_TENSOR,
                        string=PARAM_STRING, unknown=UNKNOWN_OP, init_failed=INIT_FAILED)


def build_cpu_library(folder: Path, out: Path | None = None,
                      includes: Sequence[Path] = ()) -> CpuLibrary:
    """Compile the CPU package in `folder` into a host shared library (default:
    build/host-emulator/lib<Package>.so in the package)."""
    pkg = CpuPackage.read(folder)
    if not pkg.ops:
        raise UserError(f"no op of {pkg.name} has its C++ body written yet", file=folder,
                        hint="write one in src/ops/<Op>.cpp, replacing the 'udo-build: write "
                             "the <Op> kernel here' lines")
    compiler = shutil.which("g++")
    if compiler is None:
        raise UserError("g++ is not installed; build-cpu compiles the package with it",
                        hint="install it (Debian/Ubuntu: apt-get install g++)")
    shim = folder / BUILD_DIR / SHIM_NAME
    shim.parent.mkdir(parents=True, exist_ok=True)
    shim.write_text(shim_source(pkg.name, pkg.ops), encoding="utf-8")
    target = (out or pkg.library).resolve()
    target.parent.mkdir(parents=True, exist_ok=True)
    headers = list(includes) or [STANDIN_INCLUDE]
    command = ("g++", *FLAGS, "-Iinclude", *[f"-I{Path(i).resolve()}" for i in headers],
               *pkg.sources, str(BUILD_DIR / SHIM_NAME), "-o", str(target))
    env = {**os.environ, "LC_ALL": "C"}  # g++'s messages in plain ASCII
    done = subprocess.run(command, cwd=folder, capture_output=True, text=True, check=False,
                          env=env)
    if done.returncode != 0:
        raise _compile_error(folder, done.stderr)
    return CpuLibrary(target, pkg.name, pkg.ops, pkg.unwritten, command)


def build_with_sources(folder: Path, sources: Mapping[str, Path],
                       shown: Mapping[str, str]) -> CpuLibrary:
    """Compile the generated CPU package in `folder` (a private copy) with the user's files
    laid over its src/ folder (`sources`: path below src/ -> the file); a g++ error in one of
    them names the user's file (`shown`: path below the package folder, `.` for the folder
    itself -> how to name it)."""
    for relative, path in sources.items():
        target = folder / "src" / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(path.read_bytes())
    try:
        return build_cpu_library(folder)
    except UserError as exc:
        problems = []
        for p in exc.problems:
            try:
                below = Path(p.file or "").relative_to(folder).as_posix()
            except ValueError:
                below = ""
            problems.append(replace(p, file=shown[below]) if below in shown else p)
        raise UserError(problems=problems) from None


_DIAGNOSTIC = re.compile(r"^(?P<file>[^:\n]+):(?P<line>\d+):(?P<col>\d+): (?:fatal )?error: "
                         r"(?P<msg>.*)$", re.MULTILINE)


def _compile_error(folder: Path, stderr: str) -> UserError:
    """g++'s first error, at its file and line; the whole output follows as the hint."""
    first = _DIAGNOSTIC.search(stderr)
    tail = "\n".join(stderr.strip().splitlines()[-20:])
    if first is None:
        return UserError(f"g++ failed: {tail}", file=folder)
    return UserError(f"g++: {first['msg']}", file=folder / first["file"], line=int(first["line"]),
                     column=int(first["col"]),
                     hint=f"fix the C++ and run build-cpu again; g++ said:\n{tail}")


_SHIM = """\
// The host shim of {package}, written by udo-build build-cpu: the emulator calls the package's
// ops through this C ABI (udo_build/kernels/native.py), and the shim calls them as the CPU
// backend does: through the package's interface provider (init once, then per call createOpImpl
// on a node built from the buffers, the implementation's function, freeOpImpl). Not part of the
// package's device builds.
#include <cstdint>
#include <cstring>
#include <vector>

#include "CPU/QnnCpuOpPackage.h"
#include "QnnOpPackage.h"

{abi}

extern "C" Qnn_ErrorHandle_t {package}InterfaceProvider(QnnOpPackage_Interface_t* interface);

namespace {{

// the ops the emulator may call: those whose body is written
const char* const kOffered[] = {{
{offered}
}};

bool offered(const char* op) {{
  for (const char* name : kOffered) {{
    if (std::strcmp(name, op) == 0) return true;
  }}
  return false;
}}

const QnnOpPackage_Interface_t* packageInterface() {{
  static QnnOpPackage_Interface_t interface{{}};
  static const bool ready = {package}InterfaceProvider(&interface) == QNN_SUCCESS &&
                            interface.v1_4.init(nullptr) == QNN_SUCCESS;
  return ready ? &interface : nullptr;
}}

Qnn_DataType_t qnnType(int32_t code) {{
  switch (code) {{
{codes}
    default: return QNN_DATATYPE_UNDEFINED;
  }}
}}

// the vendor header names a string parameter `string`, the stand-in `stringParam`
template <typename P>
auto setText(P& param, const char* text, int) -> decltype(param.string = text, void()) {{
  param.string = text;
}}
template <typename P>
void setText(P& param, const char* text, long) {{
  param.stringParam = text;
}}

QnnCpuOpPackage_Tensor_t cpuTensor(const UdoBuildTensor& t) {{
  QnnCpuOpPackage_Tensor_t out{{}};
  out.dataType = static_cast<decltype(out.dataType)>(qnnType(t.dtype));
  out.rank = t.rank;
  out.currentDimensions = const_cast<uint32_t*>(t.dims);
  out.maxDimensions = const_cast<uint32_t*>(t.dims);
  out.data = t.data;
  return out;
}}

Qnn_ErrorHandle_t run(const QnnOpPackage_Interface_t& interface, QnnCpuOpPackage_Node_t* node) {{
  QnnOpPackage_OpImpl_t impl = nullptr;
  Qnn_ErrorHandle_t status = interface.v1_4.createOpImpl(
      nullptr, reinterpret_cast<QnnOpPackage_Node_t>(node), &impl);
  if (status != QNN_SUCCESS) return status;
  auto* cpu = reinterpret_cast<QnnCpuOpPackage_OpImpl_t*>(impl);
  status = cpu->opImplFn(cpu->userData);
  Qnn_ErrorHandle_t freed = interface.v1_4.freeOpImpl(impl);
  return status != QNN_SUCCESS ? status : freed;
}}

}}  // namespace

extern "C" __attribute__((visibility("default"))) const char* udo_build_package() {{
  return "{package}";
}}

extern "C" __attribute__((visibility("default"))) const char* udo_build_ops() {{
  return "{ops}";
}}

extern "C" __attribute__((visibility("default"))) uint64_t udo_build_execute(
    const char* op, uint32_t numInputs, const UdoBuildTensor* inputs, uint32_t numOutputs,
    const UdoBuildTensor* outputs, uint32_t numParams, const UdoBuildParam* params) {{
  if (!offered(op)) return {unknown}u;
  const QnnOpPackage_Interface_t* interface = packageInterface();
  if (interface == nullptr) return {init_failed}u;
  std::vector<QnnCpuOpPackage_Tensor_t> tensors;
  tensors.reserve(numInputs + numOutputs + numParams);
  std::vector<QnnCpuOpPackage_Tensor_t*> ins, outs;
  for (uint32_t i = 0; i < numInputs; ++i) {{
    tensors.push_back(cpuTensor(inputs[i]));
    ins.push_back(&tensors.back());
  }}
  for (uint32_t i = 0; i < numOutputs; ++i) {{
    tensors.push_back(cpuTensor(outputs[i]));
    outs.push_back(&tensors.back());
  }}
  std::vector<QnnCpuOpPackage_Param_t> values(numParams);
  std::vector<QnnCpuOpPackage_Param_t*> ptrs;
  for (uint32_t i = 0; i < numParams; ++i) {{
    QnnCpuOpPackage_Param_t& p = values[i];
    p.name = params[i].name;
    if (params[i].kind == {scalar}) {{
      p.type = QNN_CPU_PARAMTYPE_SCALAR;
      p.scalarParam = params[i].scalar;
    }} else if (params[i].kind == {tensor}) {{
      p.type = QNN_CPU_PARAMTYPE_TENSOR;
      tensors.push_back(cpuTensor(params[i].tensor));
      p.tensorParam = &tensors.back();
    }} else if (params[i].kind == {string}) {{
      p.type = QNN_CPU_PARAMTYPE_STRING;
      setText(p, params[i].text, 0);
    }}
    ptrs.push_back(&p);
  }}
  QnnCpuOpPackage_Node_t node{{}};
  node.name = op;
  node.packageName = "{package}";
  node.typeName = op;
  node.numOfParams = numParams;
  node.params = ptrs.data();
  node.numOfInputs = numInputs;
  node.inputs = ins.data();
  node.numOfOutputs = numOutputs;
  node.outputs = outs.data();
  return static_cast<uint64_t>(run(*interface, &node));
}}
"""
