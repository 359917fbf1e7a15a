"""Nothing escapes a build's output folder: a symbolic link, named pipe or socket planted at any
level of the folder (its subfolders, a file's place, the manifest, the lock, temporary files), or
named through the manifest, is never followed. The build removes it, writes the folder again
and says so in one warning; nothing outside the folder is written or deleted."""

from __future__ import annotations

import io
import json
import os
import shutil
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from udo_build.cli import main

from .fakes import fake_kinds
from .test_engine import Project

MANIFEST = ".udo-build-manifest.json"
LOCK = ".udo-build-lock"


def snapshot(folder: Path) -> dict[str, object]:
    """Every entry below `folder` (links not followed): kind, bytes and mtime of files."""
    found: dict[str, object] = {}
    for path in sorted(folder.rglob("*")):
        st = path.lstat()
        rel = str(path.relative_to(folder))
        if stat.S_ISLNK(st.st_mode):
            found[rel] = ("link", os.readlink(path))
        elif stat.S_ISREG(st.st_mode):
            found[rel] = ("file", path.read_bytes(), st.st_mtime_ns)
        else:
            found[rel] = (stat.S_IFMT(st.st_mode),)
    return found


def tree(folder: Path) -> dict[str, bytes]:
    """The output folder's files by content (the lock aside); fails on a non-regular entry."""
    found = {}
    for path in sorted(folder.rglob("*")):
        st = path.lstat()
        assert stat.S_ISREG(st.st_mode) or stat.S_ISDIR(st.st_mode), f"{path} is left planted"
        if stat.S_ISREG(st.st_mode) and path.name != LOCK:
            found[str(path.relative_to(folder))] = path.read_bytes()
    return found


class Built:
    """One cold build of the example (fake kinds), copied for each test: its store, the good
    output folder and a folder outside it that holds copies of the output's files."""

    def __init__(self, root: Path) -> None:
        self.project = Project(root / "project")
        self.project.build()
        self.good = tree(self.project.out)
        self.template = root / "template"
        shutil.copytree(self.project.out, self.template)

    def fresh(self, tmp_path: Path) -> tuple[Path, Path]:
        out, outside = tmp_path / "out", tmp_path / "outside"
        shutil.copytree(self.template, out)
        shutil.copytree(self.template, outside)  # same names and bytes: a followed link
        (outside / "victim.txt").write_text("not udo-build's")  # would look unchanged
        return out, outside

    def build(self, out: Path) -> tuple[int, str]:
        err = io.StringIO()
        with fake_kinds():
            code = main(["build", str(self.project.recipe), "--store", str(self.project.store),
                         "--out", str(out), "-j", "1"], stdout=io.StringIO(), stderr=err,
                        env={})
        return code, err.getvalue()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Built]:
    with fake_kinds():
        yield Built(tmp_path_factory.mktemp("confined"))


def warnings(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("warning:")]


def check_healed(built: Built, out: Path, outside: Path, before: dict[str, object],
                 err: str, planted: str, what: str) -> None:
    assert snapshot(outside) == before  # nothing outside written, replaced or deleted
    assert tree(out) == built.good
    said = warnings(err)
    assert len(said) == 1, err
    assert f"{planted} ({what})" in said[0] and "never followed" in said[0]
    code, again = built.build(out)  # healed: the next build has nothing to say
    assert code == 0 and warnings(again) == [], again


@pytest.mark.parametrize("planted", [
    "opdef", "packages/HTP/SoftplusPackage/src", "runs/smoke/Result_2",  # folders
    "model/net.udb", "model/net_deploy.udb", "opdef/SoftplusPackage.json",  # files' places
    MANIFEST, LOCK])
def test_a_planted_link_is_replaced_never_followed(built: Built, tmp_path: Path,
                                                   planted: str) -> None:
    out, outside = built.fresh(tmp_path)
    target = outside / planted  # the same bytes (or folder) outside: it must not be trusted
    place = out / planted
    shutil.rmtree(place) if place.is_dir() else place.unlink()
    place.symlink_to(target)
    before = snapshot(outside)
    code, err = built.build(out)
    assert code == 0, err
    check_healed(built, out, outside, before, err, planted, "a symbolic link")


@pytest.mark.parametrize("planted", ["model/net.udb", MANIFEST, LOCK, "opdef"])
def test_a_planted_pipe_or_socket_is_replaced(built: Built, tmp_path: Path, planted: str,
                                              monkeypatch: pytest.MonkeyPatch) -> None:
    out, outside = built.fresh(tmp_path)
    place = out / planted
    shutil.rmtree(place) if place.is_dir() else place.unlink()
    os.mkfifo(place)  # opening it to read or write would block the build for ever
    sock_place = out / "model" / "net_quantized.udb"
    sock_place.unlink()
    monkeypatch.chdir(sock_place.parent)  # a socket's path must be short: bound by its name
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(sock_place.name)
    try:
        before = snapshot(outside)
        code, err = built.build(out)
    finally:
        sock.close()
    assert code == 0, err
    assert "(a socket)" in err
    check_healed(built, out, outside, before, err, planted, "a named pipe")


def test_a_manifest_entry_through_a_link_deletes_nothing_outside(built: Built,
                                                                 tmp_path: Path) -> None:
    out, outside = built.fresh(tmp_path)
    manifest = json.loads((out / MANIFEST).read_text())
    digest = "0" * 64  # what the manifest says does not matter: nothing outside is touched
    manifest.update({"evil/victim.txt": digest, "gone.txt": digest,
                     "opdef/CPU/victim.txt": digest})
    (out / MANIFEST).write_text(json.dumps(manifest))
    (out / "evil").symlink_to(outside)  # a folder of the manifest, now a link outside
    (out / "gone.txt").symlink_to(outside / "victim.txt")  # a file of the manifest, a link
    shutil.rmtree(out / "opdef" / "CPU")
    (out / "opdef" / "CPU").symlink_to(outside)  # a folder the build still needs
    before = snapshot(outside)
    code, err = built.build(out)  # fully cached: only the folder is mended
    assert code == 0, err
    assert snapshot(outside) == before
    assert (outside / "victim.txt").read_text() == "not udo-build's"
    assert tree(out) == built.good
    said = warnings(err)
    assert len(said) == 1 and "replaced 3 entries" in said[0], err
    assert all(f"{rel} (a symbolic link)" in said[0] for rel in ("evil", "gone.txt"))


def test_leftover_temporary_links_are_removed_not_followed(built: Built, tmp_path: Path) -> None:
    out, outside = built.fresh(tmp_path)
    (out / LOCK).write_text("pid 1 writing\n")  # its last owner was killed while writing
    (out / ".tmp-0123-x").symlink_to(outside / "victim.txt")
    (out / "opdef" / ".tmp-4567-y").symlink_to(outside)
    (out / "model" / ".tmp-89ab-z").symlink_to(outside / "model")
    before = snapshot(outside)
    code, err = built.build(out)
    assert code == 0, err
    assert snapshot(outside) == before
    assert tree(out) == built.good


def test_a_real_folder_at_a_files_place_is_refused_not_deleted(built: Built,
                                                               tmp_path: Path) -> None:
    out, _ = built.fresh(tmp_path)
    (out / "model" / "net.udb").unlink()
    (out / "model" / "net.udb").mkdir()
    (out / "model" / "net.udb" / "mine.txt").write_text("a user's work")
    code, err = built.build(out)
    assert code == 2
    assert "model/net.udb" in err and "a folder is where udo-build writes a file" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert (out / "model" / "net.udb" / "mine.txt").read_text() == "a user's work"
