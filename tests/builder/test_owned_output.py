"""An output folder is owned by one build at a time (real processes), leftovers of a killed
build are removed, an output folder in the store is refused, and gc never deletes anything
outside the store."""

from __future__ import annotations

import fcntl
import importlib.util
import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType

import pytest

from udo_build.cli import main
from udo_build.store import Store
from udo_build.store.maintenance import GcOptions, gc

from .fakes import fake_kinds
from .test_engine import Project

BENCH = Path(__file__).resolve().parents[2] / "bench"
REPO = BENCH.parent



@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    with fake_kinds():
        yield Project(tmp_path)

def _noop_bench() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_noop_owned", BENCH / "noop.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _start(bench: ModuleType, recipe: Path, store: Path, out: Path, sleep_ms: float,
           stderr: io.TextIOBase | int = subprocess.PIPE) -> subprocess.Popen[str]:
    env = bench.bench_env(sleep_ms=sleep_ms)
    env["PYTHONPATH"] = str(REPO)
    return subprocess.Popen([sys.executable, "-m", "udo_build", str(recipe), "--store",
                             str(store), "--out", str(out), "--json", "-j", "2"],
                            cwd=recipe.parent, env=env, stdout=subprocess.PIPE,
                            stderr=stderr, text=True)


def _files(out: Path) -> set[str]:
    return {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()} - {
        ".udo-build-lock", ".udo-build-manifest.json"}


def test_two_builds_into_one_folder_leave_one_recipes_folder(tmp_path: Path) -> None:
    bench = _noop_bench()
    recipes = [bench.make_project(tmp_path / name, n) for name, n in (("a", 2), ("b", 5))]
    store, shared = tmp_path / "store", tmp_path / "shared"
    alone = []
    for i, recipe in enumerate(recipes):  # each recipe's own manifest, built alone
        proc = _start(bench, recipe, store, tmp_path / f"alone{i}", 0)
        assert proc.wait(60) == 0, proc.communicate()[1]
        alone.append(json.loads((tmp_path / f"alone{i}" / ".udo-build-manifest.json")
                                .read_text()))
    assert alone[0] != alone[1]
    (tmp_path / "store2").mkdir()
    procs = [_start(bench, r, tmp_path / "store2", shared, 40) for r in recipes]
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0], errors
    assert any("waiting for it to finish" in e for e in errors)
    manifest = json.loads((shared / ".udo-build-manifest.json").read_text())
    assert manifest in alone
    assert _files(shared) == set(manifest)
    assert all((shared / rel).is_file() for rel in manifest)


def test_a_second_build_waits_for_the_lock_then_proceeds(tmp_path: Path) -> None:
    bench = _noop_bench()
    recipe = bench.make_project(tmp_path / "p", 1)
    out = tmp_path / "out"
    out.mkdir()
    fd = os.open(out / ".udo-build-lock", os.O_RDWR | os.O_CREAT, 0o644)
    fcntl.flock(fd, fcntl.LOCK_EX)
    os.pwrite(fd, b"pid 4242 writing\n", 0)  # the holder dies while writing...
    (out / "model").mkdir()
    (out / "model" / ".tmp-0123456789abcdef-net.udb").write_bytes(b"half")
    log = tmp_path / "stderr.txt"
    with open(log, "w") as sink:
        proc = _start(bench, recipe, tmp_path / "store", out, 0, stderr=sink)
        try:
            deadline = time.monotonic() + 60
            while "waiting" not in log.read_text() and time.monotonic() < deadline:
                assert proc.poll() is None, log.read_text()
                time.sleep(0.05)
            assert not (out / "model" / "net.udb").exists()
        finally:
            os.close(fd)  # ...and its lock is released
        proc.communicate(timeout=60)
    stderr = log.read_text()
    assert proc.returncode == 0, stderr
    assert "another build (pid 4242) is writing this output folder" in stderr
    assert not list(out.rglob(".tmp-*"))
    assert _files(out) == set(json.loads((out / ".udo-build-manifest.json").read_text()))
    assert (out / ".udo-build-lock").read_bytes() == b""  # no pid left: the folder's bytes
    # are the build's alone


def test_an_output_folder_in_the_store_is_refused(project: Project) -> None:
    err = io.StringIO()
    code = main(["build", str(project.recipe), "--store", str(project.store), "--out",
                 str(project.store / "out"), "-j", "1"], stdout=io.StringIO(), stderr=err,
                env={})
    assert code == 2 and "the output folder is inside the store" in err.getvalue()
    assert not (project.store / "out").exists()


def test_gc_never_deletes_outside_the_store(project: Project, tmp_path: Path) -> None:
    project.build()
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    fan = next(f"{i:02x}" for i in range(256) if not (project.store / "cas" / f"{i:02x}").exists())
    victim = outside / (fan * 32)  # named like a blob, reached through a linked fan-out
    victim.write_bytes(b"precious")
    old_tmp = outside / ".tmp-0123456789abcdef-x"
    old_tmp.write_bytes(b"precious too")
    os.utime(old_tmp, (1e9, 1e9))
    (project.store / "cas" / fan).symlink_to(outside)
    (project.store / "quarantine").mkdir(exist_ok=True)
    (project.store / "quarantine" / "linked").symlink_to(outside)
    report = gc(Store(project.store), GcOptions(older_than=0))
    assert victim.read_bytes() == b"precious" and old_tmp.exists()
    assert any("not removed" in e for e in report.errors)
