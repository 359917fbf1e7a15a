"""`quantize.algorithms` in the plan and the build: equalize before quantize, adaround then
bias-correct after it (whatever order the recipe lists them in), each its own cached action (new
AdaRound settings re-run only adaround and what follows), the last one's outputs published with
the per-layer SQNR of every stage; unknown names and stray settings are user errors naming the
line and the field."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from udo_build.builder.plan import Dep, plan_recipe
from udo_build.cli import main
from udo_build.errors import UserError
from udo_build.recipe import load_recipe

RECIPE = """recipe: 1
name: algos
model: {{onnx: net.onnx}}
quantize:
  input_list: calib.txt
  quantizer: enhanced
  algorithms: {algorithms}
{extra}run:
  - {{name: smoke, soc: sm8550, input_list: calib.txt, precision: int8}}
"""


def write_net(path: Path) -> None:
    """x[1,3,8,8] -> Conv 3x3 -> BatchNormalization -> Relu -> Conv 1x1 -> y."""
    rng = np.random.default_rng(0)
    inits = {"w0": rng.standard_normal((6, 3, 3, 3)) * 0.3, "g": rng.uniform(0.1, 3, 6),
             "b": rng.uniform(0, 2, 6), "m": np.zeros(6), "v": np.ones(6),
             "w1": rng.standard_normal((4, 6, 1, 1)) * 0.4, "b1": np.zeros(4)}
    nodes = [helper.make_node("Conv", ["x", "w0"], ["c0"], pads=[1, 1, 1, 1]),
             helper.make_node("BatchNormalization", ["c0", "g", "b", "m", "v"], ["n0"]),
             helper.make_node("Relu", ["n0"], ["r0"]),
             helper.make_node("Conv", ["r0", "w1", "b1"], ["y"])]
    graph = helper.make_graph(
        nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def project(root: Path, algorithms: str, extra: str = "") -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / ".udo-build-root").write_text("")
    write_net(root / "net.onnx")
    rng = np.random.default_rng(1)
    for i in range(3):
        rng.standard_normal((1, 3, 8, 8)).astype(np.float32).tofile(root / f"in{i}.raw")
    (root / "calib.txt").write_text("".join(f"in{i}.raw\n" for i in range(3)))
    recipe = root / "r.yaml"
    recipe.write_text(RECIPE.format(algorithms=algorithms, extra=extra))
    return recipe


def test_the_plan_runs_the_algorithms_in_data_flow_order(tmp_path: Path) -> None:
    plan = plan_recipe(load_recipe(project(tmp_path, "[bias_correction, adaround, cle]")))
    ids = list(plan.actions)
    assert ids[:5] == ["convert", "equalize", "quantize", "adaround", "bias-correct"]
    assert plan.actions["quantize"].inputs["bundle"] == Dep("equalize", "bundle")
    assert plan.actions["bias-correct"].inputs["bundle"] == Dep("adaround", "bundle")
    # the float weights AdaRound rounded, which bias correction compares the rounded ones with
    assert plan.actions["bias-correct"].inputs["reference"] == Dep("quantize", "bundle")
    assert plan.actions["run:smoke"].inputs["bundle"] == Dep("bias-correct", "bundle")
    assert plan.actions["quantize"].publish == {}
    assert "quant/layers.json" in (plan.actions["bias-correct"].publish or {})


def test_new_adaround_settings_leave_equalize_and_quantize_alone(tmp_path: Path) -> None:
    one = plan_recipe(load_recipe(project(tmp_path / "a", "[cle, adaround]")))
    two = plan_recipe(load_recipe(project(tmp_path / "b", "[cle, adaround]",
                                          "  adaround: {iterations: 7, seed: 3}\n")))
    for aid in ("equalize", "quantize"):
        assert one.actions[aid].params == two.actions[aid].params
        assert set(one.actions[aid].inputs) == set(two.actions[aid].inputs)
    assert one.actions["adaround"].params["iterations"] == 200
    assert two.actions["adaround"].params["iterations"] == 7


def problems(recipe: Path) -> list[str]:
    with pytest.raises(UserError) as info:
        load_recipe(recipe)
    return [f"{p.line}: {p.field}: {p.message}" for p in info.value.problems]


def test_an_unknown_algorithm_names_its_line_and_field(tmp_path: Path) -> None:
    found = problems(project(tmp_path, "[cle, adaroud]"))
    assert len(found) == 1 and found[0].startswith("7: quantize.algorithms[1]: ")
    assert "adaroud" in found[0]


def test_adaround_settings_without_adaround_are_refused(tmp_path: Path) -> None:
    found = problems(project(tmp_path, "[cle]", "  adaround: {iterations: 7}\n"))
    assert found == ["8: quantize.adaround: AdaRound settings, but quantize.algorithms does "
                     "not list adaround"]


def build(recipe: Path) -> dict:
    out, err = io.StringIO(), io.StringIO()
    root = recipe.parent
    code = main(["build", str(recipe), "--store", str(root / "store"), "--out",
                 str(root / "out"), "--no-remote", "--json", "-j", "1"],
                stdout=out, stderr=err, env={})
    assert code == 0, err.getvalue()
    return json.loads(out.getvalue())


def test_the_build_measures_every_stage_and_reruns_only_what_changed(tmp_path: Path) -> None:
    recipe = project(tmp_path, "[cle, adaround, bias_correction]",
                     "  adaround: {iterations: 20, samples: 64}\n")
    build(recipe)
    layers = json.loads((tmp_path / "out/quant/layers.json").read_text())
    assert [s["step"] for s in layers["stages"]] == ["quantize", "adaround", "bias_correction"]
    assert layers["stages"][0]["equalized"] is True
    assert [x["sqnr_db"] for x in layers["layers"]] == layers["stages"][-1]["sqnr_db"]
    assert "SQNR per layer, stage by stage" in (tmp_path / "out.report.html").read_text()
    recipe.write_text(recipe.read_text().replace("iterations: 20", "iterations: 10"))
    report = build(recipe)
    ran = sorted(a["id"] for a in report["actions"] if a["status"] == "built")
    assert ran == ["adaround", "bias-correct", "run:smoke"]


def test_the_report_page_shows_the_stages(tmp_path: Path) -> None:
    from udo_build.builder.report_chart import layer_rows
    from udo_build.builder.report_stages import read_stages, stages_section

    (tmp_path / "quant").mkdir()
    layers = [{"index": 0, "node": "conv1", "op": "Conv", "tensor": "t", "sqnr_db": 31.5}]
    stages = [{"step": "quantize", "equalized": True, "sqnr_db": [30.0]},
              {"step": "adaround", "sqnr_db": [31.5]}]
    (tmp_path / "quant/layers.json").write_text(json.dumps({"inputs": 1, "layers": layers,
                                                            "stages": stages}))
    html = stages_section(read_stages(tmp_path) or [], layer_rows(layers))
    assert "<th>quantize after CLE dB</th><th>adaround dB</th>" in html
    assert "<td>conv1</td><td>30.00</td><td>31.50</td><td>+1.50</td>" in html
    assert read_stages(tmp_path / "nowhere") is None
