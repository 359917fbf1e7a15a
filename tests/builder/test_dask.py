"""Builds on a real Dask cluster: a `dask scheduler` and two `dask worker` processes on
loopback, started here, sharing the store's folder (the same machine stands for a shared file
system). The output folder is byte-identical to a local build's; a second build executes
nothing; a worker killed while the build runs costs only what it was running."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from udo_build.store.remote.trust import generate

from ..conftest import REPO
from ..store.remote_fixtures import start_nginx, write_key
from .dask_certs import Certs
from .test_main_job import Ready, executed

pytest.importorskip("distributed", reason="the Dask tests need dask[distributed] "
                                          "(pip install 'udo-build[dask]')")

START_TIMEOUT = 30.0  # seconds for the scheduler and the workers to come up
# every listener on loopback: the HTTP server runs without the dashboard too, on all
# interfaces unless told otherwise
LOOPBACK = ("--host", "127.0.0.1", "--no-dashboard", "--dashboard-address", "127.0.0.1:0")


class Cluster:
    """The scheduler and its workers, as subprocesses on loopback (no dashboards);
    `executor` is dask://HOST:PORT (tls://HOST:PORT with `tls`)."""

    def __init__(self, folder: Path, tls: Certs | None = None) -> None:
        self.folder = folder
        self.tls = tls
        self.env = {**os.environ, "PYTHONPATH": str(REPO),
                    "UDO_BUILD_PLUGINS": str(Path(__file__).with_name("dask_kinds.py"))}
        self.file = folder / "scheduler.json"
        secure = ("--protocol", "tls", *tls.scheduler_args()) if tls else ()
        self.scheduler = self._spawn("scheduler", *LOOPBACK, "--port", "0",
                                     "--scheduler-file", str(self.file), *secure)
        self.workers: dict[str, subprocess.Popen[bytes]] = {}
        self.address = self._address(time.monotonic() + START_TIMEOUT)

    def _address(self, deadline: float) -> str:
        """The scheduler's address, once its scheduler file is written whole (it is created
        empty first, then written: read too early, it is empty or cut)."""
        while True:
            try:
                return str(json.loads(self.file.read_text())["address"])
            except (OSError, ValueError, KeyError):
                if time.monotonic() >= deadline:
                    raise
            time.sleep(0.05)

    def _spawn(self, *args: str, env: dict[str, str] | None = None,
               wrap: tuple[str, ...] = ()) -> subprocess.Popen[bytes]:
        log = open(self.folder / f"{args[0]}-{len(list(self.folder.iterdir()))}.log", "wb")
        return subprocess.Popen([*wrap, sys.executable, "-m", "distributed.cli.dask_" + args[0],
                                 *args[1:]], env=env or self.env, stdout=log, stderr=log,
                                cwd=self.folder)

    def add_worker(self, name: str, *extra: str, env: dict[str, str] | None = None,
                   wrap: tuple[str, ...] = ()) -> None:
        secure = self.tls.scheduler_args() if self.tls else ()
        self.workers[name] = self._spawn("worker", "--scheduler-file", str(self.file),
                                         "--nthreads", "1", "--no-nanny", "--name", name,
                                         *LOOPBACK, *secure, *extra, env=env, wrap=wrap)

    def client(self) -> Any:
        from distributed import Client, Security

        security = Security(tls_ca_file=str(self.tls.ca), tls_client_cert=str(self.tls.cert),
                            tls_client_key=str(self.tls.key), require_encryption=True) \
            if self.tls else None
        return Client(self.address, timeout=START_TIMEOUT, set_as_default=False,
                      security=security)

    @property
    def executor(self) -> str:
        return self.address if self.tls else "dask://" + self.address.removeprefix("tcp://")

    def stop(self) -> None:
        for process in [*self.workers.values(), self.scheduler]:
            process.kill()
            process.wait()


def _cluster(folder: Path, workers: int, tls: Certs | None = None, **worker: Any
             ) -> Iterator[Cluster]:
    folder.mkdir(parents=True, exist_ok=True)
    found = Cluster(folder, tls)
    try:
        for index in range(workers):
            found.add_worker(f"w{index}", **worker)
        with found.client() as client:
            client.wait_for_workers(workers, timeout=START_TIMEOUT)
        yield found
    finally:
        found.stop()


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from _cluster(tmp_path_factory.mktemp("dask"), 2)


