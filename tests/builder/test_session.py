"""The library under the CLI: `run_build` and `explain_build` return typed reports, tell their
progress to the caller's events, and agree with `udo-build build --json`."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from udo_build.builder.session import BuildRequest, Quiet, explain_build, run_build
from udo_build.errors import EXIT_STEP_FAILED, Problem

from .fakes import FAIL, fake_kinds
from .test_engine import Project


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    with fake_kinds():
        yield Project(tmp_path)


def request(project: Project, **changes: Any) -> BuildRequest:
    return BuildRequest(str(project.recipe), store=str(project.store), out=str(project.out),
                        jobs=1, **changes)


class Recorded:
    """Events kept for the test: warnings, and each progress display's total and events."""

    def __init__(self) -> None:
        self.warnings: list[Problem] = []
        self.totals: list[int] = []
        self.events: list[tuple[str, str]] = []

    def warning(self, problem: Problem) -> None:
        self.warnings.append(problem)

    @contextmanager
    def progress(self, total: int) -> Iterator[Recorded]:
        self.totals.append(total)
        yield self

    def update(self, event: str, state: Any) -> None:
        self.events.append((event, state.id))


def test_a_build_reports_every_action_and_fills_the_output_folder(project: Project) -> None:
    events = Recorded()
    first = run_build(request(project), events)
    assert (first.counts["built"], first.counts["cached"], first.exit_code) == (9, 0, 0)
    assert first.out == project.out and (project.out / ".udo-build-manifest.json").is_file()
    assert first.recipe == "demo" and first.file == project.recipe and first.remote is None
    assert events.totals == [9] and events.warnings == []
    assert [e for e in events.events if e[0] == "start"] == [
        ("start", a.id) for a in first.actions]
    again = run_build(request(project), Quiet())
    assert (again.counts["built"], again.counts["cached"], again.hit_rate) == (0, 9, 1.0)
    assert {a.origin for a in again.actions} == {"local"}
    assert [a.key for a in again.actions] == [a.key for a in first.actions]
    cli, lib = project.build(), again.to_json()
    for doc in (cli, lib):
        doc.pop("seconds")
        for row in doc["actions"]:
            row.pop("seconds")
    assert cli == lib


def test_a_failed_step_is_an_outcome_with_its_problems_and_exit_code(project: Project) -> None:
    FAIL.add("convert")
    report = run_build(request(project), Quiet())
    failed = [a for a in report.actions if a.status == "failed"]
    assert [a.id for a in failed] == ["convert"] and not failed[0].internal
    assert [str(p) for p in failed[0].problems()] == ["convert: failing on purpose"]
    assert report.exit_code == EXIT_STEP_FAILED and failed[0].trace is None
    skipped = {a.id: a.reason for a in report.actions if a.status == "skipped"}
    assert skipped["quantize"] == "needs convert, which failed"
    assert not report.to_json()["ok"]


def test_a_dry_run_writes_nothing_and_says_what_would_run(project: Project) -> None:
    report = run_build(request(project, dry_run=True), Quiet())
    assert report.out is None and not project.out.exists()
    assert [a.would_run for a in report.actions] == [True] * 9
    assert report.actions[0].reason == "no cache entry for its key"
    assert report.to_json()["out"] is None


def test_explain_names_what_changed_since_the_last_build(project: Project) -> None:
    run_build(request(project), Quiet())
    project.write(["sm8550", "sm8650"])
    report = explain_build(request(project), Quiet())
    status = {e.id: e.status for e in report.explanations}
    assert report.recipe == "demo" and status["opdef"] == "cached"
    assert status["prepare:sm8650/O2/native/default/int8"] == "would run"
    new = next(e for e in report.explanations if e.id.startswith("prepare:sm8650"))
    assert "never built from this recipe on this store" in new.reasons
