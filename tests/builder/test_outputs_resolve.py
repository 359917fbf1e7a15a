"""Outputs resolved before keying: spellings of one tensor set give one prepare key, one record
in the deployable bundle, and a run asking any of them loads it; a name the model lacks fails
the `outputs` step at the recipe field that wrote it."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

from udo_build.cli import main

from ..conftest import EXAMPLES

RECIPE = """\
recipe: 1
name: demo
package:
  name: SoftplusPackage
  ops:
    - {config: ex/ops/softplus.xml, kernels: ex/ops/kernels.py}
    - {config: ex/ops/swish.json, kernels: ex/ops/kernels.py}
  backends: [HTP]
model: {onnx: ex/model/net.onnx}
prepare:
  matrix:
    soc: [sm8550]
    outputs:
      - default
      - {tensors: [logits]}
      - {layers: [head]}
    precision: [fp16]
run:
  - {name: smoke, soc: sm8550, input_list: ex/data/test.txt, outputs: {layers: [head]},
     precision: fp16}
"""


def build(root: Path, code: int = 0) -> dict[str, Any]:
    out, err = io.StringIO(), io.StringIO()
    got = main(["build", str(root / "recipe.yaml"), "--store", str(root / "store"), "--out",
                str(root / "out"), "-j", "1", "--json"], stdout=out, stderr=err, env={})
    assert got == code, err.getvalue()
    return json.loads(out.getvalue())


def test_equal_tensor_sets_make_one_record_and_a_bad_name_fails_at_its_field(
        tmp_path: Path) -> None:
    shutil.copytree(EXAMPLES / "softplus", tmp_path / "ex",
                    ignore=shutil.ignore_patterns("make_example.py"))
    (tmp_path / ".udo-build-root").write_text("")
    (tmp_path / "recipe.yaml").write_text(RECIPE)
    summary = build(tmp_path)
    prepares = {a["id"]: a for a in summary["actions"] if a["kind"] == "prepare"}
    first = "prepare:sm8550/O2/native/default/fp16"
    assert len({a["key"] for a in prepares.values()}) == 1
    assert {i: (a["status"], a.get("reason")) for i, a in prepares.items()} == {
        first: ("built", None),
        "prepare:sm8550/O2/native/tensors=logits/fp16": (
            "cached", f"the same key as {first}, which ran in this build"),
        "prepare:sm8550/O2/native/layers=head/fp16": (
            "cached", f"the same key as {first}, which ran in this build")}
    resolved = next(a for a in summary["actions"] if a["id"] == "outputs:fp16")
    assert resolved["description"] == ("outputs of softplus_net: default -> 1 tensor; "
                                       "tensors=logits -> 1 tensor; layers=head -> 1 tensor")
    out = io.StringIO()
    assert main(["info", str(tmp_path / "out/model/net_deploy.udb"), "--json"], stdout=out,
                stderr=io.StringIO(), env={}) == 0
    (record,) = json.loads(out.getvalue())["records"]
    assert record["outputs"] == "logits" and record["output_tensors"] == ["logits"]
    report = json.loads((tmp_path / "out/runs/smoke/report.json").read_text())
    assert report["online_prepare"] is False and report["seen"] == []

    (tmp_path / "recipe.yaml").write_text(RECIPE.replace("{layers: [head]}\n",
                                                         "{layers: [heda]}\n"))
    failed = build(tmp_path, code=2)
    step = next(a for a in failed["actions"] if a["id"] == "outputs:fp16")
    assert step["status"] == "failed"
    (problem,) = step["error"]
    assert (problem["line"], problem["field"], problem["message"]) == (
        16, "prepare.matrix.outputs[2].layers", "the model has no layer 'heda'")
    assert problem["file"].endswith("recipe.yaml") and "head" in problem["hint"]
