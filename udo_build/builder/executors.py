"""Where actions run: the executor seam between the engine and the machines.

An executor takes one action (an `ActionSpec`: kind, key, parameters, inputs by digest) and
gives back a future of its result (`execute`'s); `close` ends it. Three implementations:

    inline    `-j 1`: in the build's own process (the future is done when `submit` returns)
    pool      `-j N`: N local worker processes, started by forkserver (or spawn where there is
              none), never by fork: the build process has threads (remote lookups), and a
              forked child would inherit their locks
    dask      `--executor dask://HOST:PORT`: one Dask task per action on a Dask cluster; the
              engine submits an action only once its inputs are known, so the dependencies
              are enforced before the scheduler sees it (it gets no task graph); a kind's
              resources become the task's. A worker lost mid-action (killed, out of memory)
              makes the scheduler run the task on another worker (up to its
              `distributed.scheduler.allowed-failures`); a failing action is not retried

Every worker reaches the store: the same folder (a shared file system for a cluster) holds the
blobs an action reads and the outputs it stores. Dask is imported only when it is used.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import time
from collections.abc import Mapping
from typing import Any, Protocol

from ..errors import UserError
from .execute import ActionSpec, execute

DASK_SCHEME = "dask://"
CONNECT_TIMEOUT = 20.0  # seconds to reach a Dask scheduler
# how the pool starts its workers ("": forkserver, or spawn where there is none); tests whose
# stand-in kinds live in the test process only set "fork" (their processes have no threads)
START_METHOD = ""


class Executor(Protocol):
    def submit(self, spec: ActionSpec,
               resources: Mapping[str, float]) -> cf.Future[Any]: ...

    def close(self, *, cancel: bool = False) -> None: ...


class InlineExecutor:
    """Runs each action in this process, at once."""

    def __init__(self, store_root: str) -> None:
        self.store_root = store_root

    def submit(self, spec: ActionSpec, resources: Mapping[str, float]) -> cf.Future[Any]:
        future: cf.Future[Any] = cf.Future()
        try:
            future.set_result(execute(self.store_root, spec))
        except Exception as exc:
            future.set_exception(exc)
        return future

    def close(self, *, cancel: bool = False) -> None:
        pass


class PoolExecutor:
    """`jobs` local worker processes, started on first use."""

    def __init__(self, store_root: str, jobs: int) -> None:
        import multiprocessing

        self.store_root = store_root
        method = START_METHOD or ("forkserver" if "forkserver" in
                                  multiprocessing.get_all_start_methods() else "spawn")
        context = multiprocessing.get_context(method)
        if method == "forkserver":
            context.set_forkserver_preload([__name__])  # each worker starts with it imported
        self._pool = cf.ProcessPoolExecutor(max_workers=jobs, mp_context=context,
                                            initializer=_die_with_parent)

    def submit(self, spec: ActionSpec, resources: Mapping[str, float]) -> cf.Future[Any]:
        return self._pool.submit(execute, self.store_root, spec)

    def close(self, *, cancel: bool = False) -> None:
        if cancel:
            for process in list(getattr(self._pool, "_processes", {}).values()):
                process.terminate()
        self._pool.shutdown(wait=not cancel, cancel_futures=cancel)


class DaskExecutor:
    """Actions as tasks of a Dask cluster, whose workers share the store's folder."""

    def __init__(self, address: str, store_root: str) -> None:
        try:
            from distributed import Client
        except ImportError:
            raise UserError("--executor dask:// needs Dask distributed, which is not installed",
                            hint="pip install 'udo-build[dask]'") from None
        self.store_root = store_root
        try:
            self.client = Client(address, timeout=CONNECT_TIMEOUT, set_as_default=False)
        except OSError as exc:
            raise UserError(f"cannot reach the Dask scheduler at {address}: {exc}",
                            hint="start it (dask scheduler) or check --executor") from None
        self._tasks: dict[cf.Future[Any], Any] = {}  # held so that Dask keeps them

    def submit(self, spec: ActionSpec, resources: Mapping[str, float]) -> cf.Future[Any]:
        task = self.client.submit(execute, self.store_root, spec, pure=False,
                                  key=f"{spec.kind}-{spec.key[:16]}-{time.time_ns()}",
                                  resources=dict(resources) or None)
        future: cf.Future[Any] = cf.Future()
        self._tasks[future] = task
        task.add_done_callback(lambda done: self._settle(future, done))
        return future

    def _settle(self, future: cf.Future[Any], task: Any) -> None:
        self._tasks.pop(future, None)
        try:
            future.set_result(task.result())
        except BaseException as exc:  # noqa: BLE001 - the action's failure, or the task's
            future.set_exception(exc)

    def close(self, *, cancel: bool = False) -> None:
        if cancel:
            self.client.cancel(list(self._tasks.values()))
        self._tasks.clear()
        self.client.close()


def open_executor(where: str, store_root: str, jobs: int) -> Executor:
    """The executor `where` names ("" for this machine: inline for one job, else a pool)."""
    if where.startswith(DASK_SCHEME):
        return DaskExecutor("tcp://" + where[len(DASK_SCHEME):], store_root)
    if where:
        raise UserError(f"unknown executor {where!r}",
                        hint="give dask://HOST:PORT, or nothing to build on this machine")
    return InlineExecutor(store_root) if jobs <= 1 else PoolExecutor(store_root, jobs)


def check_executor(where: str) -> str | None:
    """What is wrong with an executor's spelling, or None."""
    if not where or (where.startswith(DASK_SCHEME) and ":" in where[len(DASK_SCHEME):]):
        return None
    return f"'{where}' is not an executor: give dask://HOST:PORT"


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
