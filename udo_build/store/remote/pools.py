"""Thread pools of the remote tier: the largest job first, threads started without waiting.

They ran at a lower CPU priority once (nice +10), so that the lookups of later actions were not
held up behind the bytes of earlier ones; the lookups of a fresh checkout now go out together
before the downloads (see builder.lookahead), and on a machine shared with other work a nice
download thread lost the CPU to every other process: a fresh checkout's downloads took 500 ms
instead of 300 ms at a load of 4-5 (SqueezeNet project, 26.6 MB, interleaved runs).

`threading.Thread.start` (and so concurrent.futures' pools, which start a thread in `submit`)
waits until the new thread has run: it must take the GIL first, which while other threads
download and verify takes a few switch intervals each (8 threads started while 4 others ran
Python code: 300-380 ms, against under 1 ms here). A fresh checkout's build thread starts its
lookups at once, so it would wait for every lookup thread in turn before it could look further;
these pools start theirs through `_thread`, which does not wait.
"""

from __future__ import annotations

import _thread
import concurrent.futures as cf
import itertools
import queue
import threading
from collections.abc import Callable, Iterable
from typing import Any


class Pool:
    """Threads that run the largest job first (`size`: of the actions whose blobs wait to be
    downloaded, the one with the most bytes starts first: it would end last, smaller ones fill
    the other threads), jobs of one size in the order they came. A thread starts when a job
    comes and fewer threads are idle than jobs wait, up to `workers`."""

    def __init__(self, workers: int) -> None:
        self.workers = workers
        self._queue: queue.PriorityQueue[tuple[float, int, Any]] = queue.PriorityQueue()
        self._order = itertools.count()
        self._threads = 0
        self._idle = 0  # threads waiting for a job, or starting
        self._queued = 0  # jobs no thread took yet
        self._lock = threading.Lock()
        self._ended = threading.Condition(self._lock)

    def submit(self, fn: Callable[..., Any], *args: Any, size: int = 0) -> cf.Future[Any]:
        future: cf.Future[Any] = cf.Future()
        with self._lock:
            self._queue.put((-size, next(self._order), (future, fn, args)))
            self._queued += 1
            start = self._idle < self._queued and self._threads < self.workers
            if start:
                self._threads += 1
                self._idle += 1  # until it takes a job
        if start:
            _thread.start_new_thread(self._work, ())
        return future

    def map(self, fn: Callable[[Any], Any], items: Iterable[Any],
            size: Callable[[Any], int] | None = None) -> list[Any]:
        """fn(item) for each item, run by the pool (the largest first by `size`, when given);
        the results in order."""
        return [f.result() for f in [self.submit(fn, item, size=size(item) if size else 0)
                                     for item in items]]

    def _work(self) -> None:
        try:
            while True:
                _, _, job = self._queue.get()
                if job is None:
                    return
                with self._lock:
                    self._idle -= 1
                    self._queued -= 1
                future, fn, args = job
                if future.set_running_or_notify_cancel():
                    try:
                        future.set_result(fn(*args))
                    except BaseException as exc:  # noqa: BLE001 - handed to whoever waits
                        future.set_exception(exc)
                with self._lock:
                    self._idle += 1
        finally:
            with self._lock:
                self._threads -= 1
                self._idle -= 1
                self._ended.notify_all()

    def shutdown(self, wait: bool = True) -> None:
        """Let the queued jobs finish, then stop the threads."""
        with self._lock:
            for _ in range(self._threads):
                self._queue.put((float("inf"), next(self._order), None))
            while wait and self._threads:
                self._ended.wait()


def then(future: cf.Future[Any], step: Callable[[Any], Any]) -> cf.Future[Any]:
    """A future of `step(what future gives)`, run as `future` ends (in the thread that ends it,
    or here when it has ended)."""
    after: cf.Future[Any] = cf.Future()

    def done(ended: cf.Future[Any]) -> None:
        try:
            after.set_result(step(ended.result()))
        except BaseException as exc:  # noqa: BLE001 - handed to whoever waits
            after.set_exception(exc)

    future.add_done_callback(done)
    return after
