"""`udo-build init MODEL.onnx`: an op config, a kernels stub and a recipe for the nodes the
emulator does not know; and the vendor spellings of options."""

from __future__ import annotations

import importlib.util
import io
import json
import shutil
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from udo_build.cli import build_parser, main
from udo_build.errors import Diagnostics
from udo_build.opdef import load_config

EXAMPLE = Path(__file__).parents[2] / "examples" / "softplus"


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), stdout=out, stderr=err), out.getvalue(), err.getvalue()


@pytest.fixture
def project(tmp_path: Path) -> Path:
    (tmp_path / ".udo-build-root").touch()
    (tmp_path / "model").mkdir()
    shutil.copy(EXAMPLE / "model" / "net.onnx", tmp_path / "model" / "net.onnx")
    return tmp_path


def test_init_writes_a_config_a_stub_and_a_recipe_that_validates(project: Path) -> None:
    code, out, err = cli("init", str(project / "model" / "net.onnx"), "--out", str(project),
                         "--json")
    assert code == 0, err
    report = json.loads(out)
    assert [op["name"] for op in report["ops"]] == ["Softplus", "Swish"]
    config = project / "ops" / "NetOpPackage.xml"
    data = [project / "data" / f for f in ("calib.txt", "test.txt", "test/input_00.raw",
                                           *(f"calib/input_{k:02d}.raw" for k in range(4)))]
    assert sorted(report["files"]) == sorted(
        str(p) for p in (config, project / "ops" / "NetOpPackage_kernels.py",
                         project / "net.yaml", *data))
    (package,) = load_config(config, Diagnostics())
    assert (package.name, package.domain) == ("NetOpPackage", "aisw")
    softplus = package.ops[0]
    assert [(t.rank, t.datatypes) for t in (*softplus.inputs, *softplus.outputs)] == [
        ("4D", ("FLOAT_32",))] * 2
    assert [(p.name, p.datatypes, p.rank, p.mandatory) for p in softplus.params] == [
        ("beta", ("FLOAT_32",), "SCALAR", True)]
    assert cli("opdef", "show", str(config))[0] == 0
    code, _, err = cli("validate", str(project / "net.yaml"))
    assert code == 0, err
    stub = _module(project / "ops" / "NetOpPackage_kernels.py")
    with pytest.raises(NotImplementedError, match="kernel not written: Softplus in .*"
                                                  "NetOpPackage_kernels.py: write"):
        stub.softplus(None, beta=1.0)


def test_placeholder_inputs_of_the_model_shapes_said_so_and_the_same_on_every_init(
        project: Path, tmp_path_factory: pytest.TempPathFactory) -> None:
    code, out, err = cli("init", str(project / "model" / "net.onnx"), "--out", str(project))
    assert code == 0 and "PLACEHOLDERS" in err and "input [1, 3, 32, 32]" in err, err
    recipe = (project / "net.yaml").read_text()
    assert "# PLACEHOLDER DATA" in recipe and 'input_list: "data/calib.txt"' in recipe
    listing = (project / "data" / "calib.txt").read_text().splitlines()
    assert listing == [f"calib/input_{k:02d}.raw" for k in range(4)]
    first = (project / "data" / "calib" / "input_00.raw").read_bytes()
    values = np.frombuffer(first, "<f4")
    assert values.size == 3 * 32 * 32 and 0.5 < values.std() < 2  # normal, not zeros
    assert first != (project / "data" / "calib" / "input_01.raw").read_bytes()
    again = tmp_path_factory.mktemp("again")
    (again / ".udo-build-root").touch()
    shutil.copy(project / "model" / "net.onnx", again / "net.onnx")
    assert cli("init", str(again / "net.onnx"), "--out", str(again))[0] == 0
    assert (again / "data" / "calib" / "input_00.raw").read_bytes() == first


def test_placeholders_of_several_inputs_are_named_and_typed(tmp_path: Path) -> None:
    (tmp_path / ".udo-build-root").touch()
    inputs = [helper.make_tensor_value_info("a", TensorProto.FLOAT, [2, 3]),
              helper.make_tensor_value_info("ids", TensorProto.INT64, [5]),
              helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])]
    graph = helper.make_graph([helper.make_node("Mix", ["a", "ids", "x"], ["y"], domain="acme")],
                              "g", inputs, [helper.make_tensor_value_info(
                                  "y", TensorProto.FLOAT, [2, 3])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                      helper.make_opsetid("acme", 1)]),
              tmp_path / "mix.onnx")
    code, _, err = cli("init", str(tmp_path / "mix.onnx"), "--out", str(tmp_path))
    assert code == 0 and "x [1, 4]; symbolic dimensions as 1" in err, err
    data = tmp_path / "data"
    assert (data / "test.txt").read_text() == (
        "a:=test/input_00_0.raw ids:=test/input_00_1.raw x:=test/input_00_2.npy\n")
    ids = np.frombuffer((data / "test" / "input_00_1.raw").read_bytes(), "<f4")
    assert ids.size == 5 and set(ids) <= {0, 1, 2, 3}
    assert np.load(data / "test" / "input_00_2.npy").shape == (1, 4)
    assert '    input_dimensions: {"a": [2, 3], "ids": [5], "x": [1, 4]}' in (
        tmp_path / "mix.yaml").read_text()
    assert cli("validate", str(tmp_path / "mix.yaml"))[0] == 0


