"""The worker pool: results in input order, questions answered in input order on each topic,
small counts in this process, failures reported at their input as one process would, workers
stopped after."""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Generator, Iterator
from typing import Any

import pytest

from udo_build.errors import StepFailed, UserError
from udo_build.runtime import pool
from udo_build.runtime.pool import Each, Job, WorkerLost, labels, ordered, workers_for


class Prefix(Job[int, tuple[int, int, int]]):
    """Each input asks for the sum of the items before it and its own (a running state that
    only the coordinator, in input order, can give); later inputs are quicker, so that they
    finish out of order."""

    def __init__(self) -> None:
        self.total = 0

    def work(self, index: int, item: int) -> Generator[tuple[str, int], int,
                                                       tuple[int, int, int]]:
        time.sleep(0.002 * (8 - index % 8))
        running = yield "sum", item
        return index, running, os.getpid()

    def scan(self, index: int, topic: str, question: int) -> int:
        self.total += question
        return self.total


def _results(job: Job[Any, Any], items: Any, cores: int, count: int | None = None) -> list[Any]:
    items = list(items)
    return list(ordered(job, iter(items), cores, len(items) if count is None else count))


@pytest.mark.parametrize("cores", [1, 2, 3])
def test_results_and_answers_come_in_input_order(cores: int) -> None:
    got = _results(Prefix(), range(10), cores)
    assert [i for i, _ in got] == list(range(10))
    assert [r[:2] for _, r in got] == [(i, sum(range(i + 1))) for i in range(10)]
    pids = {r[2] for _, r in got}
    assert (pids == {os.getpid()}) == (cores == 1)  # workers are other processes
    assert len(pids) == (1 if cores == 1 else cores)
    assert not multiprocessing.active_children()


class Topics(Job[int, dict[str, int]]):
    """Input i asks on four topics in an order of its own (it skips one of them): each answer
    is the running sum of the items asked on that topic, in input order; later inputs are
    quicker, so that without the order they would ask first."""

    def __init__(self) -> None:
        self.totals: dict[str, int] = {}

    @staticmethod
    def asks(index: int) -> list[str]:
        order = "abcd"[index % 4:] + "abcd"[:index % 4]
        return [topic for topic in order if topic != "abcd"[index % 3]]

    def work(self, index: int, item: int) -> Generator[tuple[str, int], int, dict[str, int]]:
        got = {}
        for topic in self.asks(index):
            time.sleep(0.001 * (8 - index % 8))
            got[topic] = yield topic, item
        return got

    def scan(self, index: int, topic: str, question: int) -> int:
        self.totals[topic] = self.totals.get(topic, 0) + question
        return self.totals[topic]


@pytest.mark.parametrize("cores", [1, 2, 3])
def test_questions_on_each_topic_are_answered_in_input_order(cores: int) -> None:
    items = [3 * i + 1 for i in range(12)]
    want = [{t: sum(items[j] for j in range(i + 1) if t in Topics.asks(j))
             for t in Topics.asks(i)} for i in range(12)]
    assert [r for _, r in _results(Topics(), items, cores)] == want


def test_a_small_count_runs_here() -> None:
    assert workers_for(16, 2) == 1 and workers_for(16, 1) == 1 and workers_for(1, 100) == 1
    assert workers_for(16, 3) == 3 and workers_for(2, 100) == 2 and workers_for(8, None) == 1
    got = _results(Prefix(), range(2), 8)
    assert {r[2] for _, r in got} == {os.getpid()}


def _fail_at(index: int, item: int) -> int:
    if item in (3, 5):
        time.sleep(0.05 if item == 3 else 0.0)  # 5 fails first in time; 3 is reported
        raise StepFailed("run", f"kernel raised on item {item}")
    return item


@pytest.mark.parametrize("cores", [1, 3])
def test_the_first_failing_input_is_reported_after_the_ones_before(cores: int) -> None:
    seen = []
    with pytest.raises(StepFailed) as failed:
        for _, result in ordered(Each(_fail_at), iter(range(8)), cores, 8,
                                     labels("inference", "list.txt", [10 + i for i in range(8)])):
            seen.append(result)
    assert seen == [0, 1, 2]
    assert failed.value.message == "inference 3 (line 13 of list.txt): kernel raised on item 3"
    assert not multiprocessing.active_children()


def _bad_items() -> Iterator[int]:
    yield from range(4)
    raise UserError("no such file", file="data/4.raw")


@pytest.mark.parametrize("cores", [1, 3])
def test_an_input_that_cannot_be_read_is_reported_in_its_turn(cores: int) -> None:
    seen = []
    with pytest.raises(StepFailed, match="input 3: kernel raised"):
        for _, result in ordered(Each(_fail_at), _bad_items(), cores, 8):
            seen.append(result)
    assert seen == [0, 1, 2]  # item 3 fails: its turn comes before the unreadable one
    seen.clear()
    with pytest.raises(UserError) as unreadable:
        for _, result in ordered(Each(lambda i, x: x), _bad_items(), cores, 8):
            seen.append(result)
    assert seen == [0, 1, 2, 3]
    assert unreadable.value.problems[0].message == "input 4: no such file"


def _die_at_two(index: int, item: int) -> int:
    if index == 2:
        os._exit(9)
    return item


def test_a_worker_that_dies_is_reported_at_its_input() -> None:
    with pytest.raises(WorkerLost, match=r"input 2: the worker running it ended \(exit code 9"):
        _results(Each(_die_at_two), range(6), 2)
    assert not multiprocessing.active_children()


