"""`udo-build explain`: why an action would run, against the recipe's last build."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from udo_build.cli import main

from .fakes import fake_kinds
from .test_engine import Project


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    with fake_kinds():
        yield Project(tmp_path)


def explain(project: Project, *extra: str) -> dict[str, Any]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["explain", str(project.recipe), "--store", str(project.store), "--json",
                 *extra], stdout=out, stderr=err, env={})
    assert code == 0, err.getvalue()
    return {a["id"]: a for a in json.loads(out.getvalue())["actions"]}


def test_never_built(project: Project) -> None:
    found = explain(project)
    assert found["opdef"]["status"] == "would run"
    assert found["opdef"]["reasons"][1] == "never built from this recipe on this store"
    assert found["convert"]["reasons"][0] == "after opdef, if its output changes"


def test_up_to_date_and_changed_inputs_and_parameters(project: Project) -> None:
    project.build()
    assert {a["status"] for a in explain(project).values()} == {"cached"}
    calib = project.root / "ex/data/calib/input_00.raw"
    calib.write_bytes(calib.read_bytes()[::-1])
    project.recipe.write_text(project.recipe.read_text().replace(
        "quantize: {input_list: ex/data/calib.txt}",
        "quantize: {input_list: ex/data/calib.txt, act_bitwidth: 16}"))
    found = explain(project)
    reasons = found["quantize"]["reasons"]
    assert reasons[0].startswith("no cache entry for its key ")
    assert reasons[1:] == [
        "parameter act_bitwidth: 8 -> 16",
        reasons[2],
    ]
    assert reasons[2].startswith("input input_list.files[0] (")
    assert "ex/data/calib/input_00.raw) changed: " in reasons[2]
    assert found["convert"]["status"] == "cached"
    assert found["outputs:int8"]["reasons"] == [
        "after quantize, if its output changes",
        "input bundle comes from quantize, which would run first"]
    assert found["prepare:sm8550/O2/native/default/int8"]["reasons"] == [
        "after outputs:int8, if its output changes",
        "input bundle comes from quantize, which would run first",
        "input outputs comes from outputs:int8, which would run first"]


def test_plain_output_lists_what_would_run(project: Project) -> None:
    project.build()
    kernels = project.root / "ex/ops/kernels.py"
    kernels.write_text(kernels.read_text() + "MORE = 1\n")
    out, err = io.StringIO(), io.StringIO()
    assert main(["explain", str(project.recipe), "--store", str(project.store)],
                stdout=out, stderr=err, env={}) == 0
    text = out.getvalue()
    assert "quantize: would run\n" in text
    assert "  - input kernels[0] (" in text
    assert text.strip().endswith("demo: 5 would run, 4 up to date, 0 not available yet")
