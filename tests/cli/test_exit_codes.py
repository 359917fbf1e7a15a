"""Exit codes by whose fault it is, as users meet them (real processes): Ctrl-C is exit 130 with
one line and never a traceback, at any moment of a build; non-ASCII names print escaped on an
ASCII stdout; a path the locale cannot spell is exit 2 saying what to do; the store removed
while a build runs is exit 0, 1 or 2 with what to do, never "a bug of udo-build"."""

from __future__ import annotations

import io
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from udo_build.cli import main

from ..builder.test_confinement import tree
from ..builder.test_engine import Project

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
REPO = EXAMPLES.parent
RECIPE = """\
recipe: 1
name: NAME
package:
  name: SoftplusPackage
  ops:
    - {config: EX/ops/softplus.xml, kernels: EX/ops/kernels.py}
    - {config: EX/ops/swish.json, kernels: EX/ops/kernels.py}
  backends: [CPU]
model: {onnx: EX/model/net.onnx}
quantize: {input_list: EX/data/calib.txt, quantizer: tf}
prepare:
  matrix: {soc: [sm8550]}
run:
  - {name: smoke, soc: sm8550, input_list: EX/data/test.txt}
"""
CHEAP = ("outputs", "prepare", "assemble", "run")  # the kinds a trial makes run again


