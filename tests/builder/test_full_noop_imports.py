"""What a full no-op build (its no-op record removed: it loads the recipe, plans, keys and looks
up every action, and finds each cached) imports beyond what it uses: nothing that only running
an action needs (its work folder: tempfile, shutil; what it is handed and returns:
builder/action_io.py), no plugin-file loader (importlib.util), and no settings of quantization
algorithms the recipe does not list. Run without site (`-S`), whose .pth files import some of
these here: what udo-build itself imports."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from udo_build.builder import uptodate

REPO = Path(__file__).resolve().parents[2]
# made lazy: an action's work folder (builder/actions.py ActionContext), its inputs and outputs
# (builder/action_io.py), a plugin loaded from a file, AdaRound's and the mixed precision
# search's settings (quant/algorithm_settings.py)
LAZY = ("tempfile", "shutil", "random", "bz2", "lzma", "importlib.util",
        "udo_build.builder.action_io", "udo_build.quant.algorithm_settings")
ENTRY = ("import atexit, json, sys\n"
         "listed = sys.argv[1]\n"
         "atexit.register(lambda: json.dump(sorted(sys.modules), open(listed, 'w')))\n"
         "sys.argv = ['udo-build', *sys.argv[2:]]\n"
         "from udo_build.cli import run\n"
         "run()\n")


def _build(project: Path, tag: str, *flags: str) -> tuple[dict, list[str]]:
    """(the --json summary, the modules) of a `udo-build recipes/softplus.yaml` process
    started through the console script's entry point; `flags` for the interpreter."""
    listed = project / f"modules-{tag}.json"
    env = {k: v for k, v in os.environ.items() if not k.startswith("UDO_BUILD_")}
    env["PYTHONPATH"] = str(REPO)
    got = subprocess.run([sys.executable, *flags, "-c", ENTRY, str(listed), "recipes/softplus.yaml",
                          "--store", "store", "--json"], capture_output=True, text=True,
                         cwd=project, env=env, check=False)
    assert got.returncode == 0, got.stderr
    return json.loads(got.stdout), json.loads(listed.read_text())


def test_a_full_no_op_imports_neither_an_action_s_work_folder_nor_unused_settings(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from udo_build.cli import main

    for folder in ("recipes", "examples/softplus"):
        shutil.copytree(REPO / folder, tmp_path / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))
    (tmp_path / ".udo-build-root").write_text("")
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    assert main(["recipes/softplus.yaml", "--store", "store", "--json"], stdout=out,
                stderr=io.StringIO(), env={}) == 0  # the cold build, in this process
    assert json.loads(out.getvalue())["executed"] > 0
    time.sleep(2.1)  # past the stat cache's racy window (store/filecache.py)
    _build(tmp_path, "first")  # verifies what the cold build wrote (zstd, from site-packages)
    shutil.rmtree(tmp_path / "store" / uptodate.FOLDER)  # the record: this one runs in full
    summary, modules = _build(tmp_path, "full", "-S")
    assert summary["executed"] == 0 and summary["cached"] > 0
    assert "udo_build.builder.plan" in modules  # it planned (it was not replayed)
    assert "udo_build.quant.settings" in modules  # the recipe quantizes: its settings are read
    assert [m for m in LAZY if m in modules] == []
