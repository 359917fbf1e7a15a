"""Source digests taken ahead in a background thread (builder/ahead.py): the same digests as
taken in the build's thread, cached in the store's file-digest cache, errors raised where the
digest is asked for."""

from __future__ import annotations

from pathlib import Path

import pytest

from udo_build.builder.ahead import SourceDigests
from udo_build.store import Store
from udo_build.store.filecache import FileDigests


def files(folder: Path, count: int) -> list[Path]:
    folder.mkdir()
    paths = []
    for i in range(count):
        path = folder / f"input_{i}.raw"
        path.write_bytes(bytes([i]) * (100_000 + i))
        paths.append(path)
    code = folder / "kernels.py"
    code.write_text('"""Kernels."""\n\ndef f(x):\n    return x  # identity\n')
    return [*paths, code]


def aged(paths: list[Path]) -> None:
    """Files older than the racy window, so that the digest cache keeps them."""
    import os

    for path in paths:
        os.utime(path, (1_700_000_000, 1_700_000_000))


def test_digests_taken_ahead_are_those_taken_here_and_are_cached(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    paths = files(tmp_path / "project", 12)
    aged(paths)
    wanted = [(p, "python" if p.suffix == ".py" else "content") for p in paths]
    ahead = SourceDigests(store.root, wanted)
    got = [ahead.get(store.files, w) for w in reversed(wanted)]  # the last ones first
    ahead.close()
    fresh = FileDigests(tmp_path / "elsewhere")
    assert got == [fresh.digest(p, kind=k)[0] for p, k in reversed(wanted)]
    assert len(set(got)) == len(wanted)
    again = FileDigests(store.root)  # what either thread hashed is in the store's cache
    assert [again.digest(p, kind=k)[0] for p, k in wanted] == got[::-1]
    assert again.hashed == 0
    for cache in (fresh, again):
        cache.close()
    store.close()


def test_a_vanished_source_raises_where_its_digest_is_asked_for(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    paths = files(tmp_path / "project", 2)
    gone = tmp_path / "project" / "gone.raw"
    ahead = SourceDigests(store.root, [(gone, "content"), (paths[0], "content")])
    with pytest.raises(FileNotFoundError):
        ahead.get(store.files, (gone, "content"))
    assert len(ahead.get(store.files, (paths[0], "content"))) == 64
    ahead.close()
    store.close()


def test_closing_stops_the_thread_and_later_digests_are_taken_here(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    paths = files(tmp_path / "project", 30)
    wanted = [(p, "content") for p in paths]
    ahead = SourceDigests(store.root, wanted)
    ahead.close()
    assert not ahead._thread.is_alive()
    assert [ahead.get(store.files, w) for w in wanted] == \
        [store.files.digest(p)[0] for p in paths]
    store.close()


def test_no_thread_when_the_first_digest_comes_from_the_stat_cache(tmp_path: Path) -> None:
    """A no-op build finds its sources in the stat cache: no thread, no second connection."""
    store = Store(tmp_path / "store")
    paths = files(tmp_path / "project", 3)
    aged(paths)
    wanted = [(p, "content") for p in paths]
    first = SourceDigests(store.root, wanted)
    got = [first.get(store.files, w) for w in wanted]  # the first hashed: a thread helps
    assert first._thread.ident is not None
    first.close()
    hashed = store.files.hashed
    again = SourceDigests(store.root, wanted)
    assert [again.get(store.files, w) for w in wanted] == got and len(set(got)) == 4
    assert again._thread.ident is None and store.files.hashed == hashed
    again.close()
    store.close()
