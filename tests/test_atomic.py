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


# -- Confined: writing below a folder through the folder itself -----------------------------------

def _outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "f.txt").write_text("outside")
    return folder


def test_confined_refuses_a_link_on_the_way_and_at_the_place(tmp_path: Path) -> None:
    from udo_build.atomic import Confined
    from udo_build.errors import UserError

    outside = _outside(tmp_path)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "sub").symlink_to(outside)
    (tmp_path / "out" / "f.txt").symlink_to(outside / "f.txt")
    with Confined(tmp_path / "out") as out:
        for rel, words in (("sub/f.txt", "a symbolic link is where udo-build writes a folder"),
                           ("f.txt", "a symbolic link is where udo-build writes a file")):
            with pytest.raises(UserError) as info:
                out.write(rel, b"new")
            assert info.value.problem.file == str(tmp_path / "out" / rel.split("/")[0])
            assert words in info.value.problem.message
        with pytest.raises(UserError):  # not even the link itself is removed
            out.unlink("f.txt")
    assert (outside / "f.txt").read_text() == "outside"
    assert sorted(p.name for p in outside.iterdir()) == ["f.txt"]


def test_confined_healing_removes_the_link_and_notes_it(tmp_path: Path) -> None:
    from udo_build.atomic import Confined

    outside = _outside(tmp_path)
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "sub").symlink_to(outside)
    os.mkfifo(tmp_path / "out" / "pipe")
    with Confined(tmp_path / "out", heal=True) as out:
        assert out.read("pipe", 100) is None  # never blocks on a named pipe
        assert out.unlink("sub/f.txt") is False  # nothing deleted through the link
        out.write("sub/f.txt", b"inside")
        out.write("pipe", b"a file now")
        assert out.replaced == [("sub", "a symbolic link"), ("pipe", "a named pipe")]
    assert (outside / "f.txt").read_text() == "outside"
    assert (tmp_path / "out" / "sub" / "f.txt").read_text() == "inside"
    assert not (tmp_path / "out" / "sub").is_symlink()


def test_confined_removes_empty_folders_up_to_its_top(tmp_path: Path) -> None:
    from udo_build.atomic import Confined

    with Confined(tmp_path / "out") as out:
        out.write("a/b/c/f.txt", b"x")
        assert out.unlink("a/b/c/f.txt")
        out.remove_empty_folders("a/b/c/f.txt", top="a")
    assert [p.name for p in (tmp_path / "out").iterdir()] == ["a"]
    assert list((tmp_path / "out" / "a").iterdir()) == []


def _interrupted_close(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """os.close in udo_build.atomic closes, then a Ctrl-C lands (its KeyboardInterrupt raised
    right after the call returns); the descriptors it was called with, in order."""
    from udo_build import atomic

    closed: list[int] = []
    real = os.close

    def close(fd: int) -> None:
        closed.append(fd)
        real(fd)
        if len(closed) == 1:
            raise KeyboardInterrupt

    monkeypatch.setattr(atomic.os, "close", close)
    return closed


def test_an_interrupt_right_after_a_close_never_closes_that_descriptor_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A descriptor closed twice can close another thread's file that took its number in
    between (that thread then fails with EBADF): the atomic file and the confined folder forget
    a descriptor before closing it."""
    from udo_build.atomic import Confined

    out = AtomicFile(tmp_path / "f")
    out.write(b"x")
    closed = _interrupted_close(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        out.commit()
    out.abort()
    assert len(closed) == 1 and not (tmp_path / "f").exists()
    monkeypatch.undo()
    folder = Confined(tmp_path / "out")
    folder.folder("a/b")
    closed = _interrupted_close(monkeypatch)
    with pytest.raises(KeyboardInterrupt):
        folder.close()
    folder.close()
    assert len(closed) == 3 and len(set(closed)) == 3
