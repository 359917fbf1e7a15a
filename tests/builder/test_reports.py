"""What a build reports of its actions' time: `seconds` is how long an action ran in its worker
(the figure its action-cache entry keeps), `queued_seconds` how long it waited besides."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from udo_build.builder.session import BuildRequest, Quiet, run_build
from udo_build.store import Store

from .fakes import FAIL, SLOW, fake_kinds
from .test_engine import Project

NAP = 0.3  # seconds a slowed action sleeps: a lower bound of its time, never an upper one


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    with fake_kinds():
        yield Project(tmp_path)


def build(project: Project, jobs: int) -> dict[str, dict[str, float]]:
    """The --json action rows of a build, by id (and the build's own seconds under "")."""
    summary = project.build("-j", str(jobs))
    rows = {a["id"]: a for a in summary["actions"]}
    rows[""] = {"seconds": summary["seconds"]}
    return rows


def ran_in_worker(project: Project, rows: dict[str, dict[str, float]]) -> dict[str, float]:
    """The seconds each built action's cache entry keeps: measured where it ran."""
    store = Store(project.store, create=False)
    try:
        found = {}
        for aid, row in rows.items():
            if row.get("status") == "built":
                entry = store.ac.get(str(row["key"]))
                assert entry is not None, aid
                found[aid] = round(entry.seconds, 4)
        return found
    finally:
        store.close()


def test_seconds_are_the_time_in_the_worker_and_the_wait_is_apart(project: Project) -> None:
    SLOW.update({"package": NAP, "convert": NAP})  # three actions at once, two workers
    rows = build(project, jobs=2)
    built = {aid: row["seconds"] for aid, row in rows.items() if row.get("status") == "built"}
    assert len(built) == 9 and built == ran_in_worker(project, rows)
    together = ("package:CPU", "package:HTP", "convert")
    assert all(built[aid] >= NAP for aid in together)
    assert all(rows[aid]["queued_seconds"] >= 0 for aid in built)
    # one of the three waited for a worker while the other two ran: that is not its seconds
    assert max(rows[aid]["queued_seconds"] for aid in together) >= NAP / 2


def test_serial_times_add_up_to_no_more_than_the_build(project: Project) -> None:
    SLOW.update({"convert": NAP / 3})
    rows = build(project, jobs=1)
    built = [row for row in rows.values() if row.get("status") == "built"]
    assert len(built) == 9
    assert sum(r["seconds"] + r["queued_seconds"] for r in built) <= rows[""]["seconds"]
    assert rows["convert"]["seconds"] >= NAP / 3
    again = build(project, jobs=1)  # cached: nothing ran, nothing waited
    assert {(r["seconds"], r["queued_seconds"]) for a, r in again.items() if a} == {(0.0, 0.0)}


@pytest.mark.parametrize("jobs", [1, 2])
def test_a_failed_action_reports_how_long_it_ran(project: Project, jobs: int) -> None:
    SLOW.update({"quantize": NAP})
    FAIL.add("quantize")
    report = run_build(BuildRequest(str(project.recipe), store=str(project.store),
                                    out=str(project.out), jobs=jobs), Quiet())
    failed = {a.id: a for a in report.actions if a.status == "failed"}
    assert list(failed) == ["quantize"] and str(failed["quantize"].problems()[0]) == (
        "quantize: failing on purpose")
    assert failed["quantize"].seconds >= NAP and failed["quantize"].queued >= 0
    row = next(r for r in report.to_json()["actions"] if r["id"] == "quantize")
    assert row["seconds"] >= NAP and "queued_seconds" in row
