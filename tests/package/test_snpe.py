"""The SNPE UDO registration library of a package made from a JSON config: it compiles against
the SnpeUdo stand-ins and, built with g++ into a driver, registers the package's ops with their
core type and implementation library and validates op definitions as the runtime asks; its
Makefile targets build it for x86 and aarch64, and `make clean` removes every output folder."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from .helpers import STANDIN, SWISH, need_gxx, package_files, write

PKG = "SoftplusPackage"

DRIVER = r"""#include <cstdio>
#include <cstring>
#include "SnpeUdo/UdoReg.h"

static SnpeUdo_Param_t param(const char* name) {
  SnpeUdo_Param_t p;
  std::memset(&p, 0, sizeof p);
  p.paramName = const_cast<char*>(name);
  return p;
}

static int validate(SnpeUdo_CoreType_t core, const char* type, uint32_t inputs, uint32_t outputs,
                    const char* name) {
  SnpeUdo_Param_t params[1] = {param(name)};
  SnpeUdo_OpDefinition_t def;
  std::memset(&def, 0, sizeof def);
  def.udoCoreType = core;
  def.operationType = const_cast<char*>(type);
  def.numOfStaticParams = name ? 1 : 0;
  def.staticParams = params;
  def.numOfInputs = inputs;
  def.numOfOutputs = outputs;
  return static_cast<int>(SnpeUdo_validateOperation(&def));
}

