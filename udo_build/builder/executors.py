"""Where actions run: the executor seam between the engine and the machines.

An executor takes one action (an `ActionSpec`: kind, key, parameters, inputs by digest) and
gives back a future of its result (`execute`'s); `close` ends it. Three implementations:

    inline    `-j 1`: in the build's own process (the future is done when `submit` returns)
    pool      `-j N`: N local worker processes, started by forkserver (or spawn where there is
              none), never by fork: the build process has threads (remote lookups), and a
              forked child would inherit their locks
    dask      `--executor dask://HOST:PORT[?store=PATH]` (or tls://): one Dask task per action
              on a Dask cluster (see cluster.py: reaching it, its data plane)

Inner progress (an action's sub-steps, `ActionContext.progress`) reaches the engine's
`on_step(key, what, done, total)`: inline at once; from pool workers through one queue the
workers inherit, which the engine drains between its waits (`drain`; a worker sends at most one
message per STEP_INTERVAL per action, and never blocks on it); from Dask workers not at all
(dropped: a cluster's tasks have no channel back but their results).

Dask is imported only when it is used.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import time
from collections.abc import Callable, Mapping
from typing import Any, Protocol

from ..errors import UserError
from ..store import Store
from .actions import StepSink
from .execute import ActionSpec, execute

# how the pool starts its workers ("": forkserver, or spawn where there is none); tests whose
# stand-in kinds live in the test process only set "fork" (their processes have no threads)
START_METHOD = ""
STEP_INTERVAL = 0.1  # seconds: a worker sends an action's progress at most this often

OnStep = Callable[[str, str, int, int], None]  # (action key, what, done, total)


class Executor(Protocol):
    def submit(self, spec: ActionSpec,
               resources: Mapping[str, float]) -> cf.Future[Any]: ...

    def close(self, *, cancel: bool = False) -> None: ...

    def drain(self) -> bool:
        """Hand the inner progress received since the last call to `on_step`; whether the
        engine should come back for more while it waits (False: it may block)."""
        ...


class InlineExecutor:
    """Runs each action in this process, at once (its progress goes to `on_step` at once)."""

    def __init__(self, store_root: str, on_step: OnStep | None = None) -> None:
        self.store_root = store_root
        self.on_step = on_step

    def submit(self, spec: ActionSpec, resources: Mapping[str, float]) -> cf.Future[Any]:
        future: cf.Future[Any] = cf.Future()
        steps = None if self.on_step is None else _keyed(self.on_step, spec.key)
        try:
            future.set_result(execute(self.store_root, spec, steps))
        except Exception as exc:
            future.set_exception(exc)
        return future

    def close(self, *, cancel: bool = False) -> None:
        pass

    def drain(self) -> bool:
        return False


def _keyed(on_step: OnStep, key: str) -> StepSink:
    return lambda what, done, total: on_step(key, what, done, total)


class PoolExecutor:
    """`jobs` local worker processes, started on first use."""

    def __init__(self, store_root: str, jobs: int, on_step: OnStep | None = None) -> None:
        import multiprocessing

        self.store_root = store_root
        self.on_step = on_step
        method = START_METHOD or ("forkserver" if "forkserver" in
                                  multiprocessing.get_all_start_methods() else "spawn")
        context = multiprocessing.get_context(method)
        if method == "forkserver":
            context.set_forkserver_preload([__name__])  # each worker starts with it imported
        self._steps: Any = None if on_step is None else context.Queue()
        self._pool = cf.ProcessPoolExecutor(max_workers=jobs, mp_context=context,
                                            initializer=_start_worker,
                                            initargs=(self._steps,))

    def submit(self, spec: ActionSpec, resources: Mapping[str, float]) -> cf.Future[Any]:
        return self._pool.submit(_execute_in_worker, self.store_root, spec)

    def drain(self) -> bool:
        if self._steps is None or self.on_step is None:
            return False
        import queue

        while True:
            try:
                self.on_step(*self._steps.get_nowait())
            except queue.Empty:
                return True

    def close(self, *, cancel: bool = False) -> None:
        if cancel:
            for process in list(getattr(self._pool, "_processes", {}).values()):
                process.terminate()
        self._pool.shutdown(wait=not cancel, cancel_futures=cancel)
        if self._steps is not None:
            self._steps.close()
            self._steps.cancel_join_thread()


_worker_steps: Any = None  # in a pool worker: the queue its actions' progress goes to


def _start_worker(steps: Any) -> None:
    global _worker_steps
    _worker_steps = steps
    _die_with_parent()


def _execute_in_worker(store_root: str, spec: ActionSpec) -> tuple[dict[str, Any], bool]:
    steps = None if _worker_steps is None else _Throttled(_worker_steps, spec.key)
    return execute(store_root, spec, steps)


class _Throttled:
    """An action's progress into the pool's queue: the first and last step of each part, and
    between them at most one per STEP_INTERVAL."""

    def __init__(self, queue: Any, key: str) -> None:
        self.queue, self.key, self.sent = queue, key, 0.0

    def __call__(self, what: str, done: int, total: int) -> None:
        now = time.monotonic()
        if done in (0, 1, total) or now - self.sent >= STEP_INTERVAL:
            self.sent = now
            self.queue.put((self.key, what, done, total))


def open_executor(where: str, store: Store, jobs: int,
                  on_step: OnStep | None = None) -> Executor:
    """The executor `where` names ("" for this machine: inline for one job, else a pool);
    the actions' inner progress goes to `on_step` where it can (see above)."""
    root = os.path.abspath(store.root)  # the same folder for workers started elsewhere
    if where:
        from .cluster import HINT, DaskExecutor, parse_executor

        try:
            cluster = parse_executor(where)
        except ValueError as exc:
            raise UserError(str(exc), hint=HINT) from None
        return DaskExecutor(cluster, store, root)
    return InlineExecutor(root, on_step) if jobs <= 1 else PoolExecutor(root, jobs, on_step)


def check_executor(where: str) -> str | None:
    """What is wrong with an executor's spelling, or None."""
    from .cluster import parse_executor

    try:
        parse_executor(where)
    except ValueError as exc:
        return str(exc)
    return None


def _die_with_parent() -> None:
    """A worker exits when the process that started it dies (kill -9, OOM killer): the kernel
    kills it on Linux, and a watcher thread everywhere else. That is the fork server, which
    exits when the build does."""
    import signal
    import threading

    parent = os.getppid()
    try:
        import ctypes

        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(0.5)
        os._exit(1)

    threading.Thread(target=watch, name="udo-build-parent-watch", daemon=True).start()
