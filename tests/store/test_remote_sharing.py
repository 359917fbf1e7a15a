"""Blobs that several remote hits share are downloaded once, even when their downloads run at
the same time (the records and the deployable bundle's parts): the later action waits for the
download in flight and shares its outcome."""

from __future__ import annotations

import hashlib
import os
import re
import threading
from pathlib import Path

import pytest

from udo_build.store import ActionResult, Output, Store
from udo_build.store.counters import Counters
from udo_build.store.remote.httpcache import HttpCache
from udo_build.store.remote.tier import STREAM_FROM, Remote
from udo_build.store.remote.trust import generate

from .nginx import Nginx


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def serve(server: Nginx, *blobs: bytes) -> None:
    (server.root / "cas").mkdir(exist_ok=True)
    for data in blobs:
        (server.root / "cas" / sha(data)).write_bytes(data)


def gets(server: Nginx, requests: int) -> list[str]:
    """The blobs the server sent, once its log holds `requests` lines."""
    text = server.access_log(requests)
    return re.findall(r'"GET /cas/([0-9a-f]{64}) HTTP/[0-9.]+" 200 ', text)


def download_together(remote: Remote, results: list[ActionResult]) -> list[bool]:
    """Each result's download in a thread of its own, started together."""
    outcomes: list[bool] = [False] * len(results)
    start = threading.Barrier(len(results))

    def one(i: int) -> None:
        start.wait()
        outcomes[i] = remote.download(results[i])

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(results))]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    return outcomes


@pytest.mark.parametrize("shared_size", [STREAM_FROM + 4321, 200_000])
def test_a_blob_two_hits_share_downloads_once(nginx_server: Nginx, tmp_path: Path,
                                              shared_size: int) -> None:
    nginx_server.kill()
    nginx_server.limit_rate = "1m"  # each download lasts long enough for the other to come
    nginx_server.start()
    shared, own_a, own_b = (os.urandom(n) for n in (shared_size, 1000, 2000))
    serve(nginx_server, shared, own_a, own_b)
    results = [ActionResult(key * 32, "prepare", "a record", {
        "record": Output(sha(shared), len(shared)), "log": Output(sha(own), len(own))})
        for key, own in (("ab", own_a), ("cd", own_b))]
    store = Store(tmp_path / "store")
    remote = Remote(store.cas, store.ac, HttpCache(nginx_server.url), {}, Counters(),
                    signing_key=generate("ci"))
    try:
        assert download_together(remote, results) == [True, True]
    finally:
        remote.close()
    assert sorted(gets(nginx_server, 3)) == sorted(sha(b) for b in (shared, own_a, own_b)), \
        (nginx_server.prefix / "access.log").read_text()
    assert remote.counters.blobs_downloaded == 3
    assert remote.counters.bytes_downloaded == len(shared) + 3000
    assert store.cas.get(sha(shared)) == shared
    assert all(store.ac.get(r.key) is not None for r in results)


def test_when_the_shared_download_fails_both_hits_miss(nginx_server: Nginx,
                                                       tmp_path: Path) -> None:
    nginx_server.kill()
    nginx_server.limit_rate = "1m"
    nginx_server.start()
    shared = os.urandom(STREAM_FROM + 99)
    serve(nginx_server, shared)
    (nginx_server.root / "cas" / sha(shared)).write_bytes(shared[:-1] + b"\0")  # corrupt
    results = [ActionResult(key * 32, "prepare", "a record",
                            {"record": Output(sha(shared), len(shared))}) for key in ("ab", "cd")]
    store = Store(tmp_path / "store")
    remote = Remote(store.cas, store.ac, HttpCache(nginx_server.url), {}, Counters(),
                    signing_key=generate("ci"))
    try:
        assert download_together(remote, results) == [False, False]
    finally:
        remote.close()
    assert gets(nginx_server, 1) == [sha(shared)], (nginx_server.prefix / "access.log").read_text()
    assert remote.counters.rejected == {"corrupt blob": 1}
    assert not store.cas.has(sha(shared)) and store.ac.get("ab" * 32) is None
