"""Actions on a Dask cluster: `--executor dask://HOST:PORT[?store=PATH]` (plain TCP; also
spelled tcp://HOST:PORT, as Dask prints its addresses) or `tls://HOST:PORT[?store=PATH]`.

One Dask task per action; the engine submits an action only once its inputs are known, so the
dependencies are enforced before the scheduler sees it (it gets no task graph); a kind's
resources become the task's. A worker lost mid-action (killed, out of memory) makes the
scheduler run the task on another worker (up to `distributed.scheduler.allowed-failures`); a
failing action is not retried. A task's progress is dropped: it has no channel back but its
result.

Reaching the scheduler: a refused connection fails at once (one TCP probe, at most
REFUSED_WITHIN seconds), a scheduler that does not answer after CONNECT_TIMEOUT seconds; both
are user errors raised before the build touches its output folder. A `tls://` scheduler is
reached with Dask's own security settings (`distributed.Security()`, read from Dask's config:
`distributed.comm.tls.ca-file`, `.client.cert`, `.client.key`, e.g. through
DASK_DISTRIBUTED__COMM__TLS__CA_FILE and the like).

The data plane. Without `?store=`, the workers share the build's store folder (a shared file
system; the same machine in tests). With `?store=PATH` (each worker's own store), or with a
remote cache this build uploads to, blobs travel through the remote cache's CAS: before an
action is submitted its inputs' blobs are uploaded, the worker downloads what its store lacks
(each blob checked against its digest), runs the action, uploads its outputs' blobs and returns
the result, whose blobs this process downloads by digest. Blobs are content-addressed, so no
trust is needed and no key travels: a task carries the remote's URL and options only (no
headers: a worker sends its own, from its UDO_BUILD_REMOTE_HEADERS; S3 credentials come from
the worker's environment). This process, which holds the signing key, signs and uploads each
entry once (the engine publishes what was built, as for a local build).
"""

from __future__ import annotations

import concurrent.futures as cf
import dataclasses
import os
import socket
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs, urlsplit

from ..errors import StepFailed, UserError
from ..store import Store
from .actions import MissingInput
from .execute import ActionSpec, Failed, execute, store_at

if TYPE_CHECKING:
    from ..store.remote.tier import Remote

CONNECT_TIMEOUT = 20.0  # seconds for a Dask scheduler to answer
REFUSED_WITHIN = 2.0  # seconds: the TCP probe that tells a refused connection at once
SCHEMES = {"dask": "tcp", "tcp": "tcp", "tls": "tls"}
HINT = "see README 'Distributed builds'"
ACCESS_HINT = ("give the workers what reaching the remote cache needs: its network, its "
               "credentials (for S3: AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY in the "
               "workers' environment; headers: UDO_BUILD_REMOTE_HEADERS) and write access")


@dataclass(frozen=True)
class ClusterAddress:
    """A parsed `--executor`: the scheduler's address (tcp:// or tls://) and the workers'
    own store folder (None: they share the build's)."""

    address: str
    worker_store: str | None

    @property
    def host_port(self) -> tuple[str, int]:
        parts = urlsplit(self.address)
        assert parts.hostname is not None and parts.port is not None
        return parts.hostname, parts.port


def parse_executor(where: str) -> ClusterAddress:
    """The cluster of `dask://HOST:PORT[?store=PATH]` (or tcp://, tls://); ValueError."""
    parts = urlsplit(where)
    if parts.scheme not in SCHEMES or not parts.hostname or parts.port is None:
        raise ValueError(f"'{where}' is not an executor: give dask://HOST:PORT[?store=PATH] "
                         "(or tls://HOST:PORT[?store=PATH] for a TLS scheduler)")
    query = parse_qs(parts.query)
    unknown = sorted(set(query) - {"store"})
    if unknown:
        raise ValueError(f"'{where}': unknown option {unknown[0]!r} (known: store)")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
    return ClusterAddress(f"{SCHEMES[parts.scheme]}://{host}:{parts.port}",
                          query.get("store", [None])[0])