int main() {
  SnpeUdo_RegInfo_t* info = nullptr;
  std::printf("before init %d\n", static_cast<int>(SnpeUdo_getRegInfo(&info)));
  if (SnpeUdo_initRegLibrary() != SNPE_UDO_NO_ERROR || SnpeUdo_getRegInfo(&info) != 0) return 1;
  std::printf("package %s cores %u ops %s (%u)\n", info->packageName, info->supportedCoreTypes,
              info->operationsString, info->numOfOperations);
  for (uint32_t i = 0; i < info->numOfImplementationLib; ++i) {
    std::printf("library %u %s\n", info->implementationLib[i].udoCoreType,
                info->implementationLib[i].libraryName);
  }
  const SnpeUdo_OperationInfo_t& op = info->operationsInfo[0];
  std::printf("op %s params %u:%s inputs %u:%s:%d outputs %u:%s:%d calc %u\n",
              op.operationType, op.numOfStaticParams, op.staticParams[0].paramName,
              op.numOfInputs, op.inputInfos[0].tensorName,
              op.inputInfos[0].perCoreDatatype[0].dataType,
              op.numOfOutputs, op.outputNames[0], op.outputInfos[0].layout,
              op.opPerCoreInfo[0].operationCalculationTypes);
  SnpeUdo_LibVersion_t* version = nullptr;
  SnpeUdo_getVersion(&version);
  std::printf("api %u.%u\n", version->apiVersion.major, version->apiVersion.minor);
  std::printf("valid %d\n", validate(CORE, "Swish", 1, 1, "beta"));
  std::printf("no params %d\n", validate(CORE, "Swish", 1, 1, nullptr));
  std::printf("other core %d\n", validate(OTHER, "Swish", 1, 1, "beta"));
  std::printf("unknown op %d\n", validate(CORE, "Softplus", 1, 1, nullptr));
  std::printf("two inputs %d\n", validate(CORE, "Swish", 2, 1, nullptr));
  std::printf("no output %d\n", validate(CORE, "Swish", 1, 0, nullptr));
  std::printf("unknown param %d\n", validate(CORE, "Swish", 1, 1, "alpha"));
  SnpeUdo_terminateRegLibrary();
  std::printf("after terminate %d\n", validate(CORE, "Swish", 1, 1, nullptr));
  return 0;
}
"""

# backend -> (its core type, another core type, the implementation library, the input's type)
CORES = {"CPU": (1, 2, f"libUdo{PKG}ImplCpu.so", 0x02),  # FLOAT_32
         "HTP": (4, 1, f"libUdo{PKG}ImplDsp.so", 0x100)}  # UINT_8, the config's DSP type


@pytest.mark.parametrize("backend", sorted(CORES))
def test_the_registration_library_registers_and_validates(tmp_path: Path, backend: str) -> None:
    core, other, library, dtype = CORES[backend]
    names = {1: "CPU", 2: "GPU", 4: "DSP"}
    folder = write(package_files(tmp_path / "work", [SWISH], backend), tmp_path / "p")
    (tmp_path / "driver.cpp").write_text(DRIVER)
    exe = tmp_path / "driver"
    build = subprocess.run(
        [need_gxx(), "-std=c++17", "-Wall", "-Wextra", "-Werror",
         f"-DCORE=SNPE_UDO_CORETYPE_{names[core]}", f"-DOTHER=SNPE_UDO_CORETYPE_{names[other]}",
         f"-I{STANDIN / 'include'}", "-o", str(exe), str(tmp_path / "driver.cpp"),
         str(folder / f"src/reg/{PKG}RegLib.cpp")],
        capture_output=True, text=True, timeout=120, env={**os.environ, "LC_ALL": "C"})
    assert build.returncode == 0, build.stderr
    lines = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30,
                           check=True).stdout.splitlines()
    assert lines == [
        "before init -1",  # SNPE_UDO_UNKNOWN_ERROR: nothing before SnpeUdo_initRegLibrary
        f"package {PKG} cores {core} ops Swish (1)",
        f"library {core} {library}",
        f"op Swish params 1:beta inputs 1:x:{dtype} outputs 1:y:1 calc {dtype}",  # 1: NHWC
        "api 1.6",
        "valid 0", "no params 0",  # beta is optional
        "other core 101", "unknown op 100", "two inputs 104", "no output 105", "unknown param 102",
        "after terminate -1",
    ]


ENV = {"QNN_SDK_ROOT": "/qnn", "HEXAGON_SDK_ROOT": "/hexagon", "HEXAGON_TOOLS_ROOT": "/tools",
       "ANDROID_NDK_ROOT": "/ndk", "SNPE_ROOT": "/snpe"}


def _make(folder: Path, *args: str, env: dict[str, str] = ENV) -> subprocess.CompletedProcess[str]:
    make = shutil.which("make")
    if make is None:
        pytest.skip("make is not installed (.ci/run installs it)")
    return subprocess.run([make, *args], cwd=folder, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "LC_ALL": "C", **env})


@pytest.mark.parametrize("backend", ["CPU", "GPU", "DSP", "HTP"])
def test_make_builds_the_registration_library_and_clean_removes_every_output(
        tmp_path: Path, backend: str) -> None:
    archs = ["v66", "v73"] if backend == "DSP" else []
    files = package_files(tmp_path / "work", [SWISH], backend, archs)
    folder = write(files, tmp_path / "p")
    dry = _make(folder, "-n", "all")
    assert dry.returncode == 0, dry.stderr
    for platform, flags in (("x86-64_linux_clang", "-march=x86-64"),
                            ("arm64-v8a", "--target=aarch64-none-linux-android21")):
        reg = f"-shared -o libs/{platform}/libUdo{PKG}Reg.so src/reg/{PKG}RegLib.cpp"
        line = next(x for x in dry.stdout.splitlines() if reg in x)
        assert "-I/snpe/include/SNPE" in line and flags in line and "-I/qnn" not in line
    without = _make(folder, "-n", "all", env={k: v for k, v in ENV.items() if k != "SNPE_ROOT"})
    assert without.returncode != 0 and "SNPE_ROOT is not set" in without.stderr
    outputs = [o for t in json.loads(files["package.json"])["targets"] for o in t["outputs"]]
    for output in outputs:  # as if built
        (folder / output).parent.mkdir(parents=True, exist_ok=True)
        (folder / output).write_bytes(b"")
    assert _make(folder, "clean").returncode == 0
    assert not [o for o in outputs if (folder / o.split("/")[0]).exists()]
    assert (folder / "src" / "reg").is_dir()  # sources stay
