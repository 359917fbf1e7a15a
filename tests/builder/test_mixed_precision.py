"""`quantize.target` in the plan and the build: the reference and alternate models, the
sensitivities (keys without the target), the search and the final quantize with the chosen
widths; a second target re-runs only the search and what follows; a target out of reach is a
user error naming the best SQNR there is; the widths reach the encodings and the report page."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from udo_build.builder.plan import SENSITIVITY_GROUPS, Dep, plan_recipe
from udo_build.cli import main
from udo_build.errors import UserError
from udo_build.recipe import load_recipe

RECIPE = """recipe: 1
name: mixed
model: {{onnx: net.onnx}}
quantize:
  input_list: calib.txt
  per_channel: true
  target: {target}
run:
  - {{name: smoke, soc: sm8550, input_list: held.txt, precision: int8}}
"""
SHAPE = (1, 3, 8, 8)


def write_net(path: Path) -> None:
    """x -> Conv 3x3 (8) -> Relu -> Conv 3x3 (8) -> Relu -> Conv 1x1 (4) -> y."""
    rng = np.random.default_rng(0)
    inits = {"w0": rng.standard_normal((8, 3, 3, 3)) * 0.3, "b0": rng.uniform(0, 0.3, 8),
             "w1": rng.standard_normal((8, 8, 3, 3)) * 0.2, "b1": rng.uniform(0, 0.3, 8),
             "w2": rng.standard_normal((4, 8, 1, 1)) * 0.4, "b2": np.zeros(4)}
    nodes = [helper.make_node("Conv", ["x", "w0", "b0"], ["c0"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c0"], ["r0"]),
             helper.make_node("Conv", ["r0", "w1", "b1"], ["c1"], pads=[1, 1, 1, 1]),
             helper.make_node("Relu", ["c1"], ["r1"]),
             helper.make_node("Conv", ["r1", "w2", "b2"], ["y"])]
    graph = helper.make_graph(
        nodes, "net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, SHAPE)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4, 8, 8])],
        [numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()])
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


def project(root: Path, target: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / ".udo-build-root").write_text("")
    write_net(root / "net.onnx")
    rng = np.random.default_rng(1)
    for i in range(5):  # one outlier each: 8-bit activations are coarse, 16-bit ones are not
        x = rng.standard_normal(SHAPE).astype(np.float32)
        x[0, i % 3, 4, 4] = 25.0
        x.tofile(root / f"in{i}.raw")
    (root / "calib.txt").write_text("".join(f"in{i}.raw\n" for i in range(3)))
    (root / "held.txt").write_text("in3.raw\nin4.raw\n")
    recipe = root / "r.yaml"
    recipe.write_text(RECIPE.format(target=target))
    return recipe


def build(recipe: Path, expect: int = 0) -> tuple[dict, str]:
    out, err = io.StringIO(), io.StringIO()
    root = recipe.parent
    code = main(["build", str(recipe), "--store", str(root / "store"), "--out",
                 str(root / "out"), "--no-remote", "--json", "-j", "1"],
                stdout=out, stderr=err, env={})
    assert code == expect, err.getvalue()
    return json.loads(out.getvalue()) if out.getvalue() else {}, err.getvalue()


def built(report: dict) -> list[str]:
    return sorted(a["id"] for a in report["actions"] if a["status"] == "built")


def test_the_plan_keys_no_sensitivity_by_the_target(tmp_path: Path) -> None:
    one = plan_recipe(load_recipe(project(tmp_path / "a", "{min_sqnr_db: 30}")))
    two = plan_recipe(load_recipe(project(tmp_path / "b", "{min_sqnr_db: 40}")))
    sensitivities = [f"mixed-sensitivity:{g}" for g in range(SENSITIVITY_GROUPS)]
    for aid in ["quantize:reference", "quantize:alternate", *sensitivities]:
        assert one.actions[aid].params == two.actions[aid].params
    assert one.actions["quantize:alternate"].params["act_bitwidth"] == 16
    assert one.actions["quantize:alternate"].params["weights_bitwidth"] == 4
    assert one.actions["mixed-search"].params["min_sqnr_db"] == 30
    assert one.actions["quantize"].inputs["widths"] == Dep("mixed-search", "widths")
    held = one.actions["mixed-sensitivity:0"].inputs["input_list"]
    assert held.path.name == "held.txt"  # the run's inputs: not the calibration list


def unit_widths(encodings: dict) -> dict[str, int]:
    return {e["name"]: e["bw"] for section in ("activation_encodings", "param_encodings")
            for e in encodings[section]}


def output_sqnr(root: Path) -> float:
    """The published quantized model's output SQNR over the held-out inputs, measured here."""
    from udo_build.ir.bundle import read_bundle
    from udo_build.ir.qmodel import from_bundle
    from udo_build.runtime.float_session import Session
    from udo_build.runtime.integer import QuantizedSession

    qmodel = from_bundle(read_bundle((root / "out/model/net_quantized.udb").read_bytes()))
    exact, approx = Session(qmodel.model), QuantizedSession(qmodel)
    signal = noise = 0.0
    for name in ("in3.raw", "in4.raw"):
        x = {"x": np.fromfile(root / name, np.float32).reshape(SHAPE)}
        ref, got = exact.run(x, ["y"])["y"], approx.run(x, ["y"])["y"]
        signal += float(np.sum(ref.astype(np.float64) ** 2))
        noise += float(np.sum((ref.astype(np.float64) - got) ** 2))
    return 10 * np.log10(signal / noise)


