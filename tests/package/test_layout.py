"""The files of each backend's package, for the Softplus example and a vendor-style config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .helpers import SOFTPLUS, SWISH, VENDOR, package_files

COMMON = ["Makefile", "config/softplus.xml", "config/swish.json", "package.json"]


def _expected(pkg: str, *extra: str) -> list[str]:
    return sorted([*COMMON, f"include/{pkg}.hpp", *extra])


EXAMPLE = {
    "CPU": ([], _expected(
        "SoftplusPackageCpu", "makefiles/Makefile.android-aarch64",
        "makefiles/Makefile.linux-x86_64", "src/SoftplusPackageCpuInterface.cpp",
        "src/ops/Softplus.cpp", "src/ops/Swish.cpp")),
    "GPU": ([], _expected(
        "SoftplusPackageGpu", "src/SoftplusPackageGpuInterface.cpp", "src/ops/Softplus.cpp",
        "src/ops/Swish.cpp", "src/kernels/Softplus.cl", "src/kernels/Swish.cl")),
    "DSP": (["v66", "v73"], _expected(
        "SoftplusPackageDsp", "src/SoftplusPackageDspInterface.cpp", "src/ops/Softplus.cpp",
        "src/ops/Swish.cpp", "src/dsp_v65_v66/SoftplusPackageDspInterface.cpp",
        "src/dsp_v65_v66/ops/Softplus.cpp", "src/dsp_v65_v66/ops/Swish.cpp")),
    "HTP": (["v68", "v73"], _expected(
        "SoftplusPackageHtp", "src/SoftplusPackageHtpInterface.cpp", "src/ops/Softplus.cpp",
        "src/ops/Swish.cpp")),
}

TARGETS = {
    "CPU": {"cpu_x86": ["build/x86_64-linux-clang/libSoftplusPackageCpu.so"],
            "cpu_android": ["build/aarch64-android/libSoftplusPackageCpu.so"]},
    "GPU": {"gpu_android": ["build/aarch64-android/libSoftplusPackageGpu.so"]},
    "DSP": {"dsp_x86": ["build/x86_64-linux-clang/libSoftplusPackageDsp.so"],
            "dsp_v73": ["build/hexagon-v73/libSoftplusPackageDsp.so"],
            "dsp_aarch64": ["build/aarch64-android/libSoftplusPackageDsp.so"],
            "dsp_v66": ["build/hexagon-v66/libSoftplusPackageDsp.so",
                        "build/hexagon-v66/libSoftplusPackageDsp_Softplus.so",
                        "build/hexagon-v66/libSoftplusPackageDsp_Swish.so"]},
    "HTP": {"htp_x86": ["build/x86_64-linux-clang/libSoftplusPackageHtp.so"],
            "htp_v68": ["build/hexagon-v68/libSoftplusPackageHtp.so"],
            "htp_v73": ["build/hexagon-v73/libSoftplusPackageHtp.so"],
            "htp_aarch64": ["build/aarch64-android/libSoftplusPackageHtp.so"]},
}


@pytest.mark.parametrize("backend", sorted(EXAMPLE))
def test_example_layout_and_manifest(tmp_path: Path, backend: str) -> None:
    archs, expected = EXAMPLE[backend]
    files = package_files(tmp_path, [SOFTPLUS, SWISH], backend, archs, [True, True])
    assert sorted(files) == expected
    assert files["config/softplus.xml"] == SOFTPLUS.read_bytes()
    manifest = json.loads(files["package.json"])
    name = f"SoftplusPackage{backend.title()}"
    assert manifest["package"] == name and manifest["backend"] == backend
    assert (manifest["domain"], manifest["package_version"]) == ("aisw", "1.0.0")
    assert manifest["generator_version"] == 2 and len(manifest["opdef_digest"]) == 64
    assert [op["name"] for op in manifest["ops"]] == ["Softplus", "Swish"]
    assert {t["name"]: t["outputs"] for t in manifest["targets"]} == TARGETS[backend]
    assert all(op["kernels_stub"] is None for op in manifest["ops"])
    for target in TARGETS[backend]:
        assert f"\n{target}:" in files["Makefile"].decode()


def test_dsp_for_v66_only_keeps_its_sources_in_their_folder(tmp_path: Path) -> None:
    files = package_files(tmp_path, [SOFTPLUS], "DSP", ["v65", "v66"])
    sources = sorted(f for f in files if f.startswith("src/"))
    assert sources == ["src/dsp_v65_v66/SoftplusPackageDspInterface.cpp",
                       "src/dsp_v65_v66/ops/Softplus.cpp"]
    targets = [t["name"] for t in json.loads(files["package.json"])["targets"]]
    assert targets == ["dsp_v65", "dsp_v66"]


def test_htp_without_arches_builds_host_and_device_prepare_only(tmp_path: Path) -> None:
    files = package_files(tmp_path, [SOFTPLUS], "HTP")
    targets = [t["name"] for t in json.loads(files["package.json"])["targets"]]
    assert targets == ["htp_x86", "htp_aarch64"]
    assert "# Note: no dsp arch was given" in files["Makefile"].decode()


VENDOR_OPS = {"CPU": ["ScaleClamp", "SumAll", "Softplus"], "GPU": ["ScaleClamp", "SumAll",
                                                                  "Softplus"],
              "DSP": ["ScaleClamp", "Requantize", "Softplus"],
              "HTP": ["ScaleClamp", "Requantize", "Softplus"]}


@pytest.mark.parametrize("backend", sorted(VENDOR_OPS))
def test_vendor_style_config_generates_every_op(tmp_path: Path, backend: str) -> None:
    files = package_files(tmp_path, [VENDOR, SOFTPLUS], backend, ["v66", "v73"])
    ops = VENDOR_OPS[backend]
    assert [op["name"] for op in json.loads(files["package.json"])["ops"]] == ops
    assert {f"src/ops/{op}.cpp" for op in ops} <= set(files)
    assert "emulator/VendorOps_kernels.py" in files
    assert "config/vendor_ops.xml" in files and "config/softplus.xml" in files
