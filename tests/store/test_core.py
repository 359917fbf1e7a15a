"""The store's core: blobs, trees, the action cache, the file-digest cache, atomic writes."""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path

import pytest

from udo_build.atomic import write_atomic
from udo_build.errors import UserError
from udo_build.store import ActionResult, Output, Store
from udo_build.store.cas import COMPRESS_MIN


@pytest.fixture
def store(tmp_path: Path) -> Store:
    return Store(tmp_path / "store")


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def test_blobs_are_named_by_their_bytes_and_compressed_when_it_pays(store: Store) -> None:
    text = b"abc" * 1000
    ref = store.cas.put(text)
    assert (ref.digest, ref.size) == (sha(text), 3000)
    path = store.cas.path_of(ref.digest)
    assert path == store.root / "cas" / ref.digest[:2] / f"{ref.digest}.zst"
    assert path.stat().st_size < 100 and store.cas.get(ref.digest) == text
    noise = os.urandom(4096)
    raw = store.cas.put(noise)
    assert store.cas.path_of(raw.digest).name == raw.digest  # incompressible: kept raw
    small = store.cas.put(b"x" * (COMPRESS_MIN - 1))
    assert not store.cas.path_of(small.digest).name.endswith(".zst")
    assert store.cas.put(text) == ref  # idempotent
    assert not os.access(path, os.W_OK) or os.geteuid() == 0  # read-only after writing
    assert oct(path.stat().st_mode & 0o777) == "0o444"


def test_a_corrupt_blob_is_quarantined_and_missing(store: Store) -> None:
    ref = store.cas.put(os.urandom(1000))
    path = store.cas.path_of(ref.digest)
    path.chmod(0o644)
    data = bytearray(path.read_bytes())
    data[10] ^= 0xFF
    path.write_bytes(bytes(data))
    assert store.cas.get(ref.digest) is None
    assert not store.cas.has(ref.digest)
    assert len(list((store.root / "quarantine").iterdir())) == 1


def test_trees_are_merkle_manifests(store: Store, tmp_path: Path) -> None:
    folder = tmp_path / "pkg"
    (folder / "src" / "ops").mkdir(parents=True)
    (folder / "src" / "ops" / "A.cpp").write_text("int a;")
    (folder / "Makefile").write_text("all:\n")
    (folder / "run.sh").write_text("#!/bin/sh\n")
    (folder / "run.sh").chmod(0o755)
    ref = store.cas.put_tree(folder)
    entries = store.cas.tree_entries(ref.digest)
    assert [(e["path"], e["executable"]) for e in entries] == [
        ("Makefile", False), ("run.sh", True), ("src/ops/A.cpp", False)]
    assert store.cas.get(entries[2]["digest"]) == b"int a;"
    copy = tmp_path / "copy"
    copy.mkdir()
    for e in entries:
        (copy / e["path"]).parent.mkdir(parents=True, exist_ok=True)
        (copy / e["path"]).write_bytes(store.cas.get(e["digest"]))
    os.utime(copy / "Makefile", (1, 1))  # times do not matter
    (copy / "run.sh").chmod(0o755)
    assert store.cas.put_tree(copy) == ref


def result(key: str, digest: str, size: int) -> ActionResult:
    return ActionResult(key, "opdef", "test", {"out": Output(digest, size)},
                        {"a/out.json": "out"}, 0.5, created=1.0)


def test_action_cache_round_trip_and_bad_entries_are_misses(store: Store) -> None:
    ref = store.cas.put(b"output")
    key = "ab" * 32
    store.ac.put(result(key, ref.digest, ref.size))
    assert store.ac.get(key) == result(key, ref.digest, ref.size)
    path = store.ac.path_of(key)
    for garbage in (b"", b"{", b"[]", b'{"schema": "udo-build/action-result", "version": 1}',
                    path.read_bytes().replace(b'"blob"', b'"folder"')):
        path.write_bytes(garbage)
        assert store.ac.get(key) is None
    store.ac.put(result(key, "cd" * 32, 5))  # names a blob the store lacks
    assert store.ac.get(key) is None


def test_file_digests_are_cached_by_identity(store: Store, tmp_path: Path) -> None:
    f = tmp_path / "input.bin"
    f.write_bytes(b"hello")
    old = time.time() - 100
    os.utime(f, (old, old))
    assert store.files.digest(f) == (sha(b"hello"), 5)
    assert store.files.digest(f) == (sha(b"hello"), 5)
    assert store.files.hashed == 1
    os.utime(f, (old + 1, old + 1))  # touched: hashed again, same digest
    assert store.files.digest(f)[0] == sha(b"hello") and store.files.hashed == 2
    f.write_bytes(b"world!")
    os.utime(f, (old + 1, old + 1))  # same mtime, other size: still noticed
    assert store.files.digest(f)[0] == sha(b"world!")
    fresh = Store(store.root)  # the cache persists across processes
    assert fresh.files.digest(f)[0] == sha(b"world!") and fresh.files.hashed == 0
    with open(f, "r+b") as fh:  # same size, mtime given back: the ctime still tells
        fh.write(b"W")
    os.utime(f, (old + 1, old + 1))
    assert fresh.files.digest(f)[0] == sha(b"World!") and fresh.files.hashed == 1


def test_recently_modified_files_are_not_cached(store: Store, tmp_path: Path) -> None:
    f = tmp_path / "fresh.bin"
    f.write_bytes(b"a")
    store.files.digest(f)
    store.files.digest(f)
    assert store.files.hashed == 2


def test_atomic_write_leaves_nothing_on_failure(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    def broken_write(fd: int, data: object) -> int:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "write", broken_write)
    with pytest.raises(OSError):
        write_atomic(tmp_path / "f", b"data")
    monkeypatch.undo()
    assert list(tmp_path.iterdir()) == []
    write_atomic(tmp_path / "f", b"data")
    assert [p.name for p in tmp_path.iterdir()] == ["f"]


def test_store_layout_is_checked(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no udo-build store here"):
        Store(tmp_path / "none", create=False)
    Store(tmp_path / "s")
    (tmp_path / "s" / "VERSION").write_text("something else\n")
    with pytest.raises(UserError, match="unknown store layout"):
        Store(tmp_path / "s")
