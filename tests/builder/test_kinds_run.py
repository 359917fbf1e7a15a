"""The run kind at input dimensions other than the model's own: the record prepared for them is
chosen, the files are read at them, and the float reference is prepared at them."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import numpy as np

from udo_build.cli import main

from ..conftest import EXAMPLES, RECIPES

RUNS = """\
  - name: batch4
    soc: sm8650
    input_list: ../examples/softplus/data/b4.txt
    input_dimensions: {input: [4, 3, 32, 32]}
    outputs: {layers: [head]}
    check: {min_sqnr_db: 20, min_top1_agreement: 0.5}
"""


def test_a_run_at_other_input_dimensions(tmp_path: Path) -> None:
    (tmp_path / ".udo-build-root").write_text("")
    shutil.copytree(EXAMPLES / "softplus", tmp_path / "examples/softplus")
    data = tmp_path / "examples/softplus/data"
    rng = np.random.default_rng(0)
    for i in range(2):
        np.save(data / f"b4_{i}.npy", rng.standard_normal((4, 3, 32, 32)).astype("float32"))
    (data / "b4.txt").write_text("b4_0.npy\nb4_1.npy\n")
    text = (RECIPES / "softplus.yaml").read_text()
    for old, new in (("soc: [sm8350, sm8450, sm8550, sm8650, sm8750]", "soc: [sm8650]"),
                     ("optimization_level: [2, 3]", "optimization_level: [2]"),
                     ("quantizer: enhanced", "quantizer: tf")):  # fewer and faster steps
        text = text.replace(old, new)
    (tmp_path / "recipes").mkdir()
    recipe = tmp_path / "recipes/softplus.yaml"
    recipe.write_text(text + RUNS)
    out, err = io.StringIO(), io.StringIO()
    code = main(["build", str(recipe), "--store", str(tmp_path / "store"), "--out",
                 str(tmp_path / "out"), "--json"], stdout=out, stderr=err, env={})
    assert code == 0, err.getvalue()
    report = json.loads((tmp_path / "out/runs/batch4/report.json").read_text())
    assert report["record"] == "softplus_net/v75/8MB/O2/input=4x3x32x32/logits/int8"
    assert report["online_prepare"] is False and report["inferences"] == 2
    # of two records ({tensors: [logits]} and {layers: [head]} are one), the other is for
    # other dims
    assert len(report["seen"]) == 1
    assert report["metrics"]["sqnr_db"] > 20 and "checks" not in report
    verdict = json.loads((tmp_path / "out/runs/batch4/check.json").read_text())
    assert verdict["passed"] is True and verdict["metrics"] == report["metrics"]
    assert verdict["checks"] == {"min_sqnr_db": 20, "min_top1_agreement": 0.5}
    assert np.load(tmp_path / "out/runs/batch4/Result_1/logits.npy").shape[0] == 4