def test_an_unwritten_kernel_fails_the_build_then_the_written_project_goes_end_to_end(
        project: Path) -> None:
    assert cli("init", str(project / "model" / "net.onnx"), "--out", str(project))[0] == 0
    build = ("build", str(project / "net.yaml"), "--store", str(project / "store"),
             "--out", str(project / "out"))
    code, _, err = cli(*build)
    assert code == 1, err
    assert "failed: quantize" in err and "kernel not written: Softplus in " in err
    assert "ops/NetOpPackage_kernels.py: write its numpy kernel there" in err
    kernels = (EXAMPLE / "ops" / "kernels.py").read_text()
    (project / "ops" / "NetOpPackage_kernels.py").write_text(
        kernels.replace('OpPackage("SoftplusPackage")', 'OpPackage("NetOpPackage")'))
    code, out, err = cli(*build, "--json")
    assert code == 0, err
    actions = {a["id"]: a for a in json.loads(out)["actions"]}
    assert {"convert", "package:CPU", "package:HTP", "quantize", "assemble", "run:check",
            "check:check"} <= set(actions)
    assert actions["run:check"]["status"] == "built" == actions["check:check"]["status"]
    assert (project / "out" / "model" / "net_quantized.udb").is_file()
    assert (project / "out" / "packages" / "HTP" / "NetOpPackage").is_dir()
    code, out, err = cli("info", str(project / "out" / "model" / "net.udb"), "--json")
    assert code == 0 and json.loads(out)["udos"] == ["NetOpPackage::Softplus",
                                                    "NetOpPackage::Swish"], err


def test_init_refuses_to_overwrite_and_writes_nothing(project: Path) -> None:
    (project / "net.yaml").write_text("mine\n")
    code, _, err = cli("init", str(project / "model" / "net.onnx"), "--out", str(project))
    assert code == 2 and "net.yaml" in err and "does not overwrite" in err
    assert (project / "net.yaml").read_text() == "mine\n" and not (project / "ops").exists()


def test_a_model_outside_the_project_is_refused(project: Path, tmp_path_factory:
                                                pytest.TempPathFactory) -> None:
    elsewhere = tmp_path_factory.mktemp("elsewhere")
    (elsewhere / ".udo-build-root").touch()
    code, _, err = cli("init", str(project / "model" / "net.onnx"), "--out", str(elsewhere))
    assert code == 2 and "outside the project" in err and not list(elsewhere.iterdir())[1:]


def test_optional_inputs_typed_parameters_and_onnx_ops_the_emulator_lacks(
        tmp_path: Path) -> None:
    (tmp_path / ".udo-build-root").touch()
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    nodes = [
        helper.make_node("Mix", ["x", "x"], ["a"], name="mix1", domain="acme", axes=[0, 1],
                         alpha=0.5, mode="fast", count=3),
        helper.make_node("Mix", ["a"], ["b"], name="mix2", domain="acme", axes=[1],
                         alpha=1.5),
        helper.make_node("MaxRoiPool", ["b", "rois"], ["y"], name="roipool",
                         pooled_shape=[1, 1]),
    ]
    rois = helper.make_tensor("rois", TensorProto.FLOAT, [1, 5], [0, 0, 0, 1, 1])
    graph = helper.make_graph(nodes, "g", [x], [helper.make_tensor_value_info(
        "y", TensorProto.FLOAT, [1, 3, 1, 1])], [rois])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid("acme", 1)])
    onnx.save(model, tmp_path / "mix.onnx")
    code, _, err = cli("init", str(tmp_path / "mix.onnx"), "--out", str(tmp_path),
                       "--package", "AcmePkg")
    assert code == 0, err
    (package,) = load_config(tmp_path / "ops" / "AcmePkg.xml", Diagnostics())
    mix, roipool = package.ops
    assert package.domain == "acme"
    assert [t.mandatory for t in mix.inputs] == [True, False]
    params = {p.name: (p.rank, p.datatypes, p.mandatory,
                       p.default.value if p.default else None) for p in mix.params}
    assert params == {"axes": ("1D", ("INT_32",), True, None),
                      "alpha": ("SCALAR", ("FLOAT_32",), True, None),
                      "mode": ("SCALAR", ("STRING",), False, "fast"),
                      "count": ("SCALAR", ("INT_32",), False, 3)}
    assert roipool.use_default_translation and not mix.use_default_translation
    assert [(t.rank, t.datatypes) for t in roipool.inputs] == [("ND", ("FLOAT_32",)),
                                                               ("2D", ("FLOAT_32",))]
    code, _, err = cli("validate", str(tmp_path / "mix.yaml"))
    assert code == 0, err


def test_a_model_without_custom_nodes_needs_no_init(tmp_path: Path) -> None:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [x],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]),
              tmp_path / "plain.onnx")
    code, _, err = cli("init", str(tmp_path / "plain.onnx"), "--out", str(tmp_path))
    assert code == 2 and "default package" in err and sorted(p.name for p in
                                                              tmp_path.iterdir()) == ["plain.onnx"]


@pytest.mark.parametrize(("argv", "expected"), [
    (["run", "b.udb", "--input_list", "l.txt", "--output_dir", "o"],
     {"input_list": "l.txt", "output_dir": "o"}),
    (["quant-report", "b.udb", "--input_list", "l.txt"], {"input_list": "l.txt"}),
    (["convert", "m.onnx", "--op_package_config", "a.xml", "--udo_config_paths", "b.json",
      "--output_path", "m.udb"], {"opdef": ["a.xml", "b.json"], "out": "m.udb"}),
    (["package", "a.xml", "--backend", "HTP", "--output_path", "pkgs"], {"out": "pkgs"}),
])
def test_vendor_spellings_are_aliases(argv: list[str], expected: dict[str, object]) -> None:
    args = build_parser([argv[0]]).parse_args(argv)
    assert {k: getattr(args, k) for k in expected} == expected


def _module(path: Path):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("init_stub", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
