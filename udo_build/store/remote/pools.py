"""Thread pools of the remote tier's downloads: the largest job first, at a lower CPU priority."""

from __future__ import annotations

import concurrent.futures as cf
import itertools
import os
import queue
import sys
import threading
from collections.abc import Callable
from typing import Any

NICER = 10  # niceness added to the download threads (see `yielding`)


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


def yielding() -> None:
    """Lower this thread's CPU priority (Linux: threads have their own nice value). Blob
    downloads saturate the cores on a fast link; the build's own thread and the lookups then
    still get the CPU at once, so the keys of later actions (and their downloads) are not
    held up behind the bytes of earlier ones. On an idle machine this changes nothing."""
    if sys.platform.startswith("linux"):
        try:
            tid = threading.get_native_id()
            os.setpriority(os.PRIO_PROCESS, tid, os.getpriority(os.PRIO_PROCESS, tid) + NICER)
        except OSError:
            pass