def _slow(index: int, item: int) -> int:
    time.sleep(0.2)
    return item


def test_ctrl_c_and_an_abandoned_run_stop_every_worker() -> None:
    run = ordered(Each(_slow), iter(range(20)), 3, 20)
    assert next(run) == (0, 0)
    run.close()  # the caller gave up (its own error, a break)
    assert not multiprocessing.active_children()
    timer = threading.Timer(0.3, os.kill, (os.getpid(), signal.SIGINT))
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        _results(Each(_slow), range(20), 3)
    timer.join()
    assert not multiprocessing.active_children()


class Square(Job[int, int]):
    def work(self, index: int, item: int) -> int:
        return item * item


def test_spawned_workers_take_a_pickled_job_and_an_unpicklable_one_runs_here(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pool, "start_method", lambda: "spawn")
    assert [r for _, r in _results(Square(), range(5), 2)] == [0, 1, 4, 9, 16]
    here = os.getpid()
    assert {r for _, r in _results(Each(lambda i, x: os.getpid()), range(5), 2)} == {here}


class Unpickled(Job[int, tuple[bool, bool]]):
    """Records, when a spawned worker unpickles it, whether numpy was imported already and
    whether the worker's reader thread (which unpickles the items) was running."""

    def __init__(self) -> None:
        self.seen = (False, False)  # a state to pickle, so that __setstate__ is called

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.seen = ("numpy" in sys.modules,
                     any(t.name == "udo-build-pool-inbox" for t in threading.enumerate()))

    def work(self, index: int, item: int) -> tuple[bool, bool]:
        return self.seen


def test_a_spawned_worker_imports_before_its_reader_thread_unpickles_items(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Two threads importing numpy at once fail ("partially initialized module"): a spawned
    worker lost one start in seven so, its reader thread unpickling an array while the main
    thread imported numpy. The job (and numpy) are imported before that thread starts."""
    monkeypatch.setattr(pool, "start_method", lambda: "spawn")
    assert {r for _, r in _results(Unpickled(), range(4), 2)} == {(True, False)}


def test_blas_runs_on_one_thread_inside_and_as_before_after() -> None:
    from udo_build.kernels import blas

    found = blas._thread_count()
    if found is None:
        pytest.skip("numpy's BLAS here is not OpenBLAS: nothing to set")  # macOS Accelerate
    get, put = found
    put(2)
    threads = [r for _, r in _results(Each(lambda i, x: int(get())), range(2), 1)]
    assert threads == [1, 1] and get() == 2


def _echo_big(index: int, item: Any) -> Any:
    return item + 1  # 4 MB back, while the next 4 MB come in


def test_big_items_and_big_results_do_not_block_each_other() -> None:
    import numpy as np

    items = [np.full(1 << 20, i, np.float32) for i in range(8)]
    done: list[Any] = []
    runner = threading.Thread(target=lambda: done.extend(
        _results(Each(_echo_big), items, 2)), daemon=True)
    runner.start()
    runner.join(60)
    assert not runner.is_alive(), "the coordinator and a worker wait on each other"
    assert [float(r[0]) for _, r in done] == [i + 1.0 for i in range(8)]


def test_a_process_with_grpc_spawns_its_workers_instead_of_forking(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """gRPC's core threads do not survive a fork (a forked worker aborted in its poller in a
    process whose remote-cache channels were open)."""
    monkeypatch.delitem(sys.modules, "grpc", raising=False)
    assert pool.start_method() == "fork"
    monkeypatch.setitem(sys.modules, "grpc", sys.modules["json"])  # any module stands in
    assert pool.start_method() == "spawn"


def test_a_coordinator_with_nothing_out_says_so_instead_of_waiting() -> None:
    """Waiting on workers that hold no input can only wait for ever (a lost message, a bug):
    the coordinator raises with its state instead. Bounded by an alarm, so that a wait fails
    the test rather than hanging it."""
    coordinator: Any = pool._Pool(Each(lambda i, x: x), 2, "fork", None, lambda i: str(i))
    ends = [multiprocessing.Pipe() for _ in range(2)]
    coordinator.conns = [here for here, _ in ends]
    coordinator.held = [deque(), deque()]
    coordinator.handed, coordinator.returned = 3, 1  # input 1 handed, held by no one
    previous = signal.signal(signal.SIGALRM, lambda *_: pytest.fail("the coordinator waited"))
    signal.alarm(10)
    try:
        with pytest.raises(RuntimeError, match="no input out: handed 3, returned 1"):
            coordinator._receive()
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
        for here, there in ends:
            here.close()
            there.close()


def test_the_end_of_the_inputs_found_with_every_result_back_ends_the_run(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Every worker full (one input each here), the inputs' end is only found when the pool
    hands out again; if by then every result has come back, nothing is out: the run ends (it
    waited for ever before, a calibration hung so in a whole-suite run). Each hand-out waits
    long enough for the workers to finish, so all three results come back in one round."""
    monkeypatch.setattr(pool, "AHEAD", 1)
    hand_out = pool._Pool._hand_out

    def slow(self: Any, source: Any) -> None:
        hand_out(self, source)
        time.sleep(0.3)

    monkeypatch.setattr(pool._Pool, "_hand_out", slow)
    previous = signal.signal(signal.SIGALRM, lambda *_: pytest.fail("the run waited"))
    signal.alarm(20)
    try:
        got = list(ordered(Each(lambda i, x: x * 2), range(3), 3, 3))
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    assert got == [(0, 0), (1, 2), (2, 4)]
