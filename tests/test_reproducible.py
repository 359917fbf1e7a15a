"""Reproducible builds: both ready recipes, built from two copies of the project at paths of
different lengths, in fresh processes with other hash seeds, time zones, locales, job counts and
umasks, each into its own store and output folder, give the same action keys, the same outputs
and descriptions in the action cache, and byte-identical output folders (same files, bytes and
the owner's permissions: artifacts read-only); and no build writes into the sources.

udo_build is imported from this checkout (PYTHONPATH), whatever is installed.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .conftest import EXAMPLES, RECIPES, REPO

RECIPE_NAMES = ("softplus", "squeezenet")


@dataclass(frozen=True)
class Variant:
    folder: str  # where the project is copied, below the test's temp folder
    hash_seed: str
    tz: str
    locale: str
    jobs: str
    umask: int


VARIANTS = (
    Variant("a", "1", "UTC", "C", "1", 0o022),
    Variant("b" * 40 + "/with space/and-a-much-longer-path/project", "4242", "Asia/Kolkata",
            "C.UTF-8", "2", 0o077),
)


def _copy_project(root: Path) -> None:
    (root / "recipes").mkdir(parents=True)
    (root / ".udo-build-root").write_text("")
    for name in RECIPE_NAMES:
        shutil.copy(RECIPES / f"{name}.yaml", root / "recipes" / f"{name}.yaml")
    shutil.copytree(EXAMPLES, root / "examples",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))


def _env(variant: Variant, home: Path) -> dict[str, str]:
    keep = ("PATH", "SYSTEMROOT", "TMPDIR", "TEMP", "TMP")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update(PYTHONPATH=str(REPO), PYTHONHASHSEED=variant.hash_seed, TZ=variant.tz,
               LC_ALL=variant.locale, LANG=variant.locale, HOME=str(home),
               XDG_CONFIG_HOME=str(home / ".config"), PYTHONDONTWRITEBYTECODE="1",
               NO_COLOR="1")
    return env


def _start(root: Path, variant: Variant, recipe: str) -> subprocess.Popen[bytes]:
    code = ("import os, sys; os.umask(int(sys.argv[1])); from udo_build.cli import run; "
            "sys.argv = ['udo-build', *sys.argv[2:]]; run()")
    argv = [sys.executable, "-c", code, str(variant.umask), "build", f"recipes/{recipe}.yaml",
            "--store", "store", "--out", f"out/{recipe}", "--no-remote", "-j", variant.jobs,
            "--json"]
    return subprocess.Popen(argv, cwd=root, env=_env(variant, root.parent / "home"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _files(folder: Path) -> dict[str, tuple[bytes, int]]:
    """relative path -> (bytes, the owner's permission bits) of every file below `folder` (the
    group's and others' follow the umask, for the manifest)."""
    return {p.relative_to(folder).as_posix(): (p.read_bytes(), p.stat().st_mode & stat.S_IRWXU)
            for p in sorted(folder.rglob("*")) if p.is_file()}


def _action_cache(store: Path) -> dict[str, dict[str, Any]]:
    """key -> what an entry of the action cache says about the artifact (its kind,
    description and outputs; not when it was made or how long it took)."""
    found = {}
    for path in store.glob("ac/*/*.json"):
        entry = json.loads(path.read_bytes())
        found[entry["key"]] = {k: entry[k] for k in ("kind", "description", "outputs",
                                                      "publish")}
    return found


def test_two_checkouts_build_the_same_bytes(tmp_path: Path) -> None:
    roots = [tmp_path / v.folder for v in VARIANTS]
    for root in roots:
        _copy_project(root)
    sources = [_files(root) for root in roots]
    running = {(i, name): _start(root, variant, name) for i, (root, variant)
               in enumerate(zip(roots, VARIANTS, strict=True)) for name in RECIPE_NAMES}
    summaries = {}
    for (i, name), process in running.items():
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, f"{VARIANTS[i]} {name}: {err.decode()}"
        summary = json.loads(out)
        assert summary["ok"] and summary["failed"] == 0 and summary["executed"] > 0
        summaries[i, name] = summary

    for name in RECIPE_NAMES:
        keys = [{a["id"]: (a["kind"], a["key"], a["status"])
                 for a in summaries[i, name]["actions"]} for i in range(len(roots))]
        assert keys[0] == keys[1], f"{name}: the action keys differ"
        outputs = [_files(root / "out" / name) for root in roots]
        assert sorted(outputs[0]) == sorted(outputs[1]), f"{name}: other files"
        assert len(outputs[0]) > 10 and any(p.endswith(".udb") for p in outputs[0])
        differing = [p for p in outputs[0] if outputs[0][p] != outputs[1][p]]
        assert differing == [], f"{name}: these outputs differ: {differing}"
    caches = [_action_cache(root / "store") for root in roots]
    assert caches[0] and caches[0] == caches[1]
    for root, before in zip(roots, sources, strict=True):  # nothing written into the sources
        after = {p: v for p, v in _files(root).items()
                 if not p.startswith(("store/", "out/"))}
        assert after == before
