"""Inner progress: actions tell their sub-steps (calibration inputs, rule passes, inferences),
the engine hands them to its listener, pool workers send them through a queue, the terminal
shows them as inner bars and piped output shows none; the summary says what ran where."""

from __future__ import annotations

import io
import multiprocessing
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from rich.console import Console

from tests.conftest import RECIPES
from udo_build.builder.executors import PoolExecutor, _Throttled
from udo_build.builder.session import BuildRequest, run_build
from udo_build.cli.reporter import Reporter
from udo_build.errors import Problem


class Steps:
    """Events that keep every action's inner progress."""

    def __init__(self) -> None:
        self.steps: list[tuple[str, str, int, int]] = []
        self.finished: set[str] = set()

    def warning(self, problem: Problem) -> None:
        pass

    @contextmanager
    def progress(self, total: int) -> Iterator[Steps]:
        yield self

    def update(self, event: str, state: Any) -> None:
        if event == "step":
            assert state.id not in self.finished or state.step[0] == "remote downloads"
            self.steps.append((state.id, *state.step))
        elif event == "finish":
            self.finished.add(state.id)


def test_actions_tell_their_inner_progress_inline(tmp_path: Path) -> None:
    events = Steps()
    report = run_build(BuildRequest(str(RECIPES / "softplus.yaml"), store=str(tmp_path / "s"),
                                    out=str(tmp_path / "out"), jobs=1), events)
    assert report.exit_code == 0 and report.where == "inline"
    calibration = [s[2:] for s in events.steps if s[:2] == ("quantize", "calibration")]
    assert calibration == [(i, 16) for i in range(1, 17)]  # 16 calibration inputs
    passes = [s for s in events.steps if s[0].startswith("prepare:") and s[1] == "rule passes"]
    assert passes and all(0 <= done <= total for _, _, done, total in passes)
    assert ("run:smoke", "inferences", 4, 4) in events.steps
    again = run_build(BuildRequest(str(RECIPES / "softplus.yaml"), store=str(tmp_path / "s"),
                                   out=str(tmp_path / "out"), jobs=1), Steps())
    assert again.counts["built"] == 0


def _send(queue: Any) -> None:
    tell = _Throttled(queue, "key-1")
    for done in range(101):
        tell("calibration", done, 100)


def test_pool_workers_send_progress_through_the_queue(tmp_path: Path) -> None:
    got: list[tuple[str, str, int, int]] = []
    pool = PoolExecutor(str(tmp_path / "store"), 1, lambda *step: got.append(step))
    try:
        sender = multiprocessing.get_context("spawn").Process(target=_send,
                                                              args=(pool._steps,))
        sender.start()
        sender.join(60)
        assert sender.exitcode == 0
        for _ in range(100):
            assert pool.drain()
            if got and got[-1][2] == 100:
                break
            sender.join(0.05)
    finally:
        pool.close()
    assert got[:2] == [("key-1", "calibration", 0, 100), ("key-1", "calibration", 1, 100)]
    assert got[-1] == ("key-1", "calibration", 100, 100)
    assert len(got) < 101  # throttled: not one message per step


def _state(id: str, **more: Any) -> SimpleNamespace:
    return SimpleNamespace(id=id, status="running", step=None, seconds=0.5, queued=0.0, **more)


def test_a_terminal_shows_inner_bars_and_a_pipe_shows_none() -> None:
    console = Console(file=io.StringIO(), force_terminal=True, record=True, width=100)
    rep = Reporter(io.StringIO(), io.StringIO(), "rich")
    rep._err_console = console
    quantize = _state("quantize")
    with rep.progress(3) as progress:
        progress.update("start", quantize)
        quantize.step = ("calibration", 3, 16)
        progress.update("step", quantize)
        progress._bar.refresh()
        shown = console.export_text()
        assert "quantize: calibration" in shown and "3/16" in shown
        assert len(progress._inner) == 1
        quantize.status = "built"
        progress.update("finish", quantize)
        assert progress._inner == {}
    err = io.StringIO()
    plain = Reporter(io.StringIO(), err, "plain")
    with plain.progress(1) as progress:
        progress.update("start", quantize)
        progress.update("step", quantize)
        progress.update("finish", quantize)
    assert err.getvalue() == "built   quantize (0.50 s)\n"


def test_the_summary_says_what_ran_where(tmp_path: Path) -> None:
    from udo_build.cli import main

    out = io.StringIO()
    args = [str(RECIPES / "softplus.yaml"), "--store", str(tmp_path / "s"), "--out",
            str(tmp_path / "out" / "soft"), "-j", "2"]
    for _ in range(2):
        assert main(args, stdout=out, stderr=io.StringIO(), env={}) == 0
    lines = out.getvalue().splitlines()
    assert "  25 ran on 2 local workers" in lines
    assert "  nothing ran; 41 local hits" in lines
    assert lines.count(f"  report page {tmp_path / 'out' / 'soft.report.html'}") == 2
