"""Configs defining several packages (a SNPE JSON config's UdoPackage_0 and UdoPackage_1): each
package is its own, as the vendor's tools build them: its own folder, library, interface
provider and validateOpConfig, in `package`, `convert` and `run`; and `opdef show --backend`
agrees with `package --backend` on every config the tests hold."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest

from udo_build.cli import main
from udo_build.opdef.vocab import BACKENDS

DATA = Path(__file__).parent / "data"
TWO = DATA / "two_packages.json"
ROOT = Path(__file__).parents[2]


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err, env={})
    return code, out.getvalue(), err.getvalue()


def test_each_package_of_a_json_config_is_generated_apart(tmp_path: Path) -> None:
    code, out, err = cli("package", str(TWO), "--backend", "CPU", "--backend", "GPU", "--out",
                         str(tmp_path / "out"), "--store", str(tmp_path / "store"), "--json")
    assert (code, err) == (0, "")
    rows = {(r["backend"], r["package"]): r["ops"] for r in json.loads(out)["packages"]}
    # ActivationPackage has no GPU op: no GPU folder for it, as the vendor generates none
    assert rows == {("CPU", "ActivationPackage"): ["HardSwish"],
                    ("CPU", "ClampPackage"): ["ClampMin"], ("GPU", "ClampPackage"): ["ClampMin"]}
    for backend, name in rows:
        folder = tmp_path / "out" / backend / name
        manifest = json.loads((folder / "package.json").read_text())
        assert (manifest["package"], manifest["provider"]) == (name, f"{name}InterfaceProvider")
        assert manifest["package_version"] == ("1.2.0" if name == "ActivationPackage" else "1.0.0")
        libraries = [lib for t in manifest["targets"] for lib in t["outputs"]]
        assert f"libs/arm64-v8a/libUdo{name}Impl{backend.title()}.so" in libraries
        header = (folder / f"include/{name}.hpp").read_text()
        assert f'kPackageName = "{name}";' in header  # what validateOpConfig compares with
        interface = (folder / f"src/{name}Interface.cpp").read_text()
        ops = [op for op in ("HardSwish", "ClampMin") if f'{{"{op}", ' in interface]
        assert ops == rows[backend, name]  # validateOpConfig knows its own ops, only them


def test_a_model_of_the_second_package_converts_and_runs(tmp_path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    node = helper.make_node("ClampMin", ["x"], ["y"], domain="ClampPackage", name="clamp",
                            floor=0.5)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 4])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 4])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                      helper.make_opsetid("ClampPackage", 1)]),
              tmp_path / "m.onnx")
    (tmp_path / "k.py").write_text(
        "import numpy as np\nfrom udo_build.kernels.oppkg import OpPackage\n"
        'package = OpPackage("ActivationPackage")\n\n\n'
        '@package.op("ClampMin")\ndef clamp_min(x, *, floor=0.0):\n'
        "    return np.maximum(x, np.float32(floor))\n")
    np.array([-1, 0.25, 2, 0.75], "<f4").tofile(tmp_path / "x.raw")
    (tmp_path / "list.txt").write_text(f"{tmp_path / 'x.raw'}\n")
    code, _, err = cli("convert", str(tmp_path / "m.onnx"), "--opdef", str(TWO), "--out",
                       str(tmp_path / "m.udb"))
    assert code == 0, err
    code, out, err = cli("info", str(tmp_path / "m.udb"), "--json")
    assert code == 0 and json.loads(out)["udos"] == ["ClampPackage::ClampMin"]
    code, _, err = cli("run", str(tmp_path / "m.udb"), "--input-list", str(tmp_path / "list.txt"),
                       "--kernels", str(tmp_path / "k.py"), "--output-dir", str(tmp_path / "res"))
    assert code == 0, err
    got = np.fromfile(tmp_path / "res/Result_0/y.raw", "<f4")
    assert got.tolist() == [0.5, 0.5, 2.0, 0.75]


def _configs() -> list[Path]:
    found = [*(ROOT / "tests").rglob("*.xml"), *(ROOT / "tests").rglob("*.json"),
             *(ROOT / "examples").glob("*/ops/*")]
    return sorted(p for p in found if p.suffix in (".xml", ".json") and _is_config(p))


def _is_config(path: Path) -> bool:
    head = path.read_bytes()[:4096]
    return b"OpDefCollection" in head or b"UdoPackage_" in head


def _shown(config: Path, backend: str) -> tuple[int, list[tuple[str, list[str]]]]:
    code, out, _ = cli("opdef", "show", str(config), "--backend", backend, "--json")
    if code:
        return code, []
    return code, [(p["name"], [op["name"] for op in p["ops"]])
                  for p in json.loads(out)["packages"]]


def _generated(config: Path, backend: str, tmp: Path) -> tuple[int, list[tuple[str, list[str]]]]:
    arch = ["--arch", "v73"] if backend in ("DSP", "HTP") else []
    code, out, _ = cli("package", str(config), "--backend", backend, *arch, "--out",
                       str(tmp / "out" / config.parent.name / config.stem), "--store",
                       str(tmp / "store"), "--json")
    if code:
        return code, []
    return code, [(p["package"], p["ops"]) for p in json.loads(out)["packages"]]


@pytest.mark.parametrize("backend", BACKENDS)
def test_show_agrees_with_package_on_every_config(tmp_path: Path, backend: str) -> None:
    configs = _configs()
    assert len(configs) >= 15 and TWO in configs
    for config in configs:
        shown, generated = _shown(config, backend), _generated(config, backend, tmp_path)
        assert shown == generated, f"{config.relative_to(ROOT)} --backend {backend}"


def _recipe(tmp_path: Path, name: str = "") -> Path:
    import shutil

    shutil.copy(TWO, tmp_path / "two.json")
    recipe = tmp_path / "r.yaml"
    recipe.write_text("recipe: 1\nname: two\npackage:\n" + (f"  name: {name}\n" if name else "")
                      + "  ops: [{config: two.json}]\n  backends: [CPU, GPU]\n")
    return recipe


def test_a_recipe_build_generates_each_package_apart(tmp_path: Path) -> None:
    recipe = _recipe(tmp_path)
    code, _, err = cli("build", str(recipe), "--store", str(tmp_path / "store"), "--out",
                       str(tmp_path / "out"), "-j", "1")
    assert code == 0, err
    folders = sorted(str(p.relative_to(tmp_path / "out/packages"))
                     for p in (tmp_path / "out/packages").glob("*/*"))
    assert folders == ["CPU/ActivationPackage", "CPU/ClampPackage", "GPU/ClampPackage"]
    for folder in folders:
        name = folder.split("/")[1]
        manifest = json.loads((tmp_path / "out/packages" / folder / "package.json").read_text())
        assert manifest["package"] == name and manifest["provider"] == f"{name}InterfaceProvider"
    code, _, err = cli("validate", str(_recipe(tmp_path, "OtherName")))
    assert code == 2
    assert "package.name OtherName is none of the packages the op configs define: " \
        "ActivationPackage, ClampPackage" in err


def test_a_recipe_build_tells_the_vendor_typing_once_built_or_cached(tmp_path: Path) -> None:
    import shutil

    shutil.copy(DATA / "mllm_style.xml", tmp_path / "ops.xml")
    recipe = tmp_path / "r.yaml"
    recipe.write_text("recipe: 1\nname: mini\npackage:\n  ops: [{config: ops.xml}]\n"
                      "  backends: [HTP]\n")
    for _ in range(2):  # built, then cached: said each time, once
        code, _, err = cli("build", str(recipe), "--store", str(tmp_path / "store"), "--out",
                           str(tmp_path / "out"), "-j", "1")
        assert code == 0, err
        typed = [line for line in err.splitlines() if "BACKEND_SPECIFIC" in line]
        assert [line.split(";")[0] for line in typed] == [
            f"warning: {tmp_path / 'ops.xml'}:15: OpDef[RoPESimple]: op RoPESimple: "
            "BACKEND_SPECIFIC with no datatype for backend HTP"]
    ops = json.loads((tmp_path / "out/packages/HTP/MiniLLaMAPackage/package.json").read_text())
    assert [op["name"] for op in ops["ops"]] == ["SiLU", "RoPESimple"]
