"""Model parts through whole builds: prepare.max_record_bytes cuts a small residual stack into
parts, each its own record shared across SoCs of equal arch and VTCM; the run chains them and
gives the unsplit model's numbers (int8 here, from the records; fp16 and the float path in
tests/compiler/test_parts.py); the limit keys the prepares; bad limits are errors at the recipe
field."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pytest

from udo_build.ir.bundle import load_bundle

from .parts_project import FP16_LIMIT, PartsProject


def _by_id(summary: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {a["id"]: a for a in summary["actions"]}


def _outputs(project: PartsProject) -> list[np.ndarray]:
    results = sorted((project.root / "out/runs/smoke").glob("Result_*/y.raw"))
    assert len(results) == 3
    return [np.fromfile(p, dtype=np.float32) for p in results]


@pytest.fixture(scope="module")
def fp16(tmp_path_factory: pytest.TempPathFactory) -> tuple[PartsProject, dict[str, Any]]:
    project = PartsProject(tmp_path_factory.mktemp("parts"))
    summary, _ = project.build()
    return project, summary


def test_each_part_is_a_record_under_the_limit_shared_by_equal_socs(fp16) -> None:  # type: ignore[no-untyped-def]
    project, summary = fp16
    actions = _by_id(summary)
    cut = actions["parts:fp16"]["description"]
    assert "3 part(s)" in cut and "mm1 .. res1" in cut and "-> h1" in cut  # the summary says
    v73 = [actions[f"prepare:{soc}/O2/native/default/fp16"] for soc in ("sm8550", "qcs9100")]
    assert v73[0]["key"] == v73[1]["key"]  # equal arch and VTCM: one record set
    assert summary["executed"] == len(actions) - 1  # every action but qcs9100's prepare
    deploy = load_bundle(project.root / "out/model/stack_deploy.udb")
    rows = deploy.meta["records"]
    assert sorted((r["arch"], r["identifier"]) for r in rows) == [
        (arch, f"stack:subnet{i}") for arch in ("v73", "v75") for i in range(3)]
    assert all(r["size"] <= FP16_LIMIT for r in rows)
    assert deploy.meta["parts"] == [{"precision": "fp16", "outputs": ["y"],
                                     "cuts": ["mm1", "mm2"]}]
    report = project.report()
    assert [(p["inputs"], p["outputs"]) for p in report["partition"]] == [
        (["x"], ["h0"]), (["h0"], ["h1"]), (["h1"], ["y"])]
    assert not report["online_prepare"] and report["switches"] == 0
    page = Path(summary["page"]).read_text()
    assert ("(3 subnets: HTP 4 | HTP 4 | HTP 4 nodes; 0 runtime switches; boundaries of "
            "parts: h0 | h1)") in page


def test_int8_parts_keep_the_encodings_so_the_numbers(tmp_path: Path) -> None:
    split = PartsProject(tmp_path / "split", limit="12KB", precision="int8", socs="sm8550")
    whole = PartsProject(tmp_path / "whole", limit=None, precision="int8", socs="sm8550")
    summary, _ = split.build()
    assert "3 part(s)" in _by_id(summary)["parts:int8"]["description"]
    assert len(split.report()["partition"]) == 3
    summary, _ = whole.build()
    assert not any(a["kind"] == "parts" for a in summary["actions"])
    assert "partition" not in whole.report()  # one record: the graph as it always ran
    for a, b in zip(_outputs(split), _outputs(whole), strict=True):
        assert np.array_equal(a, b)


def test_changing_the_limit_prepares_again_and_only_from_the_cuts_on(fp16) -> None:  # type: ignore[no-untyped-def]
    project, _ = fp16
    try:
        project.write(25_000)
        summary, _ = project.build()
        actions = _by_id(summary)
        ran = sorted(a["id"].partition("/")[0] for a in summary["actions"]
                     if a["status"] == "built")
        assert ran == ["assemble", "parts:fp16", "prepare:sm8550", "prepare:sm8650",
                       "run:smoke"]
        assert actions["convert"]["status"] == "cached"
        assert len(project.report()["partition"]) == 2
    finally:
        project.write(FP16_LIMIT)
    summary, _ = project.build()  # back: everything from the store, nothing runs
    assert summary["executed"] == 0


def test_a_limit_too_small_for_one_layer_is_an_error_at_the_field(tmp_path: Path) -> None:
    project = PartsProject(tmp_path, limit="6000", socs="sm8550")
    summary, _ = project.build(code=2)
    failed = _by_id(summary)["parts:fp16"]
    assert failed["status"] == "failed"
    (error,) = failed["error"]
    assert error["field"] == "prepare.max_record_bytes" and error["line"] == 6
    assert "node mm0 (MatMul) alone needs about" in error["message"]
    assert "over the limit of 6,000 bytes" in error["message"]


@pytest.mark.parametrize("value", ["2 parsecs", "0", "-5"])
def test_a_limit_that_is_no_size_is_an_error_at_the_field(tmp_path: Path, value: str) -> None:
    project = PartsProject(tmp_path, limit=value)
    summary, _ = project.build(code=2)
    fields = [e.get("field") for e in summary["errors"]]
    assert fields == ["prepare.max_record_bytes"]
