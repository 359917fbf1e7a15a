"""Dask set-ups, each on a real cluster on loopback: what travels in a task (no key), how an
unreachable scheduler fails (refused: at once; no answer: after the timeout; never an output
folder), a TLS scheduler with certificates made here, and the set-ups that are the user's to
fix (exit 2, one line saying what to do) or a failed step (exit 1): never "a bug"."""

from __future__ import annotations

import pickle
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from udo_build.builder import cluster as dask_cluster
from udo_build.store.remote.trust import generate

from ..store.moto_s3 import MotoS3, moto_installed
from ..store.remote_fixtures import start_nginx, write_key
from .dask_certs import Certs, make_certs
from .test_dask import Cluster, _cluster, _local, _project, _public, _tree
from .test_main_job import executed

pytest.importorskip("distributed", reason="the Dask tests need dask[distributed] "
                                          "(pip install 'udo-build[dask]')")


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    yield from _cluster(tmp_path_factory.mktemp("dask"), 1)


@pytest.fixture(autouse=True)
def no_user_settings(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    for name in ("UDO_BUILD_REMOTE", "UDO_BUILD_SIGNING_KEY", "UDO_BUILD_TRUSTED_KEYS",
                 "UDO_BUILD_EXECUTOR", "UDO_BUILD_REMOTE_UPLOAD"):
        monkeypatch.delenv(name, raising=False)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_a_refused_scheduler_fails_at_once_and_leaves_no_output_folder(tmp_path: Path) -> None:
    ready = _project(tmp_path, "p")
    started = time.monotonic()
    _, err = ready.build("--executor", f"dask://127.0.0.1:{_free_port()}", code=2)
    seconds = time.monotonic() - started
    assert "connection refused" in err and "start it (dask scheduler)" in err
    assert seconds < 2.0, seconds
    assert not (ready.root / "out").exists()


def test_a_scheduler_that_does_not_answer_fails_after_the_timeout(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(dask_cluster, "CONNECT_TIMEOUT", 1.0)
    ready = _project(tmp_path, "p")
    with socket.socket() as silent:  # it listens, and never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(0)
        port = silent.getsockname()[1]
        _, err = ready.build("--executor", f"dask://127.0.0.1:{port}", code=2)
    assert "did not answer within 1 s" in err and not (ready.root / "out").exists()


def test_no_key_travels_in_a_task_and_blobs_come_back_by_digest(
        cluster: Cluster, tmp_path: Path) -> None:
    from udo_build.builder.execute import ActionSpec
    from udo_build.builder.executors import open_executor
    from udo_build.builder.settings import RemoteRequest, open_remote
    from udo_build.store import ActionResult, Store

    server = start_nginx(tmp_path / "nginx")
    key = generate("ci-1")
    store = Store(tmp_path / "store")
    try:
        open_remote(store, tmp_path, RemoteRequest(server.url, upload=True, signing_key=str(
            write_key(tmp_path / "ci.key", key))), lambda problem: None)
        executor = open_executor(f"{cluster.executor}?store={tmp_path / 'w'}", store, 1)
        sent: list[bytes] = []
        submit = executor.client.submit  # type: ignore[attr-defined]
        executor.client.submit = lambda *args, **kw: (  # type: ignore[attr-defined]
            sent.append(pickle.dumps(args)), submit(*args, **kw))[1]
        try:
            doc, ran = executor.submit(ActionSpec("sdk-probe", "5e" * 32, {}, {}, "probe"),
                                       {}).result(timeout=60)
        finally:
            executor.close()
        store.close()
    finally:
        server.kill()
    assert sent and not any(key.line.encode() in s or key.line.split(":")[-1].encode() in s
                            for s in sent)
    result = ActionResult.from_json(doc)
    assert ran and result is not None and not server.files("ac")  # the engine publishes
    assert Store(tmp_path / "store").cas.get(result.outputs["worker"].digest) == b"w0"


def test_store_without_a_remote_is_a_user_error(cluster: Cluster, tmp_path: Path) -> None:
    ready = _project(tmp_path, "p")
    _, err = ready.build("--executor", f"{cluster.executor}?store={tmp_path / 'w'}", code=2)
    assert "?store=PATH gives the Dask workers stores of their own" in err
    assert "pass --remote URL" in err and not (ready.root / "out").exists()


def test_a_remote_without_a_signing_key_carries_the_blobs_and_gets_no_entries(
        cluster: Cluster, tmp_path: Path) -> None:
    (tmp_path / "local").mkdir()
    good = _local(tmp_path)
    server = start_nginx(tmp_path / "nginx")
    try:
        ready = _project(tmp_path, "p")
        reader = _public(write_key(tmp_path / "ci.key", generate("ci-1")))
        summary, _ = ready.build("--executor", f"{cluster.executor}?store={tmp_path / 'w'}",
                                 "--remote", server.url, "--trusted-key", reader)
        assert len(executed(summary)) == 25 and _tree(ready.root / "out") == good
        assert server.files("cas") and not server.files("ac")  # blobs only: nothing signed
    finally:
        server.kill()


def test_a_worker_that_does_not_share_the_store_folder_is_a_user_error(
        tmp_path: Path) -> None:
    ready = _project(tmp_path, "p")
    store = ready.root / "store"
    store.mkdir(exist_ok=True)
    wrap = ("unshare", "--mount", "sh", "-c", f"mount -t tmpfs none {store} && exec \"$@\"",
            "worker")  # its own empty folder where the build's store is
    for found in _cluster(tmp_path / "dask", 1, wrap=wrap):
        _, err = ready.build("--executor", found.executor, code=2)
        assert "a Dask worker does not see the build's store folder" in err
        assert "?store=PATH" in err and "a bug of udo-build" not in err


@pytest.mark.skipif(not moto_installed(), reason="moto[server] is not installed")
def test_s3_workers_without_credentials_are_told_what_to_give_them(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    moto = MotoS3(tmp_path / "moto.log").start()
    try:
        moto.create_bucket("cache")
        for name, value in moto.env().items():  # this build has the keys, the workers not
            monkeypatch.setenv(name, value)
        ready = _project(tmp_path, "p")
        key = write_key(tmp_path / "ci.key", generate("ci-1"))
        for found in _cluster(tmp_path / "dask", 1, env=_without_keys(moto)):
            _, err = ready.build("--executor", f"{found.executor}?store={tmp_path / 'w'}",
                                 "--remote", "s3://cache/team", "--ci", "--signing-key",
                                 str(key), code=2)
            assert "on the Dask worker w0: its input" in err and "refuses" in err
            assert "AWS_ACCESS_KEY_ID" in err and "a bug of udo-build" not in err
    finally:
        moto.kill()


def _without_keys(moto: MotoS3) -> dict[str, str]:
    """A worker's environment with the endpoint and the region of the S3 server, no keys."""
    import os

    from ..conftest import REPO

    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env.update(PYTHONPATH=str(REPO), AWS_ENDPOINT_URL=moto.endpoint, AWS_REGION="us-east-1",
               UDO_BUILD_PLUGINS=str(Path(__file__).with_name("dask_kinds.py")))
    return env


@pytest.fixture(scope="module")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    return make_certs(tmp_path_factory.mktemp("certs"))


def test_a_tls_scheduler_with_certificates_builds_and_refuses_strangers(
        certs: Certs, tmp_path: Path) -> None:
    import dask

    (tmp_path / "local").mkdir()
    good = _local(tmp_path)
    ready = _project(tmp_path, "p")
    for found in _cluster(tmp_path / "dask", 1, tls=certs):
        assert found.executor.startswith("tls://127.0.0.1:")
        _, err = ready.build("--executor", found.executor, code=2)  # no certificates
        assert "speaks TLS, and Dask's config names no certificates" in err
        stranger = make_certs(tmp_path / "stranger", "stranger")
        with dask.config.set(stranger.client_config()):
            _, err = ready.build("--executor", found.executor, code=2)
        assert f"the Dask scheduler at {found.address} did not answer" in err
        assert not (ready.root / "out").exists()
        with dask.config.set(certs.client_config()):
            summary, _ = ready.build("--executor", found.executor)
        assert len(executed(summary)) == 25 and _tree(ready.root / "out") == good