class Small:
    """A small real recipe, built once; `command` builds it in a process of its own."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / ".udo-build-root").touch()
        shutil.copytree(EXAMPLES / "softplus", root / "ex",
                        ignore=shutil.ignore_patterns("make_example.py"))
        self.recipe = root / "r.yaml"
        self.recipe.write_text(RECIPE.replace("NAME", "small").replace("EX", "ex"))
        code = main([str(self.recipe), "--store", str(root / "store"), "--out",
                     str(root / "out"), "--json"], stdout=io.StringIO(), stderr=io.StringIO())
        assert code == 0
        self.good = tree(root / "out")

    def command(self, *extra: str, out: str = "out") -> list[str]:
        return [sys.executable, "-m", "udo_build", str(self.recipe), "--store",
                str(self.root / "store"), "--out", out, *extra]

    def env(self, **extra: str) -> dict[str, str]:
        return {**os.environ, "PYTHONPATH": str(REPO), **extra}

    def forget_cheap_results(self) -> None:
        """Drop the cached results of the cheap actions: the next build runs them again."""
        for entry in (self.root / "store" / "ac").rglob("*"):
            if entry.is_file() and json.loads(entry.read_text()).get("kind") in CHEAP:
                entry.unlink()


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> Small:
    return Small(tmp_path_factory.mktemp("small"))


def _startup(small: Small) -> float:
    """Seconds this machine takes to start Python itself (its `site` packages): a Ctrl-C
    before udo-build's first line is Python's own."""
    times = []
    for _ in range(3):
        started = time.perf_counter()
        subprocess.run([sys.executable, "-c", "pass"], env=small.env(), check=True)
        times.append(time.perf_counter() - started)
    return max(times)


def _interrupted_build(small: Small, delay: float, jobs: str) -> tuple[int, str]:
    """A build interrupted after `delay` seconds as a terminal does it: SIGINT to the whole
    process group (the build and its workers)."""
    proc = subprocess.Popen(small.command("--json", "-j", jobs), cwd=small.root,
                            env=small.env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)
    time.sleep(delay)
    try:
        os.killpg(proc.pid, signal.SIGINT)
    except ProcessLookupError:
        pass
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


def _python_own_start(code: int, err: str) -> bool:
    """Whether the Ctrl-C landed in Python's own start, before udo-build's first line: the
    interpreter's fatal error while importing `site`, with the KeyboardInterrupt it raised
    there (not udo-build's to handle; any other exit still fails the test)."""
    return code == 1 and err.startswith("Fatal Python error: init_import_site") and \
        err.rstrip().endswith("KeyboardInterrupt")


def _check_a_build_mends(small: Small) -> None:
    done = subprocess.run(small.command("--json"), cwd=small.root, env=small.env(),
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert tree(small.root / "out") == small.good


def test_ctrl_c_at_50_random_moments(small: Small) -> None:
    rng = random.Random(26)
    start = 2.0 * _startup(small)  # Python's own start varies with the load beside it
    codes: list[int] = []
    trial = early = 0
    # 50 moments, and more (up to 100) until 25 of them fell inside a build: how long a build
    # runs against Python's start varies with the load beside the test
    while trial < 50 or (codes.count(130) < 25 and trial < 100):
        trial += 1
        if rng.random() < 0.3:
            small.forget_cheap_results()
        if rng.random() < 0.3:
            shutil.rmtree(small.root / "out", ignore_errors=True)
        code, err = _interrupted_build(small, rng.uniform(start, start + 0.6),
                                       "2" if trial % 2 else "1")  # local workers, or none
        if _python_own_start(code, err):
            early += 1  # a load spike beside the test outlasted twice Python's measured start
            assert early <= 10, err
            continue
        codes.append(code)
        assert code in (0, 130), err
        assert "Traceback" not in err and "Exception ignored" not in err, err
        if code == 130:
            (line,) = err.strip().splitlines()
            assert line.startswith("udo-build: interrupted (Ctrl-C): run the same command")
        if trial % 10 == 0:
            _check_a_build_mends(small)
    assert codes.count(130) >= 25, codes  # the moments fell inside the builds


@pytest.mark.parametrize("env", [
    {"PYTHONIOENCODING": "ascii"},
    {"LC_ALL": "C", "PYTHONUTF8": "0"},
])
def test_non_ascii_names_print_escaped_on_an_ascii_stdout(small: Small,
                                                          env: dict[str, str]) -> None:
    out = f"öut-{len(env)}"
    done = subprocess.run(small.command(out=out), cwd=small.root, env=small.env(**env),
                          capture_output=True, timeout=300)
    text = done.stdout.decode("ascii") + done.stderr.decode("ascii")
    assert done.returncode == 0, text
    assert f"outputs in \\xf6ut-{len(env)}" in text or \
        f"outputs in \\udcc3\\udcb6ut-{len(env)}" in text, text
    assert tree(small.root / out) == small.good


def test_a_name_the_locale_cannot_spell_is_a_user_error(small: Small) -> None:
    shutil.copytree(small.root / "ex", small.root / "ëx", dirs_exist_ok=True)
    recipe = small.root / "ë.yaml"
    recipe.write_text(RECIPE.replace("NAME", "e").replace("EX", "ëx"))
    command = [*small.command(), "--dry-run"]
    command[3] = str(recipe)
    done = subprocess.run(command, cwd=small.root, capture_output=True, timeout=300,
                          env=small.env(LC_ALL="C", PYTHONUTF8="0"))
    err = done.stderr.decode("ascii")
    assert done.returncode == 2, err
    (line,) = err.strip().splitlines()
    assert "\\xebx" in line and "file-system encoding (ascii) cannot spell" in line
    assert "LC_ALL=C.UTF-8" in line and "PYTHONUTF8=1" in line


def test_the_store_removed_while_a_build_runs(tmp_path: Path) -> None:
    """With the real kinds and the pool's own start method (no fake kinds: those need forked
    workers, and a pytest worker that forks while a remover thread and earlier tests' threads
    run hung twice in whole-suite runs, a pool worker never handed its work item)."""
    project = Project(tmp_path)
    started = time.perf_counter()
    project.build()
    whole = time.perf_counter() - started
    shutil.rmtree(project.store)
    good = tree(project.out)
    for i, share in enumerate([0.02, 0.1, 0.2, 0.3, 0.45, 0.6, 0.75, 0.9]):
        remover = threading.Timer(share * whole,
                                  lambda: shutil.rmtree(project.store, ignore_errors=True))
        remover.start()
        err = io.StringIO()
        code = main(["build", str(project.recipe), "--store", str(project.store), "--out",
                     str(project.out), "-j", "1" if i % 2 else "2", "--json"],
                    stdout=io.StringIO(), stderr=err, env={})
        remover.join()
        text = err.getvalue()
        assert code in (0, 1, 2), text
        assert "bug of udo-build" not in text and "Traceback" not in text, text
        if code:
            assert "build again" in text.lower(), text
        assert main(["build", str(project.recipe), "--store", str(project.store), "--out",
                     str(project.out), "-j", "1"], stdout=io.StringIO(),
                    stderr=io.StringIO(), env={}) == 0
        assert tree(project.out) == good
        shutil.rmtree(project.store)


def _broken(args: object, rep: object) -> int:
    raise RuntimeError("a bug")


def test_a_bug_says_where_it_was_raised_without_debug(tmp_path: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Exit 3, the error, and the file, line and function that raised it: a bug seen once (an
    interrupted build in a test run) cannot be rerun with --debug for its traceback."""
    from udo_build.cli import info

    monkeypatch.setattr(info, "run", _broken)
    out, err = io.StringIO(), io.StringIO()
    assert main(["info", str(tmp_path / "m.udb")], stdout=out, stderr=err) == 3
    line = _broken.__code__.co_firstlineno + 1
    assert err.getvalue().splitlines()[:2] == [
        "udo-build failed: internal error: RuntimeError: a bug",
        f"  raised at {__file__}:{line} in _broken"]
