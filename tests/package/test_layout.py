"""The files of each backend's package, for the Softplus example and a vendor-style config."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from udo_build.package import GENERATOR_VERSION

from .helpers import SOFTPLUS, SWISH, VENDOR, package_files, package_outputs

COMMON = ["Makefile", "config/softplus.xml", "config/swish.json", "package.json"]


def _expected(pkg: str, *extra: str) -> list[str]:
    return sorted([*COMMON, f"include/{pkg}.hpp", *extra])


PKG = "SoftplusPackage"  # every backend's package keeps the PackageName
SOURCES = [f"src/{PKG}Interface.cpp", "src/ops/Softplus.cpp", "src/ops/Swish.cpp"]
EXAMPLE = {
    "CPU": ([], _expected(PKG, "makefiles/Makefile.android-aarch64",
                          "makefiles/Makefile.linux-x86_64", *SOURCES)),
    "GPU": ([], _expected(PKG, *SOURCES, "src/kernels/Softplus.cl", "src/kernels/Swish.cl")),
    "DSP": (["v66", "v73"], _expected(
        PKG, *SOURCES, f"src/dsp_v65_v66/{PKG}Interface.cpp",
        "src/dsp_v65_v66/ops/Softplus.cpp", "src/dsp_v65_v66/ops/Swish.cpp")),
    "HTP": (["v68", "v73"], _expected(PKG, *SOURCES)),
}

# as the vendor's generated makefiles name them: HTP and DSP build/<target>/libQnn<Pkg>.so,
# CPU and GPU libs/<target>/lib<Pkg>.so
TARGETS = {
    "CPU": {"cpu_x86": [f"libs/x86_64-linux-clang/lib{PKG}.so"],
            "cpu_android": [f"libs/aarch64-android/lib{PKG}.so"]},
    "GPU": {"gpu_android": [f"libs/aarch64-android/lib{PKG}.so"]},
    "DSP": {"dsp_x86": [f"build/x86_64-linux-clang/libQnn{PKG}.so"],
            "dsp_v73": [f"build/hexagon-v73/libQnn{PKG}.so"],
            "dsp_aarch64": [f"build/aarch64-android/libQnn{PKG}.so"],
            "dsp_v66": [f"build/hexagon-v66/libQnn{PKG}.so",
                        f"build/hexagon-v66/lib{PKG}_Softplus.so",
                        f"build/hexagon-v66/lib{PKG}_Swish.so"]},
    "HTP": {"htp_x86": [f"build/x86_64-linux-clang/libQnn{PKG}.so"],
            "htp_v68": [f"build/hexagon-v68/libQnn{PKG}.so"],
            "htp_v73": [f"build/hexagon-v73/libQnn{PKG}.so"],
            "htp_aarch64": [f"build/aarch64-android/libQnn{PKG}.so"]},
}


@pytest.mark.parametrize("backend", sorted(EXAMPLE))
def test_example_layout_and_manifest(tmp_path: Path, backend: str) -> None:
    archs, expected = EXAMPLE[backend]
    files = package_files(tmp_path, [SOFTPLUS, SWISH], backend, archs, [True, True])
    assert sorted(files) == expected
    assert files["config/softplus.xml"] == SOFTPLUS.read_bytes()
    manifest = json.loads(files["package.json"])
    assert manifest["package"] == PKG and manifest["backend"] == backend
    assert (manifest["flavor"], manifest["provider"]) == ("qnn", f"{PKG}InterfaceProvider")
    assert (manifest["domain"], manifest["package_version"]) == ("aisw", "1.0.0")
    assert manifest["generator_version"] == GENERATOR_VERSION
    assert len(manifest["opdef_digest"]) == 64
    assert [op["name"] for op in manifest["ops"]] == ["Softplus", "Swish"]
    assert {t["name"]: t["outputs"] for t in manifest["targets"]} == TARGETS[backend]
    assert all(op["kernels_stub"] is None for op in manifest["ops"])
    for target in TARGETS[backend]:
        assert f"\n{target}:" in files["Makefile"].decode()


def test_dsp_for_v66_only_keeps_its_sources_in_their_folder(tmp_path: Path) -> None:
    files = package_files(tmp_path, [SOFTPLUS], "DSP", ["v65", "v66"])
    sources = sorted(f for f in files if f.startswith("src/"))
    assert sources == ["src/dsp_v65_v66/SoftplusPackageInterface.cpp",
                       "src/dsp_v65_v66/ops/Softplus.cpp"]
    targets = [t["name"] for t in json.loads(files["package.json"])["targets"]]
    assert targets == ["dsp_v65", "dsp_v66"]


def test_htp_without_arches_builds_every_arch_the_sdk_supports(tmp_path: Path) -> None:
    files = package_files(tmp_path, [SOFTPLUS], "HTP")
    targets = [t["name"] for t in json.loads(files["package.json"])["targets"]]
    assert targets == ["htp_x86", "htp_v68", "htp_v69", "htp_v73", "htp_v75", "htp_v79",
                       "htp_v81", "htp_aarch64"]
    assert "# Note: no dsp arch was given" in files["Makefile"].decode()


VENDOR_OPS = {"CPU": ["ScaleClamp", "SumAll"], "GPU": ["ScaleClamp", "SumAll"],
              "DSP": ["ScaleClamp", "Requantize"], "HTP": ["ScaleClamp", "Requantize"]}


@pytest.mark.parametrize("backend", sorted(VENDOR_OPS))
def test_vendor_style_config_generates_every_op(tmp_path: Path, backend: str) -> None:
    # two configs naming two packages: each is generated on its own, as the vendor's tools do
    outputs = package_outputs(tmp_path, [VENDOR, SOFTPLUS], backend, ["v66", "v73"])
    assert outputs.pop("_publish") == {f"packages/{backend}/VendorOps": "package",
                                       f"packages/{backend}/{PKG}": f"package:{PKG}"}
    assert sorted(outputs) == ["package", f"package:{PKG}"]
    for files, name, ops, config in (
            (outputs["package"], "VendorOps", VENDOR_OPS[backend], "vendor_ops.xml"),
            (outputs[f"package:{PKG}"], PKG, ["Softplus"], "softplus.xml")):
        manifest = json.loads(files["package.json"])
        assert (manifest["package"], [op["name"] for op in manifest["ops"]]) == (name, ops)
        assert {f"src/ops/{op}.cpp" for op in ops} <= set(files)
        assert f"emulator/{name}_kernels.py" in files
        assert [f for f in files if f.startswith("config/")] == [f"config/{config}"]


REG = {p: f"libs/{f}/libUdo{PKG}Reg.so" for p, f in (("x86", "x86-64_linux_clang"),
                                                      ("aarch64", "arm64-v8a"))}
SNPE_TARGETS = {
    "CPU": {"cpu_x86": ["libs/x86-64_linux_clang/libUdoSoftplusPackageImplCpu.so", REG["x86"]],
            "cpu_android": ["libs/arm64-v8a/libUdoSoftplusPackageImplCpu.so", REG["aarch64"]]},
    # no x86 GPU library: the registration library's x86 build has a target of its own
    "GPU": {"gpu_android": ["libs/arm64-v8a/libUdoSoftplusPackageImplGpu.so", REG["aarch64"]],
            "reg_x86": [REG["x86"]]},
    "DSP": {"dsp_x86": ["libs/x86-64_linux_clang/libUdoSoftplusPackageImplDsp.so", REG["x86"]],
            "dsp_v73": ["libs/dsp_v73/libUdoSoftplusPackageImplDsp.so"],
            "dsp_aarch64": ["libs/arm64-v8a/libUdoSoftplusPackageImplDsp_AltPrep.so",
                            REG["aarch64"]],
            "dsp_v66": ["libs/dsp_v66/libUdoSoftplusPackageImplDsp.so",
                        "libs/dsp_v66/libSoftplusPackage_Swish.so"]},
}


@pytest.mark.parametrize("backend", sorted(SNPE_TARGETS))
def test_snpe_json_configs_take_the_snpe_udo_library_names(tmp_path: Path, backend: str) -> None:
    files = package_files(tmp_path, [SWISH], backend, ["v66", "v73"] * (backend == "DSP"))
    manifest = json.loads(files["package.json"])
    assert (manifest["package"], manifest["flavor"]) == (PKG, "snpe")
    assert {t["name"]: t["outputs"] for t in manifest["targets"]} == SNPE_TARGETS[backend]
    assert f"include/{PKG}.hpp" in files
    assert f"src/reg/{PKG}RegLib.cpp" in files  # the registration library's source


def test_only_snpe_packages_have_a_registration_library(tmp_path: Path) -> None:
    files = package_files(tmp_path, [SOFTPLUS, SWISH], "CPU")  # XML and JSON: the QNN layout
    assert not any(f.startswith("src/reg/") for f in files)
    built = b"".join(v for k, v in files.items() if "akefile" in k or k == "package.json")
    assert b"libs/x86_64-linux-clang/libSoftplusPackage.so" in built and b"Reg.so" not in built
