"""The cores an action may use (ActionContext.cores): the engine shares the machine's cores among
the actions that may run at once, and the quantize step hands its share to calibration."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from udo_build.builder.engine import Engine
from udo_build.runtime import pool

from .test_engine import Project


def _engine(jobs: int, running: int, ready: int, executor: str = "") -> Any:
    """A stand-in engine with `running` actions in flight and `ready` pending ones whose
    dependencies are done (and one pending action still waiting for another)."""
    done = SimpleNamespace(done=True, status="built", action=SimpleNamespace(deps=()))
    waiting = SimpleNamespace(done=False, status="pending", action=SimpleNamespace(deps=("x",)))
    ready_states = {f"r{i}": SimpleNamespace(done=False, status="pending",
                                             action=SimpleNamespace(deps=("d",)))
                    for i in range(ready)}
    return SimpleNamespace(options=SimpleNamespace(executor=executor), jobs=jobs,
                           _running=dict.fromkeys(range(running)), _fetching=set(),
                           states={"d": done, "x": waiting, "w": waiting, **ready_states})


@pytest.mark.parametrize(("jobs", "running", "ready", "cores"), [
    (16, 0, 0, 16),  # alone in the build: every core
    (16, 1, 2, 4),  # four that may run at once: a quarter each
    (16, 15, 10, 1),  # more actions than cores: one each
    (2, 0, 10, 8),  # -j 2: two at once at most, half the cores each
    (1, 0, 10, 16),  # -j 1: one action at a time, all of them
])
def test_the_cores_are_shared_by_the_actions_that_may_run_at_once(
        monkeypatch: pytest.MonkeyPatch, jobs: int, running: int, ready: int, cores: int) -> None:
    monkeypatch.setattr(pool, "available_cores", lambda: 16)
    assert Engine.cores_for(_engine(jobs, running, ready)) == cores
    assert Engine.cores_for(_engine(jobs, 0, 0, "dask://host:8786")) == 1


def test_the_quantize_step_calibrates_on_its_share(tmp_path: Path,
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    from udo_build.quant import pipeline

    monkeypatch.setattr(pool, "available_cores", lambda: 3)
    seen = []
    real = pipeline.quantize_and_measure

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs["cores"])
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "quantize_and_measure", spy)
    Project(tmp_path).build()  # -j 1: the quantize action runs alone, in this process
    assert seen == [3]
