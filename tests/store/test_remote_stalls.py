"""A remote never stalls a build: servers that hang, trickle, refuse, die mid-download or fail
uploads, each a small socket server started here (serving a real remote's files, filled once by
a build against nginx). Short timeouts keep the tests fast; the bounds scale with them."""

from __future__ import annotations

import shutil
import socketserver
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from udo_build.store.remote.httpcache import HttpCache
from udo_build.store.remote.transport import RemoteError, RemoteOptions

from ..builder.fakes import fake_kinds
from ..builder.test_engine import Project
from .nginx import free_port
from .remote_fixtures import Keys, build, cli
from .warm_remote import Warm

pytestmark = pytest.mark.usefixtures("clean_env")

WINDOW = 0.5  # read_timeout: the window a server must answer in and keep its bytes coming
BUDGET = 1.0  # seconds of failed requests a build spends before it drops the remote


class Faulty(socketserver.ThreadingTCPServer):
    """An HTTP server that misbehaves as `mode` says, serving the files under `root`:
    hang (never answers), trickle (a byte every 0.2 s), trickle-close (the same, its answer
    saying the connection closes after it), die (half of each blob, then closes), no-put (GET
    as it should, every PUT an HTTP 500)."""

    daemon_threads = True
    allow_reuse_address = True
    # a build looks up many entries at once: socketserver's backlog of 5 dropped the SYNs past
    # it, whose retransmission (1 s later) missed the 0.5 s connect timeout on a loaded machine
    request_queue_size = 128

    def __init__(self, mode: str, root: Path) -> None:
        super().__init__(("127.0.0.1", 0), Handler)
        self.mode, self.root = mode, root
        self.requests: list[str] = []
        self.stop = threading.Event()
        threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # the client dropped it: that is what the tests want

    def close(self) -> None:
        self.stop.set()
        self.shutdown()
        self.server_close()


class Handler(socketserver.BaseRequestHandler):
    server: Faulty

    def handle(self) -> None:
        reader = self.request.makefile("rb")
        line = reader.readline().decode()
        length = 0
        while (header := reader.readline()) not in (b"\r\n", b""):
            name, _, value = header.decode().partition(":")
            length = int(value) if name.lower() == "content-length" else length
        reader.read(length)
        method, path = line.split()[:2]
        self.server.requests.append(f"{method} {path}")
        getattr(self, self.server.mode.replace("-", "_"))(method, path)

    def send(self, status: str, body: bytes, *, cut: int | None = None) -> None:
        head = f"HTTP/1.1 {status}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        self.request.sendall(head.encode() + body[:cut])

    def serve(self, method: str, path: str, cut: bool = False) -> None:
        file = self.server.root / path.lstrip("/")
        if method == "PUT":
            self.send("500 Internal Server Error", b"")
        elif not file.is_file():
            self.send("404 Not Found", b"")
        else:
            data = file.read_bytes()
            self.send("200 OK", b"" if method == "HEAD" else data,
                      cut=len(data) // 2 if cut and "/cas/" in path else None)

    def hang(self, method: str, path: str) -> None:
        self.server.stop.wait(30)

    def trickle(self, method: str, path: str, close: bool = False) -> None:
        self.request.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 1000\r\n"
                             + (b"Connection: close\r\n" if close else b"") + b"\r\n")
        while not self.server.stop.wait(0.2):  # each byte well within the read timeout
            self.request.sendall(b"{")

    def trickle_close(self, method: str, path: str) -> None:
        self.trickle(method, path, close=True)

    def die(self, method: str, path: str) -> None:
        self.serve(method, path, cut=True)

    def no_put(self, method: str, path: str) -> None:
        self.serve(method, path)


@dataclass
class Filled:
    files: Path  # a copy of a remote's files, filled by a build with uploads
    keys: Keys


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory, warm: Warm) -> Filled:
    """The files of the warm remote (filled by a build with uploads), copied for the faulty
    servers of this module."""
    files = tmp_path_factory.mktemp("filled") / "files"
    shutil.copytree(warm.snapshot, files)
    return Filled(files, warm.keys)


def configure(project: Project, url: str, keys: Keys, window: float = WINDOW,
              budget: float = BUDGET) -> None:
    (project.root / "udo-build.toml").write_text(
        f'[remote]\nurl = "{url}"\ntrusted_keys = ["{keys.public}"]\n'
        f"connect_timeout = {min(window, 0.5)}\nread_timeout = {window}\nbudget = {budget}\n")


def timed_build(project: Project, *extra: str) -> tuple[dict[str, Any], str, float]:
    started = time.perf_counter()
    summary, err = build(project, *extra)
    return summary, err, time.perf_counter() - started


