"""The S3 transport's requests: which blobs a bucket lacks is asked with HEADs at once (S3 has
no batched question), against moto and against a server that only answers once several are in
flight; objects below, at and over one chunk and one batch read whole, and cut at the limit."""

from __future__ import annotations

import hashlib
import http.server
import threading
from pathlib import Path
from typing import Any

import pytest

from udo_build.store.remote.s3cache import BATCH, CHUNK, HEADS, S3Cache
from udo_build.store.remote.transport import RemoteOptions

from .moto_s3 import MotoS3
from .s3_fixtures import BUCKET, PREFIX, URL, isolate

TOGETHER = 4  # HEADs the barrier server waits for before it answers any




def _digest(n: int) -> str:
    return hashlib.sha256(b"blob %d" % n).hexdigest()


def test_missing_names_the_blobs_the_bucket_lacks_over_several_groups(aws: MotoS3) -> None:
    there = {_digest(n) for n in range(0, 2 * HEADS + 5, 3)}
    for digest in there:
        aws.put(BUCKET, f"{PREFIX}/cas/{digest}", b"x")
    asked = {_digest(n): 1 for n in range(2 * HEADS + 5)}
    s3 = S3Cache(URL)
    try:
        assert s3.missing(asked) == set(asked) - there
        assert s3.missing({}) == set()
    finally:
        s3.close()


@pytest.mark.parametrize("size", [10, CHUNK, CHUNK + 1, BATCH + CHUNK + 7])
def test_an_object_is_read_whole_and_cut_at_the_limit(aws: MotoS3, size: int) -> None:
    data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    aws.put(BUCKET, f"{PREFIX}/ac/{'ab' * 32}", data)
    s3 = S3Cache(URL)
    try:
        assert s3.get("ac", "ab" * 32) == data
        assert s3.get("ac", "ab" * 32, limit=size - 1) == data  # limit + 1 bytes
        assert s3.get("ac", "ab" * 32, limit=3) == data[:4]
        assert s3.get("ac", "cd" * 32) is None
    finally:
        s3.close()


class _Together(http.server.BaseHTTPRequestHandler):
    """Answers a HEAD only once TOGETHER of them are in flight (a barrier): a client that asks
    one at a time gets no answer (the barrier breaks after its timeout: 503)."""

    protocol_version = "HTTP/1.1"

    def do_HEAD(self) -> None:  # noqa: N802 - the handler's protocol
        try:
            self.server.barrier.wait()  # type: ignore[attr-defined]
            status = 404 if self.path.endswith("0" * 64) else 200
        except threading.BrokenBarrierError:
            status = 503
        self.send_response(status)
        self.send_header("Content-Length", "0")
        self.send_header("Last-Modified", "Sat, 28 Nov 2026 12:00:00 GMT")
        self.send_header("ETag", '"e"')
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass


def test_the_heads_of_missing_are_in_flight_at_once(monkeypatch: pytest.MonkeyPatch,
                                                    tmp_path: Path) -> None:
    isolate(monkeypatch, tmp_path)
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Together)
    server.barrier = threading.Barrier(TOGETHER, timeout=3)  # type: ignore[attr-defined]
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{server.server_address[1]}")
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "s")
    s3 = S3Cache(URL, RemoteOptions(read_timeout=10, retries=0))
    try:
        asked = {"0" * 64: 1, **{str(n) * 64: 1 for n in range(1, TOGETHER)}}
        assert s3.missing(asked) == {"0" * 64}
    finally:
        s3.close()
        server.shutdown()
        server.server_close()
