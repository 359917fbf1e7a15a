"""The one atomic write path: whole files or nothing, with the mode asked for."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from udo_build.atomic import TMP_PREFIX, AtomicFile, is_tmp, link_atomic, write_atomic


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def leftovers(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.name.startswith(TMP_PREFIX)]


def test_write_atomic_is_read_only_by_default_and_makes_folders(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / "blob"
    write_atomic(path, b"content")
    assert path.read_bytes() == b"content" and mode_of(path) == 0o444
    assert leftovers(tmp_path) == []


def test_write_atomic_writable_replaces_the_old_content(tmp_path: Path) -> None:
    path = tmp_path / "doc.json"
    write_atomic(path, b"old", readonly=False)
    write_atomic(path, b"new", readonly=False, durable=False)
    assert path.read_bytes() == b"new" and mode_of(path) & 0o200


def test_a_private_file_is_never_readable_by_others(tmp_path: Path) -> None:
    path = tmp_path / "key"
    with AtomicFile(path, mode=0o600) as out:
        out.write(b"secret")
        assert mode_of(out.tmp) & 0o077 == 0  # while it is written, too
        assert not path.exists()
    assert path.read_bytes() == b"secret" and mode_of(path) == 0o600


def test_a_failure_inside_the_block_keeps_the_old_file_and_leaves_nothing(
        tmp_path: Path) -> None:
    path = tmp_path / "out.bin"
    write_atomic(path, b"old", readonly=False)
    with pytest.raises(RuntimeError), AtomicFile(path) as out:
        out.write(b"half of the new")
        raise RuntimeError("the writer died")
    assert path.read_bytes() == b"old" and leftovers(tmp_path) == []


def test_pieces_are_counted_and_an_abort_inside_the_block_stores_nothing(
        tmp_path: Path) -> None:
    path = tmp_path / "streamed"
    with AtomicFile(path) as out:
        assert out.write(b"abc") == 3 and out.write(memoryview(b"defg")) == 4
        assert out.size == 7 and is_tmp(out.tmp)
        out.abort()
    assert not path.exists() and leftovers(tmp_path) == []
    with pytest.raises(ValueError, match="closed"):
        out.write(b"late")


def test_commit_inside_the_block_is_not_repeated(tmp_path: Path) -> None:
    path = tmp_path / "once"
    with AtomicFile(path, mode=None, durable=False) as out:
        out.write(b"x")
        out.commit()
        assert path.read_bytes() == b"x"
    assert path.read_bytes() == b"x" and leftovers(tmp_path) == []


def test_link_atomic_replaces_the_target_or_says_it_cannot(tmp_path: Path) -> None:
    source = tmp_path / "source"
    write_atomic(source, b"linked")
    target = tmp_path / "out" / "target"
    write_atomic(target, b"old", readonly=False)
    assert link_atomic(source, target)
    assert os.path.samefile(source, target) and target.read_bytes() == b"linked"
    assert not link_atomic(tmp_path / "missing", tmp_path / "out" / "other")
    assert not (tmp_path / "out" / "other").exists() and leftovers(tmp_path) == []


def test_link_atomic_over_a_link_to_the_same_file_leaves_no_temporary(tmp_path: Path) -> None:
    source = tmp_path / "source"
    write_atomic(source, b"linked")
    target = tmp_path / "target"
    assert link_atomic(source, target) and link_atomic(source, target)
    assert os.path.samefile(source, target) and leftovers(tmp_path) == []
