"""`udo-build validate` checks the recipe against its model: input names and ranks, output
layers and tensors, and that every run is served by a prepared record; each problem with the
recipe's file:line and field path, all of them at once, nothing built."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

from udo_build.cli import main

from ..conftest import EXAMPLES, RECIPES

HEAD = """recipe: 1
name: checked
package:
  ops:
    - {config: ops/softplus.xml, kernels: ops/kernels.py}
    - {config: ops/swish.json, kernels: ops/kernels.py}
model: {onnx: model/net.onnx}
quantize: {input_list: data/calib.txt}
"""


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err, env={})
    return code, out.getvalue(), err.getvalue()


def softplus_project(project: Path, body: str) -> Path:
    for folder in ("ops", "model", "data"):
        shutil.copytree(EXAMPLES / "softplus" / folder, project / folder)
    recipe = project / "r.yaml"
    recipe.write_text(HEAD + body)
    return recipe


def test_the_ready_recipes_fit_their_models() -> None:
    for recipe in sorted(RECIPES.glob("*.yaml")):
        code, out, err = cli("validate", str(recipe))
        assert (code, err) == (0, ""), recipe
        assert "): valid" in out


BAD = """prepare:
  matrix:
    soc: [sm8550]
    input_dimensions:
      - {image: [1, 3, 32, 32]}
      - {input: [1, 3, 32]}
      - {input: [2, 3, 32, 32]}
    outputs:
      - {tensors: [logits]}
      - {layers: [nohead]}
      - {tensors: [probs]}
run:
  - name: late
    soc: sm8650
    input_list: data/test.txt
    input_dimensions: {input: [8, 3, 32, 32]}
  - name: fits
    soc: sm8550
    input_list: data/test.txt
    input_dimensions: {input: [2, 3, 32, 32]}
    outputs: default
"""


def test_each_problem_is_listed_with_its_line_and_field(project: Path) -> None:
    recipe = softplus_project(project, BAD)
    store = project / "store"
    code, out, err = cli("validate", str(recipe))
    assert (code, out) == (2, "")
    lines = err.splitlines()
    assert all(line.startswith(f"error: {recipe}:") for line in lines)
    found = {line.split(": ")[2]: line for line in lines}
    assert set(found) == {"prepare.matrix.input_dimensions[0].image",
                          "prepare.matrix.input_dimensions[1].input",
                          "prepare.matrix.outputs[1].layers[0]",
                          "prepare.matrix.outputs[2].tensors[0]", "run[0]"}
    assert f"{recipe}:13:10: prepare.matrix.input_dimensions[0].image: 'image' is not an " \
           "input of the model; the model's inputs: input (1x3x32x32)" in err
    assert f"{recipe}:14:17: prepare.matrix.input_dimensions[1].input: input 'input' has " \
           "rank 4 (1x3x32x32), these dimensions have 3" in err
    assert "the model has no layer 'nohead'; its layers: conv1, softplus1," in err
    assert "the model has no tensor 'probs'" in found["prepare.matrix.outputs[2].tensors[0]"]
    late = found["run[0]"]
    assert f"{recipe}:21:5: run[0]: run 'late' (sm8650, v75" in late
    assert "input dimensions input=8x3x32x32" in late and "would prepare online" in late
    assert "served by none of the 1 prepared records" in late  # the bad-rank cell is no record
    # the served run asks default outputs: they resolve to logits, as the records' request does
    assert "run[1]" not in err
    assert not store.exists()  # nothing built


def test_problems_as_json(project: Path) -> None:
    recipe = softplus_project(project, BAD)
    code, out, _ = cli("validate", str(recipe), "--json")
    data = json.loads(out)
    assert code == 2 and data["ok"] is False
    assert [e["field"] for e in data["errors"]][:2] == [
        "prepare.matrix.input_dimensions[0].image", "prepare.matrix.input_dimensions[1].input"]
    assert all(e["file"] and e["line"] for e in data["errors"])


def test_run_level_and_precision_take_part(project: Path) -> None:
    recipe = softplus_project(project, """prepare:
  matrix: {soc: [sm8550], optimization_level: [2], precision: [int8]}
run:
  - {name: o2, soc: sm8550, input_list: data/test.txt}
  - {name: fp, soc: sm8550, input_list: data/test.txt, precision: fp16}
  - {name: fresh, soc: sm8550, input_list: data/test.txt, mode: always_generate_new}
""")
    code, _, err = cli("validate", str(recipe))
    assert code == 2
    assert "run[0]" not in err and "run[2]" not in err  # served; asks no record
    assert "run[1]: run 'fp' (sm8550, v73" in err
    assert "prepared for int8, the run is fp16" in err


def test_dimensions_the_model_cannot_run_at(project: Path) -> None:
    recipe = softplus_project(project, """prepare:
  matrix:
    soc: [sm8550]
    input_dimensions:
      - {input: [1, 5, 32, 32]}
      - {input: [2, 3, 8, 8]}
""")
    code, _, err = cli("validate", str(recipe))
    assert code == 2
    assert err.splitlines() == [
        f"error: {recipe}:13:9: prepare.matrix.input_dimensions[0]: node conv1 (Conv) cannot "
        "run at these input dimensions (input shapes [[1, 5, 32, 32], [8, 3, 3, 3], [8]]): "
        "Conv input channels 5, weights [8, 3, 3, 3] and group 1 do not agree"]
