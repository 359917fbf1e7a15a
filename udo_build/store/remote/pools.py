"""Thread pools of the remote tier's downloads: the largest job first.

They ran at a lower CPU priority once (nice +10), so that the lookups of later actions were not
held up behind the bytes of earlier ones; the lookups of a fresh checkout now go out together
before the downloads (see builder.lookahead), and on a machine shared with other work a nice
download thread lost the CPU to every other process: a fresh checkout's downloads took 500 ms
instead of 300 ms at a load of 4-5 (SqueezeNet project, 26.6 MB, interleaved runs)."""

from __future__ import annotations

import concurrent.futures as cf
import itertools
import queue
import threading
from collections.abc import Callable
from typing import Any


class LargestFirst:
    """A pool of threads that runs the largest job first: of the actions whose blobs wait to
    be downloaded, the one with the most bytes starts first (it would end last), smaller ones
    fill the other threads. Threads start as jobs come, up to `workers`."""

    def __init__(self, workers: int, name: str,
                 initializer: Callable[[], None] | None = None) -> None:
        self.workers = workers
        self.name = name
        self.initializer = initializer
        self._queue: queue.PriorityQueue[tuple[float, int, Any]] = queue.PriorityQueue()
        self._order = itertools.count()
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()

    def submit(self, size: int, fn: Callable[..., Any], *args: Any) -> cf.Future[Any]:
        future: cf.Future[Any] = cf.Future()
        self._queue.put((-size, next(self._order), (future, fn, args)))
        with self._lock:
            if len(self._threads) < self.workers:
                thread = threading.Thread(target=self._work, daemon=True,
                                          name=f"{self.name}_{len(self._threads)}")
                self._threads.append(thread)
                thread.start()
        return future

    def _work(self) -> None:
        if self.initializer is not None:
            self.initializer()
        while True:
            _, _, job = self._queue.get()
            if job is None:
                return
            future, fn, args = job
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(*args))
            except BaseException as exc:  # noqa: BLE001 - handed to whoever waits
                future.set_exception(exc)

    def shutdown(self, wait: bool = True) -> None:
        """Let the queued jobs finish, then stop the threads."""
        with self._lock:
            threads, self._threads = self._threads, []
        for _ in threads:
            self._queue.put((float("inf"), next(self._order), None))
        if wait:
            for thread in threads:
                thread.join()

