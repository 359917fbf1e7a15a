"""Faults of the machine are the user's to fix: a read-only store, a full one, an output folder
that cannot be written. Real file systems: as root, small tmpfs mounts and read-only bind
mounts (chmod does not stop root); as another user, chmod. Neither working fails the test."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from udo_build.errors import EXIT_STEP_FAILED, EXIT_USER_ERROR

from ..builder.fakes import fake_kinds
from ..builder.test_engine import Project
from .remote_fixtures import cli

pytestmark = pytest.mark.usefixtures("clean_env")


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True)


@contextmanager
def read_only(folder: Path) -> Iterator[None]:
    """`folder` cannot be written while inside: a read-only bind mount (root) or chmod."""
    if os.geteuid() != 0:
        modes = {p: p.stat().st_mode for p in [folder, *folder.rglob("*")] if p.is_dir()}
        for path in modes:
            path.chmod(0o555)
        try:
            yield
        finally:
            for path, mode in modes.items():
                path.chmod(mode)
        return
    _mount("--bind", str(folder), str(folder))
    try:
        _mount("-o", "remount,bind,ro", str(folder))
        yield
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


@contextmanager
def full_fs(folder: Path, size: str = "256k") -> Iterator[Path]:
    """A small file system filled to the last block (root: a tmpfs)."""
    if os.geteuid() != 0:
        pytest.fail("a full file system needs root here (a tmpfs mount)")
    folder.mkdir(parents=True, exist_ok=True)
    _mount("-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(folder))
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], check=True)


def run(project: Project, *extra: str, store: Path | None = None,
        out: Path | None = None) -> tuple[int, dict[str, object], str]:
    code, stdout, err = cli("build", str(project.recipe), "--store", str(store or project.store),
                            "--out", str(out or project.out), "-j", "1", "--json", *extra)
    return code, json.loads(stdout), err


@pytest.fixture
def built(tmp_path: Path) -> Iterator[Project]:
    with fake_kinds():
        project = Project(tmp_path / "p")
        assert run(project)[0] == 0
        yield project


def test_a_fully_cached_build_on_a_read_only_store_succeeds_and_says_what_it_skipped(
        built: Project) -> None:
    shutil.rmtree(built.out)
    with read_only(built.store):
        code, summary, err = run(built)
    assert code == 0 and (summary["executed"], summary["cached"]) == (0, 9), err
    assert (built.out / ".udo-build-manifest.json").is_file()
    assert err.count("warning:") == 1 and "not recorded" in err and "cache counters" in err
    assert str(built.store) in err


def test_an_action_that_must_run_on_a_read_only_store_is_a_failed_step(built: Project) -> None:
    built.write(["sm8550", "sm8650"])
    with read_only(built.store):
        code, summary, err = run(built)
    assert code == EXIT_STEP_FAILED and summary["ok"] is False and summary["failed"] >= 1
    assert "udo-build failed" not in err and "bug" not in err
    problems = [e for a in summary["actions"] for e in a.get("error", [])]  # type: ignore
    assert problems and all(str(built.store) in p["message"] for p in problems)
    assert "read-only" in err or "permission denied" in err


def test_a_full_store_fails_the_step_naming_the_path(tmp_path: Path) -> None:
    with fake_kinds(), full_fs(tmp_path / "full") as full:
        project = Project(tmp_path / "p")
        code, summary, err = run(project, store=full / "store")
    assert code == EXIT_STEP_FAILED and summary["ok"] is False, err
    assert "no space left on device" in err and str(full / "store") in err
    assert "udo-build failed" not in err


def test_an_output_folder_that_cannot_be_written_is_a_user_error(
        built: Project, tmp_path: Path) -> None:
    target = tmp_path / "ro-out"
    target.mkdir()
    with read_only(target):
        code, summary, err = run(built, out=target / "o")
    assert code == EXIT_USER_ERROR and summary["ok"] is False
    assert err.count("error:") == 1 and str(target / "o") in err
    assert ("read-only" in err or "permission denied" in err) and "--out DIR" in err