def test_the_target_is_met_and_a_second_one_reruns_only_the_search(tmp_path: Path) -> None:
    recipe = project(tmp_path, "{min_sqnr_db: 12}")  # below the 8-bit model: weights to 4 bits
    report, _ = build(recipe)
    assert "mixed-sensitivity:0" in built(report)
    mixed = json.loads((tmp_path / "out/quant/mixed.json").read_text())
    reference_db = mixed["reference"]["sqnr_db"]
    assert mixed["weights"]["bits"].get("4", 0) > 0 and mixed["chosen"]["sqnr_db"] >= 12
    assert mixed["chosen"]["record_bytes"] < mixed["reference"]["record_bytes"]
    assert output_sqnr(tmp_path) >= 12

    higher = round(reference_db + 1.5, 1)  # above the 8-bit model: activations to 16 bits
    recipe.write_text(recipe.read_text().replace("min_sqnr_db: 12", f"min_sqnr_db: {higher}"))
    report, _ = build(recipe)
    assert built(report) == ["mixed-search", "quantize", "run:smoke"]
    mixed = json.loads((tmp_path / "out/quant/mixed.json").read_text())
    assert mixed["activations"]["bits"].get("16", 0) > 0 and mixed["chosen"]["sqnr_db"] >= higher
    assert output_sqnr(tmp_path) >= higher
    widths = json.loads((tmp_path / "out/model/net_quantized.encodings.json").read_text())
    chosen = {u["name"]: u["bits"] for u in mixed["units"]}
    assert {k: unit_widths(widths)[k] for k in chosen} == chosen
    assert 16 in chosen.values()
    page = (tmp_path / "out.report.html").read_text()
    assert "<h2>Mixed precision</h2>" in page and f"{higher:g} dB over 2 held-out" in page


def test_a_target_out_of_reach_names_the_best_there_is(tmp_path: Path) -> None:
    recipe = project(tmp_path, "{min_sqnr_db: 150}")
    _, err = build(recipe, expect=2)
    assert "r.yaml:7" in err and "quantize.target.min_sqnr_db" in err
    assert "150 dB is out of reach: the best widths tried give" in err
    assert "(every activation at 16 bits and every weight at 8: " in err
    assert "lower quantize.target.min_sqnr_db to at most" in err


def test_target_settings_the_search_cannot_choose_from_are_refused(tmp_path: Path) -> None:
    recipe = project(tmp_path, "{min_sqnr_db: 30}")
    recipe.write_text(recipe.read_text().replace("per_channel: true",
                                                 "weights_bitwidth: 16"))
    with pytest.raises(UserError) as info:
        load_recipe(recipe)
    assert [(p.line, p.field) for p in info.value.problems] == [(6, "quantize.weights_bitwidth")]
    assert "chooses weights of 4 or 8 bits, not 16" in info.value.problems[0].message


def test_the_report_section_reads_only_the_search_document(tmp_path: Path) -> None:
    from udo_build.builder.report_mixed import mixed_section, read_mixed

    (tmp_path / "quant").mkdir()
    doc = {"target_db": 35, "inputs": 4, "tried": [], "highest": {"sqnr_db": 41.0},
           "reference": {"sqnr_db": 30.0, "record_bytes": 1000, "activation_bytes": 400},
           "chosen": {"sqnr_db": 35.5, "predicted_db": 36.0, "record_bytes": 1200,
                      "activation_bytes": 500},
           "activations": {"units": 4, "bits": {"8": 3, "16": 1}},
           "weights": {"units": 2, "bits": {"8": 1, "16": 1}},
           "units": [{"kind": "weight", "name": "w1", "node": "conv1", "op": "Conv", "index": 3,
                      "elements": 100, "bits": 16, "reference_bits": 8, "alternate_bits": 16,
                      "low_alone_sqnr_db": 33.2}]}
    (tmp_path / "quant/mixed.json").write_text(json.dumps(doc))
    html = mixed_section(read_mixed(tmp_path))
    assert "35.50 dB (predicted 36.00 dB" in html and "1200 bytes, against 1000" in html
    assert "every unit at its high width: 41.00 dB" in html and "<td>33.20 dB</td>" in html
    assert "(1.20x)" in html and "4: 3 at 8 bits (75%), 1 at 16 bits (25%)" in html
    assert "<td>conv1</td><td>Conv</td><td>weight</td><td>w1</td><td>100</td><td><b>16</b>" in html
    (tmp_path / "quant/mixed.json").write_text(json.dumps({**doc, "chosen": []}))
    assert read_mixed(tmp_path) is None and mixed_section(None) == ""