def connect(cluster: ClusterAddress, timeout: float | None = None) -> Any:
    """A Dask client of the cluster; a UserError when it cannot be reached (refused: within
    REFUSED_WITHIN seconds; no answer: after `timeout`, default CONNECT_TIMEOUT)."""
    _probe(cluster)  # before importing Dask (a second or more)
    try:
        from distributed import Client, Security
    except ImportError:
        raise UserError("--executor dask:// needs Dask distributed, which is not installed",
                        hint="pip install 'udo-build[dask]'") from None
    timeout = CONNECT_TIMEOUT if timeout is None else timeout
    security = Security()
    if cluster.address.startswith("tls://") and not security.tls_ca_file:
        raise UserError(f"the Dask scheduler {cluster.address} speaks TLS, and Dask's config "
                        "names no certificates",
                        hint="set distributed.comm.tls.ca-file, .client.cert and .client.key "
                             "(e.g. DASK_DISTRIBUTED__COMM__TLS__CA_FILE=ca.pem)")
    try:
        return Client(cluster.address, timeout=timeout, set_as_default=False,
                      security=security)
    except (OSError, TimeoutError, ValueError) as exc:
        raise UserError(f"the Dask scheduler at {cluster.address} did not answer within "
                        f"{timeout:g} s ({exc})",
                        hint="check that it runs, its address and (tls://) the certificates "
                             "in Dask's config") from None


def _probe(cluster: ClusterAddress) -> None:
    """Fail at once when nothing listens at the scheduler's address (connection refused);
    anything else (no answer yet) is left to Dask's own connection, and its timeout."""
    try:
        with socket.create_connection(cluster.host_port, timeout=REFUSED_WITHIN):
            return
    except ConnectionRefusedError:
        raise UserError(f"cannot reach the Dask scheduler at {cluster.address}: connection "
                        "refused", hint="start it (dask scheduler) or check --executor") from None
    except socket.gaierror as exc:
        raise UserError(f"cannot reach the Dask scheduler at {cluster.address}: "
                        f"{exc.strerror}", hint="check --executor") from None
    except OSError:
        return


@dataclass(frozen=True)
class BlobPlane:
    """The remote cache as the workers open it: its CAS only (blobs by digest), with no key
    and no headers (each worker sends its own)."""

    url: str
    options: Any  # store.transport.RemoteOptions, without headers

    @classmethod
    def of(cls, remote: Remote) -> BlobPlane:
        return cls(remote.url, dataclasses.replace(remote.transport.options, headers=()))

    def open(self, store: Store) -> Remote:
        from ..store.remote.connect import open_transport
        from ..store.remote.tier import Remote
        from .remote_access import access_env

        own = access_env((), None, dict(os.environ)).get("headers", ())
        transport = open_transport(self.url, dataclasses.replace(self.options, headers=own))
        return Remote(store.cas, store.ac, transport, {}, store.counters)


def data_plane(cluster: ClusterAddress, remote: Remote | None) -> BlobPlane | None:
    """How blobs reach the workers: None for the shared store folder, else the remote's CAS
    (the workers have stores of their own, or this build uploads to a remote)."""
    if cluster.worker_store is None and (remote is None or not remote.uploading):
        return None
    if remote is None:
        raise UserError("?store=PATH gives the Dask workers stores of their own, so blobs "
                        "travel through a remote cache, and this build uses none (none is "
                        "configured, or it was not used: see the warning above)",
                        hint="pass --remote URL with --trusted-key or --signing-key (the "
                             "workers need read and write access to it), or drop ?store= so "
                             "that the workers share the build's store folder")
    return BlobPlane.of(remote)


