"""The generated sources are well-formed: g++ -fsyntax-only (with -Wall -Wextra -Werror) over
every C++ source of every backend against the stand-in headers, the OpenCL kernels as C with
stand-in built-ins, and the Makefiles (recipe lines start with a tab; `make -n` when installed).
The stand-ins are held to the vendor's headers: sources the vendor's generator wrote
(data/vendor/) compile against them with the flags of the vendor's Makefiles.

One g++ process per backend, all started at once, so the check stays well under a second or two.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from .helpers import (
    DATA,
    SOFTPLUS,
    STANDIN,
    SWISH,
    VENDOR,
    need_gxx,
    opencl_check,
    package_files,
    package_outputs,
    syntax_check,
    write,
)

CASES = {
    "example": ([SOFTPLUS, SWISH], [True, False]),
    # two configs of two packages, each generated apart (VendorOps, SoftplusPackage)
    "vendor": ([VENDOR, SOFTPLUS, SWISH], [False, True, False]),
    # names that are keywords or hold newlines and comment ends; half, 64-bit, empty defaults
    "odd": ([DATA / "odd_names.json", SOFTPLUS], [False, False]),
    # a JSON config alone: the SNPE UDO layout, with the registration library's source
    "snpe": ([SWISH], [False]),
    # a JSON config of two packages (UdoPackage_0, UdoPackage_1): two SNPE UDO packages
    "two": ([DATA / "two_packages.json"], [False]),
}
ARCHS = {"CPU": [], "GPU": [], "DSP": ["v66", "v73"], "HTP": ["v68", "v73"]}


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_backend_compiles_against_the_standins(tmp_path: Path, case: str) -> None:
    configs, kernels = CASES[case]
    folders: dict[str, list[Path]] = {}
    for b, archs in ARCHS.items():
        outputs = package_outputs(tmp_path / "work" / b, configs, b, archs, kernels)
        folders[b] = [write(files, tmp_path / b / name)  # type: ignore[arg-type]
                      for name, files in outputs.items() if name != "_publish"]
    checks = {f"{b} {f.name}": syntax_check(f) for b, fs in folders.items() for f in fs}
    cl = [opencl_check(f) for f in folders["GPU"]]
    assert cl and all(c is not None for c in cl)
    for what, process in [*checks.items(), *(("GPU kernels", c) for c in cl)]:
        assert process is not None
        output, _ = process.communicate(timeout=60)
        assert process.returncode == 0, f"{what}:\n{output}"
    sources = {b: sorted(p.name for f in fs for p in f.rglob("*.cpp"))
               for b, fs in folders.items()}
    assert all(sources.values()) and len(sources["DSP"]) > len(sources["HTP"])
    snpe = case in ("snpe", "two")
    assert all(any(n.endswith("RegLib.cpp") for n in names) == snpe
               for names in sources.values())
    packages = {"vendor": 2, "odd": 2, "two": 2}.get(case, 1)
    assert len(folders["CPU"]) == packages  # each package of the configs on its own


def test_mllm_llama_package_compiles_whole(tmp_path: Path) -> None:
    # 17 ops on the HTP, RoPESimple typed FLOAT_32 as the vendor's generator types it
    config = DATA.parent.parent / "opdef/data/vendor/llama_package_htp.xml"
    folder = write(package_files(tmp_path / "work", [config], "HTP", ["v73"]), tmp_path / "p")
    ops = sorted((folder / "src/ops").glob("*.cpp"))
    assert len(ops) == 17
    for op in ops:  # the op typed by the fallback and one typed by its supplement (quick)
        if op.stem not in ("RoPESimple", "SiLU"):
            op.unlink()
    output, _ = (process := syntax_check(folder)).communicate(timeout=60)
    assert process.returncode == 0, output


def test_a_syntax_error_is_caught(tmp_path: Path) -> None:
    folder = write(package_files(tmp_path / "work", [SOFTPLUS], "HTP", ["v73"]), tmp_path / "p")
    op = folder / "src/ops/Softplus.cpp"
    op.write_text(op.read_text().replace("return GraphStatus::ErrorFatal;", "return 1;"))
    output, _ = (process := syntax_check(folder)).communicate(timeout=60)
    assert process.returncode != 0 and "Softplus.cpp" in output


# the warning and define flags of the vendor's generated HTP Makefiles that g++ understands
VENDOR_FLAGS = ["-std=c++17", "-fPIC", "-Wall", "-Wreorder", "-Wno-missing-braces",
                "-Wno-unused-function", "-Werror", "-Wno-format",
                '-DQNN_API=__attribute__((visibility("default")))']


def _vendor_check(folder: Path, package: str) -> subprocess.CompletedProcess[str]:
    sources = sorted(str(p) for p in folder.rglob("*.cpp"))
    command = [need_gxx(), "-fsyntax-only", *VENDOR_FLAGS, f"-DTHIS_PKG_NAME={package}",
               f"-I{STANDIN / 'include'}", f"-I{folder / 'include'}", *sources]
    return subprocess.run(command, capture_output=True, text=True, timeout=60,
                          env={**os.environ, "LC_ALL": "C"})


def test_vendor_generated_sources_compile_against_the_standins() -> None:
    folder = DATA / "vendor/ExampleOpPackage"
    done = _vendor_check(folder, "ExampleOpPackage")
    assert done.returncode == 0, done.stderr
    assert len(list(folder.rglob("*.cpp"))) == 2


HTP_HOOKS = ("DEFINE_UNIQ_TY()", "INIT_PKG_CORE_INIT_FUNC()", "REGISTER_PACKAGE_PARAM_ORDERS()",
             "REGISTER_PACKAGE_AXIS_PARAMS()", "REGISTER_PACKAGE_PER_CHANNEL_QUANTIZED_OPS()",
             "createOpImpl = nullptr")


@pytest.mark.parametrize("backend", sorted(ARCHS))
def test_generated_sources_compile_with_the_vendor_flags(tmp_path: Path, backend: str) -> None:
    files = package_files(tmp_path / "work", [VENDOR, SOFTPLUS], backend, ARCHS[backend])
    interfaces = [v.decode() for k, v in files.items() if k.endswith("Interface.cpp")]
    assert interfaces
    for interface in interfaces:  # the hooks of the vendor's generated interfaces
        for hook in ("sdkBuildId = QNN_SDK_BUILD_ID", "sdkApiVersion = &sg_sdkApiVersion",
                     f"QNN_{backend}_API_VERSION_INIT", "InterfaceProvider(",
                     "interfaceVersion = QNN_OP_PACKAGE_API_VERSION_1_4_0",
                     *(HTP_HOOKS if backend == "HTP" else ())):
            assert hook in interface, hook
    folder = write(files, tmp_path / "p")
    package = next(Path(k).name.removesuffix("Interface.cpp") for k in files
                   if k.startswith("src/") and k.endswith("Interface.cpp"))
    done = _vendor_check(folder, package)
    assert done.returncode == 0, done.stderr


def _rules(makefile: str) -> dict[str, list[str]]:
    """target -> recipe lines, checking that every recipe line starts with a tab."""
    rules: dict[str, list[str]] = {}
    current = None
    for line in makefile.splitlines():
        if line.startswith("\t"):
            assert current is not None, f"a recipe line outside a rule: {line!r}"
            rules[current].append(line[1:])
        elif line and not line.startswith("#") and ":" in line and "=" not in line.split(":")[0]:
            current = line.split(":")[0]
            rules[current] = []
        elif line.strip() and not line.startswith("#"):
            assert re.match(r"[A-Za-z0-9_.]+ *(:=|\?=|=)", line), f"unexpected line: {line!r}"
            current = None
    return rules


def _check_vendor_build_lines(backend: str, lines: list[str]) -> None:
    """The flags, include paths and link libraries of the vendor's generated Makefiles."""
    built = [(line.split("-shared -o ")[1].split()[0].split("/")[1], line)
             for line in lines if re.search(r"-shared -o (build|libs)/", line)]
    for folder, line in built:
        assert "-DQNN_API=" in line and "-fvisibility=default" in line
        assert "-I/qnn/include/QNN" in line and "-DTHIS_PKG_NAME=" in line and "-std=c++17" in line
        if folder.startswith("hexagon-"):
            arch = folder.removeprefix("hexagon-")
            assert line.startswith("/tools/Tools/bin/hexagon-clang++ ")
            assert f"-m{arch} " in line and "-mhvx -mhvx-length=128B" in line
            assert f"-I/hexagon/rtos/qurt/compute{arch}/include/qurt" in line
            assert f"-I/hexagon/rtos/qurt/compute{arch}/include/posix" in line
            assert "-DUSE_OS_QURT" in line and "-I/hexagon/incs/stddef" in line
            assert ("-mhmx" in line) == (int(arch[1:]) >= 68)
        elif folder == "aarch64-android":
            assert line.startswith("/ndk/toolchains/llvm/prebuilt/linux-x86_64/bin/clang++ ")
            assert "--target=aarch64-none-linux-android21" in line and "-DANDROID" in line
            assert ("-lQnnHtp -lQnnHtpPrepare" in line) == (backend == "HTP")
        else:
            assert folder == "x86_64-linux-clang"
            libnative = "-L/tools/Tools/libnative/lib -lnative"
            assert (libnative in line) == (backend in ("HTP", "DSP"))
    folders = {folder for folder, _ in built}
    assert len(folders) == {"CPU": 2, "GPU": 1, "DSP": 4, "HTP": 4}[backend], sorted(folders)