def test_the_cluster_listens_on_loopback_only(cluster: Cluster) -> None:
    import psutil

    alive = [psutil.Process(p.pid) for p in [cluster.scheduler, *cluster.workers.values()]
             if p.poll() is None]
    found = [c.laddr for p in alive
             for c in getattr(p, "net_connections", p.connections)("inet")
             if c.status == "LISTEN"]
    assert len(found) >= 4 and {a.ip for a in found} == {"127.0.0.1"}, found


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes()
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _local(tmp_path: Path) -> dict[str, bytes]:
    local = Ready(tmp_path / "local", "softplus.yaml")
    local.build("-j", "2")
    return _tree(local.root / "out")


def _project(tmp_path: Path, name: str) -> Ready:
    (tmp_path / name).mkdir()
    return Ready(tmp_path / name, "softplus.yaml")


def test_a_build_on_the_cluster_equals_a_local_one_then_executes_nothing(
        cluster: Cluster, tmp_path: Path) -> None:
    (tmp_path / "local").mkdir()
    good = _local(tmp_path)
    ready = _project(tmp_path, "cluster")
    before = _tasks_run(cluster)
    first, _ = ready.build("--executor", cluster.executor)
    assert len(executed(first)) == 25 and first["failed"] == 0
    assert _tree(ready.root / "out") == good
    assert _tasks_run(cluster) - before >= 25  # the actions ran on the workers
    again, _ = ready.build("--executor", cluster.executor)
    assert executed(again) == [] and again["cached"] == 41
    assert _tree(ready.root / "out") == good


def _tasks_run(cluster: Cluster) -> int:
    """How many tasks the workers have finished so far."""
    with cluster.client() as client:
        done = client.run(lambda dask_worker: sum(
            1 for _, _, finish, *_ in dask_worker.state.log if finish == "memory"))
    return sum(done.values())


def test_a_failing_action_on_the_cluster_fails_the_build_as_locally(
        cluster: Cluster, tmp_path: Path) -> None:
    ready = _project(tmp_path, "broken")
    kernels = ready.root / "examples/softplus/ops/kernels.py"
    kernels.write_text(kernels.read_text() + "\nraise ValueError('broken on purpose')\n")
    summary, err = ready.build("--executor", cluster.executor, code=1)
    failed = [a for a in summary["actions"] if a["status"] == "failed"]
    assert failed and "broken on purpose" in err, err
    # the file is named as the user knows it, not as the worker's copy
    assert "ops/kernels.py" in err and "udo-build-action-" not in err


def test_a_worker_killed_mid_build_costs_only_what_it_ran(cluster: Cluster,
                                                         tmp_path: Path) -> None:
    (tmp_path / "local").mkdir()
    good = _local(tmp_path)
    ready = _project(tmp_path, "killed")
    outcome: dict[str, Any] = {}
    build = threading.Thread(target=lambda: outcome.update(
        summary=ready.build("--executor", cluster.executor)[0]))
    with cluster.client() as client:
        build.start()
        victim = _busy_worker(client)
        cluster.workers[victim].send_signal(signal.SIGKILL)
        build.join(timeout=120)
        cluster.add_worker(victim + "-again")  # for the tests after this one
        client.wait_for_workers(2, timeout=START_TIMEOUT)
    summary = outcome["summary"]
    assert not build.is_alive() and (summary["failed"], summary["skipped"]) == (0, 0)
    # the victim's action ran again elsewhere (found cached there, if it died just after
    # storing its result)
    assert len(executed(summary)) >= 24 and summary["executed"] + summary["cached"] == 41
    assert _tree(ready.root / "out") == good


