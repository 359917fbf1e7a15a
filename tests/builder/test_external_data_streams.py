"""Multi-gigabyte sources (a model's external data) travel as streams: the store hashes and
copies a large file piece by piece, an action's work folder gets a large input written piece by
piece and verified, and a damaged copy is that input missing (its producer runs again)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from udo_build.builder import actions
from udo_build.builder.actions import ActionContext, MissingInput
from udo_build.store import cas as cas_module
from udo_build.store.cas import Cas, sha256_bytes

DATA = os.urandom(5000) + bytes(5000)  # over the lowered threshold; half of it compresses


@pytest.fixture
def large(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    monkeypatch.setattr(cas_module, "STREAM_FROM", 1024)
    monkeypatch.setattr(actions, "STREAM_FROM", 1024)
    path = tmp_path / "net.weights"
    path.write_bytes(DATA)

    read_bytes = Path.read_bytes

    def whole(self: Path) -> bytes:
        if self.name == path.name:
            raise AssertionError(f"{self} was read whole")
        return read_bytes(self)

    monkeypatch.setattr(Path, "read_bytes", whole)
    return path


@pytest.fixture
def store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Cas:
    """A store whose copy of DATA is never read whole by `get` (the action's reads)."""
    found = Cas(tmp_path / "store")
    get = found.get

    def whole(digest: str) -> bytes | None:
        if digest == sha256_bytes(DATA):
            raise AssertionError("the input was read whole from the store")
        return get(digest)

    monkeypatch.setattr(found, "get", whole)
    return found


def test_a_large_source_is_stored_as_a_stream(large: Path, tmp_path: Path) -> None:
    store = Cas(tmp_path / "store")
    ref = store.put_file(large)
    assert ref == (sha256_bytes(DATA), len(DATA)) and store.get(ref.digest) == DATA
    assert store.put_file(large) == ref  # already there: checked, not stored again


def test_a_large_input_is_written_to_the_work_folder_piece_by_piece(large: Path,
                                                                     store: Cas) -> None:
    ctx = ActionContext.of_files({}, {"data": large}, store)
    try:
        with open(ctx.input_path("data"), "rb") as fh:
            assert fh.read() == DATA
    finally:
        ctx.cleanup()


def test_a_damaged_large_input_is_that_input_missing(large: Path, store: Cas) -> None:
    ctx = ActionContext.of_files({}, {"data": large}, store)
    blob = store.path_of(sha256_bytes(DATA))
    assert blob is not None
    blob.chmod(0o644)
    with open(blob, "r+b") as fh:  # same size, other bytes
        fh.seek(10)
        fh.write(b"\0" * 8)
    try:
        with pytest.raises(MissingInput):
            ctx.input_path("data")
        assert not list((ctx.workdir / "sources").rglob("net.weights"))
        assert not store.has(sha256_bytes(DATA))  # quarantined
    finally:
        ctx.cleanup()