@pytest.mark.parametrize("backend", sorted(ARCHS))
def test_makefiles(tmp_path: Path, backend: str) -> None:
    files = package_files(tmp_path / "work", [VENDOR, SOFTPLUS], backend, ARCHS[backend])
    folder = write(files, tmp_path / "p")
    rules = _rules(files["Makefile"].decode())
    assert {"all", "clean"} <= set(rules)
    for name in (f for f in files if f.startswith("makefiles/")):
        assert _rules(files[name].decode())
    if shutil.which("make") is None:
        return  # the structure is checked above; make itself is optional on CI machines
    env = {**os.environ, "QNN_SDK_ROOT": "/qnn", "HEXAGON_SDK_ROOT": "/hexagon",
           "HEXAGON_TOOLS_ROOT": "/tools", "ANDROID_NDK_ROOT": "/ndk"}
    done = subprocess.run(["make", "-n", "all"], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    outputs = [o for t in json.loads(files["package.json"])["targets"] for o in t["outputs"]]
    assert all(f"-shared -o {o} " in done.stdout for o in outputs)
    _check_vendor_build_lines(backend, done.stdout.splitlines())
    if backend == "HTP":  # a hexagon arch can use its own Hexagon SDK
        v73 = subprocess.run(["make", "-n", "htp_v73"], cwd=folder, capture_output=True, text=True,
                             timeout=60, env={**env, "HEXAGON_SDK_ROOT_V73": "/sdk73"})
        assert "-I/sdk73/rtos/qurt/computev73/include/qurt" in v73.stdout, v73.stderr
    missing = subprocess.run(["make", "-n", "all"], cwd=folder, capture_output=True, text=True,
                             timeout=60, env={k: v for k, v in env.items()
                                              if k != "QNN_SDK_ROOT"})
    assert missing.returncode != 0 and "QNN_SDK_ROOT is not set" in missing.stderr


@pytest.mark.parametrize("backend", sorted(ARCHS))
def test_a_source_the_user_adds_under_src_is_built(tmp_path: Path, backend: str) -> None:
    """The Makefiles pick up every C++ source below src/ by pattern, as the vendor's do: a file
    added in a new folder is in every build line of the package's main library."""
    if shutil.which("make") is None:
        pytest.skip("make is not installed (.ci/run installs it)")
    files = package_files(tmp_path / "work", [SOFTPLUS], backend, ARCHS[backend])
    folder = write(files, tmp_path / "p")
    added = folder / "src/utils/Added.cpp"
    added.parent.mkdir()
    added.write_text('#include "SoftplusPackage.hpp"\nint softplusAdded() { return 1; }\n')
    env = {**os.environ, "QNN_SDK_ROOT": "/qnn", "HEXAGON_SDK_ROOT": "/hexagon",
           "HEXAGON_TOOLS_ROOT": "/tools", "ANDROID_NDK_ROOT": "/ndk"}
    done = subprocess.run(["make", "-n", "all"], cwd=folder, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if " -shared -o " in line]
    main = [line for line in lines if "Interface.cpp" in line and "dsp_v65_v66" not in line]
    assert main and all("src/utils/Added.cpp" in line for line in main), lines
    assert not any("src/utils/Added.cpp" in line for line in lines if line not in main)
    syntax = subprocess.run([need_gxx(), "-std=c++17", "-fsyntax-only", "-Wall", "-Wextra",
                             "-Werror", f"-I{STANDIN / 'include'}", f"-I{folder / 'include'}",
                             str(added)], capture_output=True, text=True, timeout=60)
    assert syntax.returncode == 0, syntax.stderr
