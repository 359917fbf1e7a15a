"""Through the engine: a 5-SoC x 3-level x 2-dims x 2-outputs matrix builds one record per
distinct (arch, VTCM) target, and records of equal key are byte-identical across stores."""

from __future__ import annotations

import io
import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

from udo_build.cli import main

from .helpers import SOFTPLUS

RECIPE = """\
recipe: 1
name: matrix
package:
  name: SoftplusPackage
  ops:
    - {config: ex/ops/softplus.xml, kernels: ex/ops/kernels.py}
    - {config: ex/ops/swish.json, kernels: ex/ops/kernels.py}
  backends: [HTP]
model: {onnx: ex/model/net.onnx}
prepare:
  matrix:
    soc: [sm8550, sc8380xp, qcs9100, sm8650, qcs8300]
    optimization_level: [1, 2, 3]
    input_dimensions: [{input: [1, 3, 32, 32]}, {input: [2, 3, 32, 32]}]
    outputs: [default, {layers: [conv2]}]
"""


def build(root: Path, store: str) -> dict[str, Any]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["build", str(root / "recipe.yaml"), "--store", str(root / store), "--out",
                 str(root / "out"), "-j", "1", "--json", "prepare:*"], stdout=out, stderr=err,
                env={})
    assert code == 0, err.getvalue()
    return json.loads(out.getvalue())


def record_digest(root: Path, store: str, key: str) -> str:
    entry = json.loads((root / store / "ac" / key[:2] / f"{key}.json").read_text())
    return entry["outputs"]["record"]["digest"]


def test_the_matrix_builds_each_distinct_record_once(tmp_path: Path) -> None:
    shutil.copytree(SOFTPLUS, tmp_path / "ex", ignore=shutil.ignore_patterns("make_example.py"))
    (tmp_path / ".udo-build-root").write_text("")
    (tmp_path / "recipe.yaml").write_text(RECIPE)
    first = build(tmp_path, "store")
    prepares = [a for a in first["actions"] if a["kind"] == "prepare"]
    assert len(prepares) == 5 * 3 * 2 * 2
    keys = {a["key"] for a in prepares}
    assert len(keys) == 2 * 3 * 2 * 2  # (v73, 8 MB) and (v75, 8 MB)
    assert Counter(a["status"] for a in prepares) == {"built": len(keys), "cached": 36}
    again = build(tmp_path, "other-store")
    assert {a["key"] for a in again["actions"] if a["kind"] == "prepare"} == keys
    for key in keys:
        assert record_digest(tmp_path, "store", key) == record_digest(tmp_path, "other-store",
                                                                       key)