@pytest.fixture
def local_seconds(tmp_path: Path) -> Iterator[float]:
    """How long the build takes without a remote (the baseline of the bounds)."""
    with fake_kinds():
        yield timed_build(Project(tmp_path / "local"))[2]


@pytest.mark.parametrize("mode", ["hang", "trickle"])
def test_a_hanging_or_trickling_remote_is_dropped_with_one_warning(
        filled: Filled, tmp_path: Path, local_seconds: float, mode: str) -> None:
    server = Faulty(mode, filled.files)
    try:
        with fake_kinds():
            project = Project(tmp_path / "p")
            configure(project, server.url, filled.keys)
            summary, err, seconds = timed_build(project)
    finally:
        server.close()
    assert summary["executed"] == 9 and summary["failed"] == 0
    assert err.count("warning:") == 1 and "stalled" in err, err
    assert "remote cache too slow" in err or "reads failed" in err
    assert summary["remote"]["disabled"] and summary["remote"]["hits"] == 0
    # dropped within the budget (plus the window of a request in flight when it ran out)
    assert seconds - local_seconds < BUDGET + 2 * WINDOW + 1.0, (seconds, local_seconds)


@pytest.mark.parametrize("mode", ["trickle", "trickle-close"])
def test_a_trickled_request_ends_at_its_deadline_and_is_not_retried(filled: Filled,
                                                                     mode: str) -> None:
    # trickle-close: the client's connection lets go of its socket as the answer's head says it
    # closes; the watchdog still ends the read
    server = Faulty(mode, filled.files)
    http = HttpCache(server.url, RemoteOptions(read_timeout=WINDOW, budget=60.0))
    try:
        started = time.perf_counter()
        with pytest.raises(RemoteError, match=r"stalled: \d+ bytes in 0\.\d s"):
            http.get("ac", "ab" * 32)
        seconds = time.perf_counter() - started
    finally:
        server.close()
    assert WINDOW <= seconds < WINDOW + 0.5 and len(server.requests) == 1
    assert http.disabled is None and http.errors == 1  # one stall: reads still allowed


def test_a_refusing_remote_is_unreachable_at_once(filled: Filled, tmp_path: Path) -> None:
    with fake_kinds():
        project = Project(tmp_path / "p")
        configure(project, f"http://127.0.0.1:{free_port()}", filled.keys)
        summary, err, seconds = timed_build(project)
    assert summary["executed"] == 9 and err.count("warning:") == 1
    assert "remote cache unreachable" in err and "connection refused" in err


def test_a_remote_that_dies_mid_download_leaves_no_partial_blob(
        filled: Filled, tmp_path: Path) -> None:
    server = Faulty("die", filled.files)
    try:
        with fake_kinds():
            project = Project(tmp_path / "p")
            configure(project, server.url, filled.keys)
            summary, err, _ = timed_build(project)
    finally:
        server.close()
    assert summary["executed"] == 9 and summary["remote"]["blobs_downloaded"] == 0
    assert err.count("warning:") == 1 and "reads failed" in err
    assert not [p for p in project.store.rglob(".tmp-*")]
    code, out, _ = cli("store", "verify", "--store", str(project.store), "--json")
    assert code == 0 and '"problems": 0' in out


def test_failing_uploads_do_not_stop_reads(filled: Filled, tmp_path: Path) -> None:
    server = Faulty("no-put", filled.files)
    try:
        with fake_kinds():
            project = Project(tmp_path / "p")
            project.write(["sm8550", "sm8650"])  # a new record (and what uses it) to upload
            # reads must stay up while every upload fails: a window no loaded machine misses
            configure(project, server.url, filled.keys, window=10.0, budget=30.0)
            summary, err, _ = timed_build(project, "--remote-upload", "--signing-key",
                                          str(filled.keys.writer_file))
    finally:
        server.close()
    remote = summary["remote"]
    assert summary["failed"] == 0 and remote["hits"] >= 5 and summary["executed"] >= 1
    assert err.count("warning:") == 1 and "uploads failed" in err and "HTTP 500" in err
    assert "unreachable" not in err and remote["disabled"] is None and not remote["uploading"]
    assert any(r.startswith("PUT ") for r in server.requests)


def test_an_idle_watchdog_ends_its_thread_and_the_next_request_starts_another(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from udo_build.store.remote import deadlines

    monkeypatch.setattr(deadlines, "IDLE_EXIT", 0.05)
    watchdog = deadlines.Watchdog()
    for _ in range(2):  # started, ended when idle, started again
        transfer = deadlines.Transfer("read", time.monotonic() + 60, 0.0, 60.0)
        watchdog.watch(transfer)
        thread = watchdog._thread
        assert thread is not None and thread.is_alive()
        watchdog.forget(transfer)
        thread.join(timeout=5)
        assert not thread.is_alive() and watchdog._thread is None
    assert all(t is not thread for t in threading.enumerate())