class DaskExecutor:
    """Actions as tasks of a Dask cluster (see the module's docstring for the data plane)."""

    def __init__(self, cluster: ClusterAddress, store: Store, root: str,
                 timeout: float | None = None) -> None:
        self.store = store
        self.plane = data_plane(cluster, store.remote)
        self.worker_store = cluster.worker_store or root
        self.client = connect(cluster, timeout)
        self._tasks: dict[cf.Future[Any], Any] = {}  # held so that Dask keeps them
        self._results = cf.ThreadPoolExecutor(4, thread_name_prefix="udo-build-dask")
        self._closed = False

    def submit(self, spec: ActionSpec, resources: Mapping[str, float]) -> cf.Future[Any]:
        future: cf.Future[Any] = cf.Future()
        args: tuple[Any, ...] = (execute, self.worker_store, spec)
        if self.plane is not None:
            if not self._send_inputs(spec):
                future.set_exception(Failed(self._refused(spec.kind), 0.0))
                return future
            args = (execute_on_worker, self.worker_store, self.plane, spec)
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

    def _refused(self, kind: str) -> BaseException:
        remote = self.store.remote
        assert remote is not None
        said = "; ".join(remote.warnings) or "see the warnings above"
        return UserError(f"{kind}: its inputs could not be uploaded to the remote cache "
                         f"{remote.url}, through which the Dask workers get them ({said})",
                         hint="the build needs write access to the remote cache for the "
                              "workers' blobs")

    def _settle(self, future: cf.Future[Any], task: Any) -> None:
        self._tasks.pop(future, None)
        try:
            doc, executed = task.result()
            if self.plane is not None:
                self._download(doc)
            future.set_result((doc, executed))
        except Failed as failed:
            future.set_exception(self._unshared(failed))
        except BaseException as exc:  # noqa: BLE001 - the task's failure
            future.set_exception(exc)

    def _unshared(self, failed: Failed) -> Failed:
        """A worker that misses an input this store holds does not share the store folder:
        a set-up problem, said as such (a blob missing here too is the engine's to heal)."""
        error = failed.error
        if self.plane is not None or not isinstance(error, MissingInput) \
                or not self.store.cas.has(error.digest):
            return failed
        return Failed(UserError(
            f"a Dask worker does not see the build's store folder {self.worker_store} (its "
            f"input {error.name} is there, and not on the worker)",
            hint="without ?store= the workers share the build's store folder (a shared file "
                 "system); else give them their own with ?store=PATH and a remote cache "
                 "(--remote URL) for the blobs"), failed.seconds)

    def _download(self, doc: dict[str, Any]) -> None:
        """A result the workers built, stored here: its blobs by digest, then its entry."""
        from ..store.ac import ActionResult

        result = ActionResult.from_json(doc)
        assert result is not None and self.store.remote is not None
        if not self.store.remote.fetch_outputs(result.outputs.values()):
            raise Failed(StepFailed(result.kind, "its outputs could not be downloaded from "
                                    f"the remote cache {self.store.remote.url}"),
                         result.seconds)
        self.store.remote.mark_sent(result.outputs.values())  # the worker uploaded them
        self.store.ac.put(result)

    def drain(self) -> bool:
        return False  # a task's progress is dropped: it has no channel back but its result

    def close(self, *, cancel: bool = False) -> None:
        if self._closed:
            return
        self._closed = True
        if cancel:
            self.client.cancel(list(self._tasks.values()))
        self._tasks.clear()
        self.client.close()
        self._results.shutdown(wait=not cancel)


# -- on a worker ----------------------------------------------------------------------------------

_remotes: dict[tuple[str, BlobPlane], Remote] = {}  # one per worker process


def execute_on_worker(store_root: str, plane: BlobPlane, spec: ActionSpec
                      ) -> tuple[dict[str, Any], bool]:
    """`execute` on a worker whose store is its own: its inputs' blobs are downloaded first,
    its outputs' blobs (built, or found in the worker's store) uploaded after; the result goes
    back unsigned (the build signs and publishes it)."""
    from ..store.ac import ActionResult, Output

    remote = _worker_remote(store_root, plane, spec.kind)
    for name, given in spec.inputs.items():
        wanted = [Output(given.digest, given.size or 0, given.type)]
        if not remote.fetch_outputs(wanted):
            raise Failed(_plane_error(remote, spec.kind, f"its input {name} "
                                      f"({given.digest[:12]}) could not be downloaded"), 0.0)
        remote.mark_sent(wanted)  # the build uploaded it: an output holding it need not
    doc, executed = execute(store_root, spec)
    result = ActionResult.from_json(doc)
    if result is None or not remote.send_outputs(result.outputs.values()):
        raise Failed(_plane_error(remote, spec.kind, "its outputs could not be uploaded"),
                     0.0 if result is None else result.seconds)
    return doc, executed


def _worker_remote(store_root: str, plane: BlobPlane, kind: str) -> Remote:
    if (store_root, plane) not in _remotes:
        try:
            _remotes[store_root, plane] = plane.open(store_at(store_root))
        except (ValueError, UserError) as exc:
            raise Failed(UserError(f"{kind}: the Dask worker {_worker_name()} cannot open the "
                                   f"remote cache {plane.url}: {exc}", hint=ACCESS_HINT),
                         0.0) from None
    return _remotes[store_root, plane]


def _plane_error(remote: Remote, kind: str, what: str) -> BaseException:
    """Why a worker could not move an action's blobs: refused (credentials, permissions) is
    the set-up's (a user error), anything else a failed step."""
    said = "; ".join(remote.warnings) or "no answer"
    where = f"on the Dask worker {_worker_name()}"
    if remote.refused:
        return UserError(f"{kind} {where}: {what} ({said})", hint=ACCESS_HINT)
    return StepFailed(kind, f"{what} {where} ({said})")


def _worker_name() -> str:
    try:
        from distributed import get_worker

        return str(get_worker().name)
    except (ImportError, ValueError):
        return "(unknown)"
