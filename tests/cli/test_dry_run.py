"""`udo-build RECIPE -n` says what would run and why with honest counts, and `--check` is the
same dry run that exits 1 when anything would run (a CI gate: is the build up to date?)."""

from __future__ import annotations

import io
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from udo_build.cli import main

from ..builder.fakes import CALLS, fake_kinds
from ..builder.test_engine import Project

PREPARE = "prepare:sm8550/O2/native/default/int8"
NEW = "prepare:sm8650/O2/native/default/int8"


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    with fake_kinds():
        yield Project(tmp_path)


def udo(project: Project, *args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["build", str(project.recipe), "--store", str(project.store), "--out",
                 str(project.out), "-j", "1", *args], stdout=out, stderr=err, env={})
    return code, out.getvalue(), err.getvalue()


def as_json(project: Project, *args: str, code: int = 0) -> dict[str, Any]:
    got, out, err = udo(project, "--json", *args)
    assert got == code, err
    doc = json.loads(out)
    doc.pop("seconds")
    return doc


def test_a_cold_dry_run_says_everything_would_run_and_why(project: Project) -> None:
    code, out, err = udo(project, "-n")
    lines = out.splitlines()
    assert (code, err) == (0, "")
    assert lines[:2] == ["would run  opdef: no cache entry for its key",
                         "would run  package:CPU: after opdef, if its output changes"]
    assert lines[-1].startswith("demo (dry run, nothing ran): would run 9 (8 of them only if an "
                                "input changes), cached 0 in ")
    assert "hit rate" not in out and "skipped" not in out and "built" not in out
    doc = as_json(project, "-n")
    assert (doc["would_run"], doc["cached"], doc["executed"], doc["skipped"]) == (9, 0, 0, 0)
    assert doc["hit_rate"] is None and doc["dry_run"] is True
    assert CALLS == [] and not project.out.exists() and not (project.store / "history").exists()


def test_a_dry_run_after_a_change_counts_what_is_cached(project: Project) -> None:
    project.build()
    project.write(["sm8550", "sm8650"])
    doc = as_json(project, "-n")
    would = [a["id"] for a in doc["actions"] if a["would_run"]]
    assert would == ["package:HTP", NEW, "assemble", "run:smoke"]  # sm8650: a new arch
    assert (doc["would_run"], doc["cached"], doc["skipped"], doc["hit_rate"]) == (4, 6, 0, None)
    _, out, _ = udo(project, "-n")
    assert f"would run  {NEW}: no cache entry for its key" in out.splitlines()
    assert "would run 4 (2 of them only if an input changes), cached 6 in " in out


def test_check_exits_1_while_anything_would_run_and_0_when_all_is_cached(
        project: Project) -> None:
    cold = as_json(project, "--check", code=1)
    assert cold == as_json(project, "-n")  # the same object as a dry run
    code, out, _ = udo(project, "--check")
    assert code == 1 and out.splitlines()[-1] == "  not up to date: 9 actions would run"
    assert CALLS == [] and not project.out.exists()
    project.build()
    code, out, _ = udo(project, "--check")
    assert code == 0 and out.splitlines()[-1] == "  up to date: every action is cached"
    assert as_json(project, "--check")["would_run"] == 0
    project.write(["sm8550", "sm8650"])
    assert as_json(project, "--check", code=1)["would_run"] == 4
    assert as_json(project, "--check", PREPARE)["would_run"] == 0  # what a target selects


def test_a_real_build_keeps_its_summary_and_has_no_would_run_count(project: Project) -> None:
    code, out, _ = udo(project)
    assert code == 0 and "demo: 9 built, 0 cached, 0 failed, 0 skipped in " in out
    assert "would_run" not in as_json(project)


def test_help_names_check() -> None:
    out = io.StringIO()
    assert main(["build", "--help"], stdout=out, stderr=io.StringIO(), env={}) == 0
    assert "--check" in out.getvalue() and "exit 1 when anything would run" in " ".join(
        out.getvalue().split())
