"""The whole job through the CLI: the ready recipe builds, runs and checks; runs choose records
or prepare online and say so; a failed check (its own step after the run) fails the build with
its numbers."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from udo_build.cli import main

from ..conftest import EXAMPLES, RECIPES


class Ready:
    """A copy of the repo's recipes/ and examples/ in a temp project."""

    def __init__(self, root: Path, recipe: str) -> None:
        (root / ".udo-build-root").write_text("")
        shutil.copytree(EXAMPLES / "softplus", root / "examples/softplus")
        (root / "recipes").mkdir()
        self.recipe = root / "recipes" / recipe
        shutil.copy(RECIPES / recipe, self.recipe)
        self.root = root

    def build(self, *extra: str, code: int = 0) -> tuple[dict[str, Any], str]:
        out, err = io.StringIO(), io.StringIO()
        got = main(["build", str(self.recipe), "--store", str(self.root / "store"), "--out",
                    str(self.root / "out"), "--json", *extra], stdout=out, stderr=err, env={})
        assert got == code, err.getvalue()
        return json.loads(out.getvalue()), err.getvalue()


def executed(summary: dict[str, Any]) -> list[str]:
    return [a["id"] for a in summary["actions"] if a["status"] == "built"]


@pytest.fixture
def ready(tmp_path: Path) -> Ready:
    return Ready(tmp_path, "softplus.yaml")


def test_the_ready_recipe_builds_everything_then_nothing(ready: Ready) -> None:
    first, _ = ready.build()
    # {tensors: [logits]} and {layers: [head]} are one tensor set: one prepare of each pair
    # runs, the other has its key (cached, saying so)
    assert (first["executed"], first["failed"], first["skipped"]) == (25, 0, 0)
    twins = [a for a in first["actions"] if a["id"].startswith("prepare:")
             and a["status"] == "cached"]
    assert first["shared"] == 16 and first["hit_rate"] == 0  # nothing came from an earlier build
    assert len(twins) == 16 and all(a["reason"] == "the same key as " + a["id"].replace(
        "layers=head", "tensors=logits") + ", which ran in this build" for a in twins)
    run = next(a for a in first["actions"] if a["id"] == "run:smoke")
    assert "record softplus_net/v73/8MB/O2/input=1x3x32x32/logits/int8" in run["description"]
    report = json.loads((ready.root / "out/runs/smoke/report.json").read_text())
    assert "checks" not in report and report["metrics"]["sqnr_db"] > 25
    verdict = json.loads((ready.root / "out/runs/smoke/check.json").read_text())
    assert verdict == {"checks": {"min_sqnr_db": 25}, "metrics": report["metrics"],
                       "passed": True}
    assert report["metrics"]["top1_agreement"] == 1.0 and report["online_prepare"] is False
    assert (ready.root / "out/runs/smoke/Result_3/logits.npy").exists()
    deploy = ready.root / "out/model/net_deploy.udb"
    out = io.StringIO()
    assert main(["info", str(deploy), "--json"], stdout=out, stderr=io.StringIO(), env={}) == 0
    records = json.loads(out.getvalue())["records"]
    assert len(records) == 16  # the five SoCs differ in arch or VTCM; the outputs are one
    again, _ = ready.build()
    assert again["executed"] == 0 and again["cached"] == 41


def test_a_run_whose_outputs_no_record_has_prepares_online_and_says_so(ready: Ready) -> None:
    text = ready.recipe.read_text().replace("outputs: {tensors: [logits]}",
                                            "outputs: {tensors: [pool_out]}")
    ready.recipe.write_text(text)
    summary, _ = ready.build()
    run = next(a for a in summary["actions"] if a["id"] == "run:smoke")
    assert "ONLINE PREPARE (no record of the bundle fits (saw 16): prepared online" \
        in run["description"]
    report = json.loads((ready.root / "out/runs/smoke/report.json").read_text())
    assert report["online_prepare"] is True and "online_prepare_seconds" not in report
    assert " ms here)" in run["description"]  # what it cost: in the description, not the report
    assert len(report["seen"]) == 16 and all(s["rejected"] for s in report["seen"])
    assert (ready.root / "out/runs/smoke/Result_0/pool_out.npy").exists()


def test_a_failed_check_fails_the_build_with_the_numbers(ready: Ready) -> None:
    ready.recipe.write_text(ready.recipe.read_text().replace("min_sqnr_db: 25",
                                                             "min_sqnr_db: 90"))
    summary, err = ready.build(code=1)
    status = {a["id"]: a["status"] for a in summary["actions"]}
    assert (status["run:smoke"], status["check:smoke"]) == ("built", "failed")
    check = next(a for a in summary["actions"] if a["id"] == "check:smoke")
    (message,) = [e["message"] for e in check["error"]]
    assert message.startswith("check: smoke: check failed: SQNR ")
    assert message.endswith(" dB < min_sqnr_db 90")


def test_adding_a_soc_runs_only_its_prepares_assemble_and_runs(ready: Ready) -> None:
    ready.build()
    ready.recipe.write_text(ready.recipe.read_text().replace(
        "soc: [sm8350, sm8450, sm8550, sm8650, sm8750]",
        "soc: [sm8350, sm8450, sm8550, sm8650, sm8750, ssg2115p]"))
    summary, _ = ready.build()
    assert sorted(executed(summary)) == sorted([  # layers=head: the same keys
        "prepare:ssg2115p/O2/input=1x3x32x32/tensors=logits/int8",
        "prepare:ssg2115p/O3/input=1x3x32x32/tensors=logits/int8",
        "prepare:ssg2115p/O2/input=4x3x32x32/tensors=logits/int8",
        "prepare:ssg2115p/O3/input=4x3x32x32/tensors=logits/int8",
        "assemble", "run:smoke"])


def test_a_dry_run_counts_targets_sharing_a_key_once(ready: Ready) -> None:
    ready.build("outputs:*")  # the upstream only: every prepare's key is known, none cached
    dry, _ = ready.build("-n")
    prepares = [a for a in dry["actions"] if a["kind"] == "prepare"]
    runs = [a for a in prepares if a["would_run"]]
    twins = [a for a in prepares if not a["would_run"]]
    assert len(runs) == len(twins) == 16 and len({a["key"] for a in prepares}) == 16
    assert all(a["reason"].startswith("the same key as ") for a in twins)
    assert dry["shared"] == 16 and dry["would_run"] == 16 + 5  # + packages, assemble, run, check
    assert {a["id"] for a in dry["actions"] if a["would_run"]} >= {"assemble", "run:smoke",
                                                                   "check:smoke"}
