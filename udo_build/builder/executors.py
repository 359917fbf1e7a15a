"""Where actions run: the executor seam between the engine and the machines.

An executor takes one action (an `ActionSpec`: kind, key, parameters, inputs by digest) and
gives back a future of its result (`execute`'s); `close` ends it. Three implementations:

    inline    `-j 1`: in the build's own process (the future is done when `submit` returns)
    pool      `-j N`: N local worker processes, started by forkserver (or spawn where there is
              none), never by fork: the build process has threads (remote lookups), and a
              forked child would inherit their locks
    dask      `--executor dask://HOST:PORT[?store=PATH]`: one Dask task per action on a Dask
              cluster; the engine submits an action only once its inputs are known, so the
              dependencies are enforced before the scheduler sees it (it gets no task graph);
              a kind's resources become the task's. A worker lost mid-action (killed, out of
              memory) makes the scheduler run the task on another worker (up to its
              `distributed.scheduler.allowed-failures`); a failing action is not retried

Inner progress (an action's sub-steps, `ActionContext.progress`) reaches the engine's
`on_step(key, what, done, total)`: inline at once; from pool workers through one queue the
workers inherit, which the engine drains between its waits (`drain`; a worker sends at most one
message per STEP_INTERVAL per action, and never blocks on it); from Dask workers not at all
(dropped: a cluster's tasks have no channel back but their results).

The data plane of a cluster: with a remote cache this build uploads to (a signing key), the
remote: before an action is submitted its inputs' blobs are uploaded (blobs only: they are
named by their digests), the worker fetches what its store lacks, runs the action into its own
store (`store=PATH`, else the build's store path) and uploads the result, signed, as CI does;
this process then downloads it. Without one, the store's folder, which the workers must share
(a shared file system). Dask is imported only when it is used.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import StepFailed, UserError
from ..store import Store
from .actions import MissingInput, StepSink
from .execute import ActionSpec, Failed, execute, store_at

if TYPE_CHECKING:
    from ..store.remote import Remote

CONNECT_TIMEOUT = 20.0  # seconds to reach a Dask scheduler
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


class DaskExecutor:
    """Actions as tasks of a Dask cluster. The data plane: the remote cache when this build
    uploads to one (workers fetch inputs from it and upload their outputs, signed; this process
    downloads the results), else the store's folder, which the workers share."""

    def __init__(self, address: str, store: Store, worker_store: str) -> None:
        try:
            from distributed import Client
        except ImportError:
            raise UserError("--executor dask:// needs Dask distributed, which is not installed",
                            hint="pip install 'udo-build[dask]'") from None
        self.store = store
        self.worker_store = worker_store
        remote = store.remote
        self.plane = RemotePlane.of(remote) if remote is not None and remote.uploading else None
        try:
            self.client = Client(address, timeout=CONNECT_TIMEOUT, set_as_default=False)
        except OSError as exc:
            raise UserError(f"cannot reach the Dask scheduler at {address}: {exc}",
                            hint="start it (dask scheduler) or check --executor") from None
        self._tasks: dict[cf.Future[Any], Any] = {}  # held so that Dask keeps them
        self._results = cf.ThreadPoolExecutor(4, thread_name_prefix="udo-build-dask")

    def submit(self, spec: ActionSpec, resources: Mapping[str, float]) -> cf.Future[Any]:
        future: cf.Future[Any] = cf.Future()
        args: tuple[Any, ...] = (execute, self.worker_store, spec)
        if self.plane is not None:
            if not self._send_inputs(spec):
                future.set_exception(Failed(StepFailed(spec.kind, "its inputs could not be "
                                                       "uploaded to the remote cache"), 0.0))
                return future
            args = (execute_remote, self.worker_store, self.plane, spec)
        task = self.client.submit(*args, pure=False, resources=dict(resources) or None,
                                  key=f"{spec.kind}-{spec.key[:16]}-{time.time_ns()}")
        self._tasks[future] = task
        task.add_done_callback(lambda done: self._results.submit(self._settle, future, done))
        return future

    def _send_inputs(self, spec: ActionSpec) -> bool:
        from ..store.ac import Output

        assert self.store.remote is not None
        return self.store.remote.send_outputs(
            Output(i.digest, i.size or 0, i.type) for i in spec.inputs.values())

    def _settle(self, future: cf.Future[Any], task: Any) -> None:
        self._tasks.pop(future, None)
        try:
            doc, executed = task.result()
            if self.plane is not None:
                self._download(doc)
            future.set_result((doc, executed))
        except BaseException as exc:  # noqa: BLE001 - the action's failure, or the task's
            future.set_exception(exc)

    def _download(self, doc: dict[str, Any]) -> None:
        """A result the workers uploaded, stored here (its blobs, then its entry)."""
        from ..store.ac import ActionResult

        result = ActionResult.from_json(doc)
        assert result is not None and self.store.remote is not None
        if not self.store.remote.fetch_outputs(result.outputs.values()):
            raise Failed(StepFailed(result.kind, "its outputs could not be downloaded from "
                                    "the remote cache"), result.seconds)
        self.store.ac.put(result)

    def drain(self) -> bool:
        return False  # a task's progress is dropped: it has no channel back but its result

    def close(self, *, cancel: bool = False) -> None:
        if cancel:
            self.client.cancel(list(self._tasks.values()))
        self._tasks.clear()
        self.client.close()
        self._results.shutdown(wait=not cancel)


