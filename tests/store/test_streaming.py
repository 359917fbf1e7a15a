"""Large blobs: stored as they download (hashed and written chunk by chunk, never held whole),
and published to the output folder by hard link."""

from __future__ import annotations

import hashlib
import os
import threading
from pathlib import Path

import pytest

from udo_build.atomic import TMP_PREFIX
from udo_build.store import ActionResult, Output, Store
from udo_build.store.cas import PROBE_FROM
from udo_build.store.counters import Counters
from udo_build.store.remote.httpcache import HttpCache
from udo_build.store.remote.tier import STREAM_FROM, Remote
from udo_build.store.remote.transport import RemoteError, RemoteOptions
from udo_build.store.remote.trust import generate

from .nginx import Nginx

BIG = STREAM_FROM + 123_457  # streamed, and probed in its middle for compression


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def compressible(size: int) -> bytes:
    line = b"a line of text that zstd squeezes well, again and again\n"
    return (line * (size // len(line) + 1))[:size]


def leftovers(root: Path) -> list[Path]:
    return [p for p in root.rglob("*") if p.name.startswith(TMP_PREFIX)]


def feed(store: Store, data: bytes, digest: str | None = None, size: int | None = None,
         chunk: int = 100_000) -> bool:
    writer = store.cas.writer(digest or sha(data), len(data) if size is None else size)
    view = memoryview(data)
    for start in range(0, len(data), chunk):
        writer.write(view[start:start + chunk])
    return writer.commit()


# -- the blob writer ------------------------------------------------------------------------------

def test_a_streamed_blob_is_stored_like_a_put_one(store: Store) -> None:
    noise, text = os.urandom(BIG), compressible(BIG)
    assert feed(store, noise) and feed(store, text)
    raw, packed = store.cas.path_of(sha(noise)), store.cas.path_of(sha(text))
    assert raw is not None and raw.name == sha(noise)  # incompressible: kept raw
    assert packed is not None and packed.name == f"{sha(text)}.zst"
    assert packed.stat().st_size < BIG // 10
    assert store.cas.get(sha(noise)) == noise and store.cas.get(sha(text)) == text
    assert oct(raw.stat().st_mode & 0o777) == oct(packed.stat().st_mode & 0o777) == "0o444"
    other = Store(store.root.parent / "other")  # the same choices as `put`
    assert other.cas.put(noise).digest == sha(noise) and other.cas.put(text).digest == sha(text)
    assert other.cas.path_of(sha(noise)).name == raw.name
    assert other.cas.path_of(sha(text)).name == packed.name
    assert leftovers(store.root) == []


@pytest.mark.parametrize("case", ["other bytes", "short", "long", "claims a smaller size"])
def test_a_streamed_blob_that_is_not_what_it_claims_is_not_stored(store: Store,
                                                                  case: str) -> None:
    data = os.urandom(BIG)
    digest, size = sha(data), len(data)
    if case == "other bytes":
        data = data[:1000] + bytes([data[1000] ^ 1]) + data[1001:]
    elif case == "short":
        data = data[:-1]
    elif case == "long":
        data += b"x" * 5000
    else:
        size -= 1
    assert not feed(store, data, digest, size)
    assert not store.cas.has(digest) and leftovers(store.root) == []


def test_bytes_past_the_announced_size_are_never_written(store: Store) -> None:
    data = os.urandom(PROBE_FROM)
    writer = store.cas.writer(sha(data), len(data))
    writer.write(memoryview(data))
    for _ in range(50):  # a server that never stops sending
        writer.write(memoryview(data))
    assert writer.tmp.stat().st_size == len(data)
    assert not writer.commit() and leftovers(store.root) == []


def test_an_aborted_blob_leaves_nothing(store: Store) -> None:
    data = os.urandom(BIG)
    writer = store.cas.writer(sha(data), len(data))
    writer.write(memoryview(data)[:500_000])
    writer.abort()
    assert not store.cas.has(sha(data)) and leftovers(store.root) == []


# -- publishing to the output folder --------------------------------------------------------------

def test_raw_blobs_are_linked_into_the_output_folder_read_only(store: Store,
                                                               tmp_path: Path) -> None:
    noise, text = os.urandom(5000), compressible(5000)
    a, b = store.cas.put(noise).digest, store.cas.put(text).digest
    out = tmp_path / "out"
    assert store.cas.materialize(a, out / "noise.bin")
    assert store.cas.materialize(b, out / "text.txt")
    assert store.cas.materialize(a, out / "tool.sh", executable=True)
    linked = out / "noise.bin"
    assert linked.read_bytes() == noise and os.path.samefile(linked, store.cas.path_of(a))
    assert (out / "text.txt").read_bytes() == text and (out / "text.txt").stat().st_nlink == 1
    tool = out / "tool.sh"  # a copy: the mode of a link would be the stored blob's
    assert tool.stat().st_nlink == 1 and oct(tool.stat().st_mode & 0o777) == "0o555"
    for path in (linked, out / "text.txt"):
        assert oct(path.stat().st_mode & 0o777) == "0o444"
    assert oct(store.cas.path_of(a).stat().st_mode & 0o777) == "0o444"
    assert leftovers(out) == []


def test_a_corrupt_raw_blob_is_verified_before_it_is_linked(store: Store,
                                                            tmp_path: Path) -> None:
    data = os.urandom(5000)
    digest = store.cas.put(data).digest
    path = store.cas.path_of(digest)
    path.chmod(0o644)
    path.write_bytes(b"y" + data[1:])
    fresh = Store(store.root)  # another process: it did not store this blob itself
    assert not fresh.cas.materialize(digest, tmp_path / "out" / "x.bin")
    assert not (tmp_path / "out" / "x.bin").exists() and not fresh.cas.has(digest)


def test_without_links_the_output_folder_gets_copies(store: Store, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    def cross_device(src: object, dst: object) -> None:
        raise OSError(18, "Invalid cross-device link")

    monkeypatch.setattr(os, "link", cross_device)
    data = os.urandom(5000)
    digest = store.cas.put(data).digest
    out = tmp_path / "out" / "x.bin"
    assert store.cas.materialize(digest, out) and out.read_bytes() == data
    assert out.stat().st_nlink == 1 and not store.cas.links
    assert oct(out.stat().st_mode & 0o777) == "0o444" and leftovers(tmp_path / "out") == []


# -- streamed downloads from a real server --------------------------------------------------------

def remote_for(store: Store, server: Nginx, **options: float) -> Remote:
    key = generate("ci")
    http = HttpCache(server.url, RemoteOptions(**options))  # type: ignore[arg-type]
    return Remote(store.cas, store.ac, http, {}, Counters(), signing_key=key)


def result_of(digest: str, size: int) -> ActionResult:
    return ActionResult("ab" * 32, "prepare", "a record", {"record": Output(digest, size)})


def test_a_large_blob_downloads_into_the_store(nginx_server: Nginx, store: Store) -> None:
    noise, text = os.urandom(BIG), compressible(3 * BIG)
    for data in (noise, text):
        (nginx_server.root / "cas").mkdir(exist_ok=True)
        (nginx_server.root / "cas" / sha(data)).write_bytes(data)
    remote = remote_for(store, nginx_server)
    try:
        assert remote.download(result_of(sha(noise), len(noise)))
        assert remote.download(result_of(sha(text), len(text)))
    finally:
        remote.close()
    assert store.cas.get(sha(noise)) == noise and store.cas.get(sha(text)) == text
    assert store.cas.path_of(sha(text)).name.endswith(".zst")
    assert remote.counters.blobs_downloaded == 2
    assert remote.counters.bytes_downloaded == len(noise) + len(text)
    assert store.ac.get("ab" * 32) is not None and leftovers(store.root) == []


@pytest.mark.parametrize("tamper", ["flipped", "truncated", "longer"])
def test_a_tampered_large_blob_is_refused(nginx_server: Nginx, store: Store,
                                          tamper: str) -> None:
    data = os.urandom(BIG)
    served = {"flipped": data[:-1] + bytes([data[-1] ^ 1]), "truncated": data[:-10],
              "longer": data + os.urandom(3 * BIG)}[tamper]
    (nginx_server.root / "cas").mkdir()
    (nginx_server.root / "cas" / sha(data)).write_bytes(served)
    remote = remote_for(store, nginx_server)
    try:
        assert not remote.download(result_of(sha(data), len(data)))
    finally:
        remote.close()
    assert not store.cas.has(sha(data)) and store.ac.get("ab" * 32) is None
    assert remote.counters.rejected == {"corrupt blob": 1}
    assert leftovers(store.root) == []


def test_a_server_that_dies_mid_blob_leaves_no_partial_blob(nginx_server: Nginx,
                                                           store: Store) -> None:
    data = os.urandom(8 * BIG)
    (nginx_server.root / "cas").mkdir()
    (nginx_server.root / "cas" / sha(data)).write_bytes(data)
    # throttled, so that most of the blob is still on the server when it dies (unthrottled,
    # loopback's socket buffers can hold all of it by then, and the download succeeds)
    nginx_server.kill()
    nginx_server.limit_rate = "4m"
    nginx_server.start()
    writer = store.cas.writer
    killed = threading.Event()

    def dying_writer(digest: str, size: int, **options: bool):  # type: ignore[no-untyped-def]
        blob = writer(digest, size, **options)
        write = blob.write

        def write_then_die(chunk: memoryview) -> None:
            write(chunk)
            if blob.count > BIG and not killed.is_set():
                killed.set()
                nginx_server.kill()

        blob.write = write_then_die  # type: ignore[method-assign]
        return blob

    store.cas.writer = dying_writer  # type: ignore[method-assign]
    remote = remote_for(store, nginx_server, retries=1, backoff=0.001, read_timeout=1.0)
    try:
        assert not remote.download(result_of(sha(data), len(data)))
    finally:
        remote.close()
    assert killed.is_set() and not store.cas.has(sha(data))
    assert leftovers(store.root) == [] and remote.transport.errors >= 1


def test_get_into_returns_none_on_a_miss_and_streams_a_hit(nginx_server: Nginx) -> None:
    class Sink:
        def __init__(self) -> None:
            self.data = bytearray()
            self.aborted = False

        def write(self, chunk: memoryview) -> None:
            self.data += chunk

        def abort(self) -> None:
            self.aborted = True

    http = HttpCache(nginx_server.url)
    data = os.urandom(BIG)
    http.put("cas", sha(data), data)
    sink = http.get_into("cas", sha(data), Sink)
    assert sink is not None and bytes(sink.data) == data and not sink.aborted
    assert http.get_into("cas", "cd" * 32, Sink) is None
    cut = http.get_into("cas", sha(data), Sink, limit=1000)
    assert cut is not None and len(cut.data) == 1001  # the sink sees it is too long
    assert http.get("cas", sha(data), limit=10) == data[:11]
    assert http.get_into("cas", sha(data), Sink).data == data  # the cut connection was closed
    with pytest.raises(RemoteError):
        HttpCache("http://127.0.0.1:9", RemoteOptions(retries=0)).get_into("cas", "ab" * 32,
                                                                          Sink)


# -- scheduling -----------------------------------------------------------------------------------

def test_the_largest_download_starts_first() -> None:
    from udo_build.store.remote.pools import Pool

    pool = Pool(1)
    gate, order = threading.Event(), []
    first = pool.submit(gate.wait, size=1)  # holds the only thread while the others queue
    futures = [pool.submit(order.append, size, size=size) for size in (5, 500, 50, 5000)]
    gate.set()
    assert first.result(timeout=5) is True
    assert [f.result(timeout=5) for f in futures] == [None] * 4
    assert order == [5000, 500, 50, 5]
    failing = pool.submit(lambda: 1 / 0, size=1)
    with pytest.raises(ZeroDivisionError):
        failing.result(timeout=5)
    pool.shutdown()
    assert not pool._threads


def test_the_largest_blob_of_every_action_downloads_first(store: Store) -> None:
    """The blobs of the actions downloading at once share one pool: a fresh checkout's
    records, queued behind the small files of the actions found first, would end last."""
    from udo_build.store.remote.pools import Pool
    from udo_build.store.remote.tier import Blob

    blobs = {size: bytes([size % 251]) * size for size in (10, 3000, 200, 40_000, 5)}
    order: list[int] = []

    class Transport:
        url, disabled = "fake://", None

        def get(self, space: str, name: str, *, limit: int | None = None) -> bytes:
            data = next(d for d in blobs.values() if sha(d) == name)
            order.append(len(data))
            return data

    remote = Remote(store.cas, store.ac, Transport(), {}, Counters())  # type: ignore[arg-type]
    remote._files = Pool(1)
    gate = threading.Event()
    remote._files.submit(gate.wait)  # holds the only thread while the blobs queue
    done: list[bool] = []
    wanted = [Blob(sha(d), len(d), True) for d in blobs.values()]  # in the order they came
    worker = threading.Thread(target=lambda: done.append(remote._download(wanted)))
    worker.start()
    for _ in range(10_000):  # until every blob waits (10 s at most)
        if remote._files._queued == len(blobs):
            break
        threading.Event().wait(0.001)
    gate.set()
    worker.join(timeout=10)
    assert done == [True] and order == sorted(blobs, reverse=True)
    remote._files.shutdown()


def test_a_blob_synced_to_disk_leaves_its_transfer_slot_to_the_next(
        store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """At most TRANSFERS blobs are on the wire at once, and a downloaded blob's fsync is made
    outside those slots: a thread that waited for the disk held one, its connection idle."""
    from udo_build.store.remote import tier
    from udo_build.store.remote.tier import Blob

    monkeypatch.setattr(tier, "TRANSFERS", 1, raising=False)
    blobs = [bytes([n]) * (1000 + n) for n in range(4)]
    on_wire, most, synced = [0], [0], threading.Event()
    lock = threading.Lock()

    class Transport:
        url, disabled = "fake://", None

        def get(self, space: str, name: str, *, limit: int | None = None) -> bytes:
            with lock:
                on_wire[0] += 1
                most[0] = max(most[0], on_wire[0])
            if name != sha(blobs[0]):  # the first blob's fsync waits for the others' GETs
                synced.set()
            threading.Event().wait(0.01)
            with lock:
                on_wire[0] -= 1
            return next(d for d in blobs if sha(d) == name)

        def close(self) -> None:
            pass

    fsync = os.fsync

    def slow_fsync(fd: int) -> None:
        if os.fstat(fd).st_size == len(blobs[0]):
            assert synced.wait(10), "no GET went out while a blob was being synced"
        fsync(fd)

    monkeypatch.setattr(os, "fsync", slow_fsync)
    remote = Remote(store.cas, store.ac, Transport(), {}, Counters())  # type: ignore[arg-type]
    try:
        assert remote._download([Blob(sha(d), len(d), True) for d in blobs])
    finally:
        remote.close()
    assert most[0] == 1 and all(store.cas.get(sha(d)) == d for d in blobs)


def test_a_pool_starts_its_threads_without_waiting_for_them(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """threading.Thread.start waits until the new thread has taken the GIL (a few switch
    intervals each while other threads run Python code): the thread that submits, the build's
    own in a fresh checkout's lookups, must not wait for that; the pool still grows to its
    size as jobs wait, and jobs of one size run in the order they came."""
    from udo_build.store.remote.pools import Pool

    def no_start(self: threading.Thread) -> None:
        raise AssertionError("a pool thread started through threading.Thread.start")

    monkeypatch.setattr(threading.Thread, "start", no_start)
    pool = Pool(3)
    gate, order = threading.Event(), []
    held = [pool.submit(gate.wait) for _ in range(3)]  # each needs a thread of its own
    queued = [pool.submit(order.append, i) for i in range(5)]
    assert pool._threads == 3
    gate.set()
    assert [f.result(timeout=5) for f in held] == [True] * 3
    assert [f.result(timeout=5) for f in queued] == [None] * 5
    assert sorted(order) == list(range(5))
    assert pool.map(lambda x: x * 2, [1, 2, 3]) == [2, 4, 6]
    pool.shutdown()
    assert pool._threads == 0