def test_with_a_remote_cache_workers_with_their_own_store_build_the_same_bytes(
        cluster: Cluster, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))  # no user's remote settings
    (tmp_path / "local").mkdir()
    good = _local(tmp_path)
    server = start_nginx(tmp_path / "nginx")
    try:
        key = write_key(tmp_path / "ci.key", generate("ci-1"))
        ready = _project(tmp_path, "remote")
        workers = tmp_path / "worker-store"  # not the build's store: all goes through nginx
        where = f"{cluster.executor}?store={workers}"
        first, _ = ready.build("--executor", where, "--remote", server.url, "--ci",
                               "--signing-key", str(key))
        assert len(executed(first)) == 25 and _tree(ready.root / "out") == good
        keys = {a["key"] for a in first["actions"] if a["status"] == "built"}
        held = {p.name for p in server.files("ac")}  # every result the workers built, signed
        assert len(keys) == 25 and keys <= held  # (and index entries: by chain key)
        entries, blobs = _puts(server.prefix / "access.log")
        assert set(entries) == held and set(entries.values()) == {1}  # each entry once
        assert set(blobs.values()) == {1}  # each blob once (by a worker, or this build)
        assert first["remote"]["entries_uploaded"] == 25  # all of them by this build
        assert (workers / "cas").is_dir() and (workers / "ac").is_dir()
        fresh = _project(tmp_path, "fresh")  # another machine: all comes from the remote
        again, _ = fresh.build("--executor", where, "--remote", server.url, "--trusted-key",
                               _public(key))
        assert executed(again) == [] and _tree(fresh.root / "out") == good
    finally:
        server.kill()


def _puts(log: Path) -> tuple[Counter[str], Counter[str]]:
    """The PUT requests nginx logged: (entries by key, blobs by digest)."""
    found: dict[str, Counter[str]] = {"ac": Counter(), "cas": Counter()}
    for match in re.finditer(r'"PUT /(?:\S*/)?(ac|cas)/([0-9a-f]{64}) ', log.read_text()):
        found[match[1]][match[2]] += 1
    return found["ac"], found["cas"]


def _public(key_file: Path) -> str:
    from udo_build.store.remote.trust import parse_signing_key

    return parse_signing_key(key_file.read_text().strip()).public().line


def test_a_kind_that_needs_resources_waits_for_a_worker_that_has_them(
        cluster: Cluster, tmp_path: Path) -> None:
    from udo_build.builder.execute import ActionSpec
    from udo_build.builder.executors import open_executor
    from udo_build.store import ActionResult, Store

    store = Store(tmp_path / "store")
    executor = open_executor(cluster.executor, store, 2)
    try:
        future = executor.submit(ActionSpec("sdk-probe", "5d" * 32, {}, {}, "probe"), {"SDK": 1})
        with cluster.client() as client:  # no worker has SDK: the scheduler holds the task
            _wait_for(lambda: "no-worker" in client.run_on_scheduler(
                lambda dask_scheduler: {t.state for t in dask_scheduler.tasks.values()}))
            assert not future.done()
            cluster.add_worker("sdk", "--resources", "SDK=1")
            doc, ran = future.result(timeout=START_TIMEOUT)
    finally:
        executor.close()
    result = ActionResult.from_json(doc)
    assert ran and result is not None
    assert store.cas.get(result.outputs["worker"].digest) == b"sdk"


def _wait_for(condition: Any) -> None:
    deadline = time.monotonic() + START_TIMEOUT
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def _busy_worker(client: Any) -> str:
    """The name of a worker that is running an action now."""
    deadline = time.monotonic() + START_TIMEOUT
    while time.monotonic() < deadline:
        names = {addr: w["name"] for addr, w in client.scheduler_info()["workers"].items()}
        for addr, keys in client.processing().items():
            if keys:
                return str(names[addr])
        time.sleep(0.01)
    raise AssertionError("no action ran on the cluster")


def test_the_executor_comes_from_the_project_file_and_a_wrong_one_is_refused(
        cluster: Cluster, tmp_path: Path) -> None:
    ready = _project(tmp_path, "configured")
    config = ready.root / "udo-build.toml"
    config.write_text(f'executor = "{cluster.executor}"\n')
    before = _tasks_run(cluster)
    summary, _ = ready.build("-j", "1")  # on the cluster all the same
    assert len(executed(summary)) == 25 and _tasks_run(cluster) - before >= 25
    config.write_text('executor = "ssh://somewhere"\n')
    _, err = ready.build(code=2)
    assert "udo-build.toml" in err and "dask://HOST:PORT" in err
    _, err = ready.build("--executor", "dask://127.0.0.1:1?stor=x", code=2)
    assert "unknown option 'stor'" in err