@dataclass(frozen=True)
class RemotePlane:
    """The remote cache as the workers open it: they read inputs from it and upload what they
    build, signed with the build's key (workers are trusted as CI is)."""

    url: str
    options: Any  # store.transport.RemoteOptions
    trusted: tuple[str, ...]  # public keys (their lines)
    signing_key: str  # its line

    @classmethod
    def of(cls, remote: Remote) -> RemotePlane:
        assert remote.signing_key is not None
        return cls(remote.url, remote.transport.options,
                   tuple(sorted(k.line for k in remote.trusted.values())), remote.signing_key.line)

    def open(self, store: Store) -> Remote:
        from ..store.connect import open_transport
        from ..store.remote import Remote
        from ..store.trust import parse_public_key, parse_signing_key, trusted_set

        trusted = trusted_set([parse_public_key(line) for line in self.trusted])
        return Remote(store.cas, store.ac, open_transport(self.url, self.options), trusted,
                      store.counters, signing_key=parse_signing_key(self.signing_key))


_remotes: dict[tuple[str, RemotePlane], Remote] = {}  # one per worker process


def execute_remote(store_root: str, plane: RemotePlane, spec: ActionSpec
                   ) -> tuple[dict[str, Any], bool]:
    """`execute` on a worker whose store is its own: its inputs are fetched from the remote
    cache first, its result (built, or found in the worker's store) is uploaded after."""
    from ..store.ac import ActionResult, Output

    if (store_root, plane) not in _remotes:
        _remotes[store_root, plane] = plane.open(store_at(store_root))
    remote = _remotes[store_root, plane]
    for name, given in spec.inputs.items():
        if not remote.fetch_outputs([Output(given.digest, given.size or 0, given.type)]):
            raise Failed(MissingInput(name, given.digest), 0.0)
    doc, executed = execute(store_root, spec)
    result = ActionResult.from_json(doc)
    if result is None or not remote.upload(result):
        raise Failed(StepFailed(spec.kind, f"its outputs could not be uploaded to the remote "
                                f"cache {remote.url}"), 0.0)
    return doc, executed


def parse_executor(where: str) -> tuple[str, str | None]:
    """(the Dask scheduler's address, the store folder on the workers or None: the build's)
    of `dask://HOST:PORT[?store=PATH]`."""
    from urllib.parse import parse_qs, urlsplit

    parts = urlsplit(where)
    if parts.scheme != "dask" or not parts.hostname or parts.port is None:
        raise ValueError(f"'{where}' is not an executor: give dask://HOST:PORT[?store=PATH]")
    query = parse_qs(parts.query)
    unknown = sorted(set(query) - {"store"})
    if unknown:
        raise ValueError(f"'{where}': unknown option {unknown[0]!r} (known: store)")
    return f"tcp://{parts.hostname}:{parts.port}", query.get("store", [None])[0]


def open_executor(where: str, store: Store, jobs: int,
                  on_step: OnStep | None = None) -> Executor:
    """The executor `where` names ("" for this machine: inline for one job, else a pool);
    the actions' inner progress goes to `on_step` where it can (see above)."""
    root = os.path.abspath(store.root)  # the same folder for workers started elsewhere
    if where:
        try:
            address, worker_store = parse_executor(where)
        except ValueError as exc:
            raise UserError(str(exc), hint="see README 'Distributed builds'") from None
        return DaskExecutor(address, store, worker_store or root)
    return InlineExecutor(root, on_step) if jobs <= 1 else PoolExecutor(root, jobs, on_step)


def check_executor(where: str) -> str | None:
    """What is wrong with an executor's spelling, or None."""
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
