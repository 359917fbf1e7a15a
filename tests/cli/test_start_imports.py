"""What every command pays before it does anything: the modules a replayed no-op imports stay
light (no dataclasses, hence no inspect, ast, dis, tokenize), a no-op build of a real recipe
through the console script's entry point (STYLE.md item 8), replayed or in full, imports none
of the heavy modules, a full no-op none of what only running an action needs, and the
hand-written Problem behaves as the frozen dataclass it was."""

from __future__ import annotations

import dataclasses
import io
import json
import os
import pickle
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from udo_build.builder import uptodate
from udo_build.errors import Diagnostics, Problem, UserError

REPO = Path(__file__).resolve().parents[2]


def test_the_no_op_path_imports_neither_dataclasses_nor_inspect() -> None:
    code = ("import sys, udo_build.cli, udo_build.cli.build, udo_build.builder.session, "
            "udo_build.builder.uptodate, udo_build.builder.owner, udo_build.store; "
            "print(sorted(m for m in ('dataclasses', 'inspect') if m in sys.modules))")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO, env={"PYTHONPATH": str(REPO)}, check=True)
    assert got.stdout.strip() == "[]", got.stderr


# What a no-op build never needs: the model and op-config readers, numpy, the schema checker
# and its problem reporter (difflib), the YAML parser (an unchanged recipe is read from the
# store's memo), a terminal's renderer, the remote tiers' clients, zstd (what a no-op reads is
# stored raw), the html package (the page escapes by itself), tracebacks (no action failed),
# and the emulator (its compiler, sessions, kernels, rewrite engine).
HEAVY = ("onnx", "lxml", "numpy", "ml_dtypes", "jsonschema", "difflib", "yaml", "jinja2", "rich",
         "http.client", "grpc", "obstore", "cryptography", "zstandard", "html", "traceback",
         "udo_build.schema_problems", "udo_build.compiler",
         "udo_build.runtime.float_session", "udo_build.runtime.integer", "udo_build.kernels",
         "udo_build.rewrite", "udo_build.ir.bundle", "udo_build.opdef.xml")
# the entry point of the `udo-build` console script (pyproject.toml), the modules it ended with
# written to a file at exit (whatever the build printed)
ENTRY = ("import atexit, json, sys\n"
         "listed = sys.argv[1]\n"
         "atexit.register(lambda: json.dump(sorted(sys.modules), open(listed, 'w')))\n"
         "sys.argv = ['udo-build', *sys.argv[2:]]\n"
         "from udo_build.cli import run\n"
         "run()\n")


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]


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


def _no_op(project: Path, tag: str, *flags: str) -> list[str]:
    """The modules a `udo-build recipes/softplus.yaml` process imported (it must be a no-op);
    `flags` for the interpreter."""
    summary, modules = _build(project, tag, *flags)
    assert summary["executed"] == 0
    return modules


# What a replayed no-op is told without (cli/__init__.py tells it before parsing its words): the
# parser and its translations (argparse, gettext, locale), the other commands' shared module,
# the session and the remote settings it imports (builder/outcome.py holds the report values)
REPLAY_SKIPS = ("argparse", "gettext", "locale", "udo_build.cli.common",
                "udo_build.builder.session", "udo_build.builder.settings",
                "udo_build.builder.remote_access")


@pytest.fixture(scope="module")
def no_ops(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """The modules of no-op builds of a real recipe: in full (its record removed), replayed,
    and replayed without site."""
    from udo_build.cli import main

    project = tmp_path_factory.mktemp("no-op")
    for folder in ("recipes", "examples/softplus"):
        shutil.copytree(REPO / folder, project / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))
    (project / ".udo-build-root").write_text("")
    was = os.getcwd()
    os.chdir(project)
    try:
        out = io.StringIO()
        assert main(["recipes/softplus.yaml", "--store", "store", "--json"], stdout=out,
                    stderr=io.StringIO(), env={}) == 0  # the cold build, in this process
    finally:
        os.chdir(was)
    assert json.loads(out.getvalue())["executed"] > 0
    time.sleep(2.1)  # past the racy window (store/filecache.py): what the build wrote is
    _no_op(project, "first")  # trusted now, and this first no-op verifies and records it
    shutil.rmtree(project / "store" / uptodate.FOLDER)  # the record: the next runs in full
    full = _no_op(project, "full")
    # without site (whose .pth files here import shutil through tempfile): what udo-build
    # itself imports; argparse's formatters would import shutil (see cli/common.py)
    replayed = _no_op(project, "replayed")
    replayed_without_site = _no_op(project, "replayed-without-site", "-S")
    shutil.rmtree(project / "store" / uptodate.FOLDER)  # in full again, without site
    summary, full_without_site = _build(project, "full-without-site", "-S")
    assert summary["executed"] == 0 and summary["cached"] > 0
    return {"full": full, "replayed": replayed, "replayed-without-site": replayed_without_site,
            "full-without-site": full_without_site}


def test_a_no_op_build_of_a_real_recipe_imports_nothing_heavy(
        no_ops: dict[str, list[str]]) -> None:
    full, replayed = no_ops["full"], no_ops["replayed"]
    assert "udo_build.recipe.load" in full  # it loaded the recipe, planned and looked up
    assert "udo_build.recipe.load" not in replayed  # told from its record (uptodate.py)
    assert (_heavy(full), _heavy(replayed)) == ([], [])
    assert "shutil" not in no_ops["replayed-without-site"]


def test_a_replayed_no_op_imports_neither_the_parser_nor_the_session(
        no_ops: dict[str, list[str]]) -> None:
    assert "udo_build.builder.uptodate" in no_ops["replayed"]
    assert [m for m in no_ops["replayed"] if m in REPLAY_SKIPS] == []
    assert [m for m in REPLAY_SKIPS if m in no_ops["full"]] == list(REPLAY_SKIPS)  # they exist


# Nor, run without site (whose .pth files import some of them here), typing, pathlib (and the
# urllib.parse and ipaddress that pathlib imports) or threading: about 5, 8 and 1.5 ms of the
# 60 or so of CPU a replayed no-op spent importing. The modules on its path name their types
# for type checkers only (`TYPE_CHECKING = False`) and spell paths with os.path; outcome.py's
# values are collections.namedtuple's; its locks are _thread's.
REPLAY_SKIPS_WITHOUT_SITE = ("typing", "pathlib", "urllib.parse", "ipaddress", "threading")


def test_a_replayed_no_op_imports_neither_typing_pathlib_nor_threading(
        no_ops: dict[str, list[str]]) -> None:
    replayed, full = no_ops["replayed-without-site"], no_ops["full-without-site"]
    assert "udo_build.builder.uptodate" in replayed
    assert [m for m in REPLAY_SKIPS_WITHOUT_SITE if m in replayed] == []
    assert [m for m in REPLAY_SKIPS_WITHOUT_SITE if m in full] == list(REPLAY_SKIPS_WITHOUT_SITE)


# What a full no-op (its record removed: it loads the recipe, plans, keys and looks up every
# action, and finds each cached) does not import, run without site (whose .pth files import
# some of these here): nothing that only running an action needs (its work folder: tempfile,
# shutil; what it is handed and returns: builder/action_io.py), no plugin-file loader
# (importlib.util), and no settings of quantization algorithms the recipe does not list
# (quant/algorithm_settings.py)
LAZY = ("tempfile", "shutil", "random", "bz2", "lzma", "importlib.util",
        "udo_build.builder.action_io", "udo_build.quant.algorithm_settings")


def test_a_full_no_op_imports_neither_an_action_s_work_folder_nor_unused_settings(
        no_ops: dict[str, list[str]]) -> None:
    modules = no_ops["full-without-site"]
    assert "udo_build.builder.plan" in modules  # it planned (it was not replayed)
    assert "udo_build.quant.settings" in modules  # the recipe quantizes: its settings are read
    assert [m for m in LAZY if m in modules] == []


@pytest.mark.parametrize("columns", [None, "", "0", "-3", "x", "37", "200"])
def test_the_help_s_width_is_shutil_s_terminal_width(
        columns: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    from udo_build.cli.common import terminal_columns

    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert terminal_columns() == shutil.get_terminal_size().columns


def test_a_problem_is_immutable_compared_hashed_and_pickled_by_its_fields() -> None:
    p = Problem("bad", "a.yaml", 3, 4, "x.y", hint="fix it")
    assert p == Problem("bad", "a.yaml", 3, 4, "x.y", "fix it") != Problem("bad")
    assert hash(p) == hash(Problem("bad", "a.yaml", 3, 4, "x.y", "fix it"))
    assert len({p, Problem("bad", "a.yaml", 3, 4, "x.y", "fix it"), Problem("bad")}) == 2
    assert p != ("bad", "a.yaml", 3, 4, "x.y", "fix it")
    with pytest.raises(AttributeError):
        p.message = "other"  # type: ignore[misc]
    assert pickle.loads(pickle.dumps(p)) == p
    assert pickle.loads(pickle.dumps(UserError(problems=[p]))).problems == [p]
    assert str(p) == "a.yaml:3:4: x.y: bad; fix it"
    assert repr(Problem("m")) == ("Problem(message='m', file=None, line=None, column=None, "
                                  "field=None, hint=None)")


def test_dataclasses_replace_and_fields_work_on_a_problem() -> None:
    p = Problem("bad", "a.yaml", 3)
    assert dataclasses.is_dataclass(p)
    assert [f.name for f in dataclasses.fields(p)] == [
        "message", "file", "line", "column", "field", "hint"]
    assert dataclasses.replace(p, message="worse") == Problem("worse", "a.yaml", 3)
    assert UserError("bad").with_file("b.yaml").problem == Problem("bad", "b.yaml")


def test_diagnostics_keep_each_warning_once_in_order() -> None:
    diag = Diagnostics()
    diag.extend([Problem("a"), Problem("b"), Problem("a")])
    diag.warn(Problem("b"))
    assert diag.warnings == [Problem("a"), Problem("b")]


@pytest.mark.parametrize("words, plain", [
    (["r.yaml"], (None, False, False)),
    (["build", "r.yaml", "--store", "s", "--json"], ("s", True, False)),
    (["--json", "r.yaml", "--store=s", "--store", "t", "--debug"], ("t", True, True)),
    (["r.yaml", "--store="], ("", False, False)),
    (["r.yaml", "-j", "2", "--out", "o", "--no-remote"], (None, False, False)),
    (["r.yaml", "--store"], None),  # no value: argparse says so
    (["r.yaml", "--sto", "s"], None),  # abbreviations: argparse reads them
    (["r.yaml", "--stor=s"], None),
    (["--js", "r.yaml"], None),
    (["r.yaml", "--deb"], None),
    (["r.yaml", "--", "--store"], None),
    (["store", "stats"], None),  # another command
    (["r.yaml", "explain"], None),
    ([], None),  # no file named: help, --version, or a mistake
    (["--json", "--store", "s"], None),
    (["build", "--debug"], None),
])
def test_the_words_a_no_op_is_looked_up_with_before_parsing(
        words: list[str], plain: tuple[str | None, bool, bool] | None) -> None:
    from udo_build.cli import plain_words

    assert plain_words(words) == plain


@pytest.mark.parametrize("words, recorded", [
    (["r.yaml", "--store", "s"], ("r.yaml", "--store", "s")),
    (["--json", "build", "r.yaml", "--debug"], ("r.yaml",)),
    (["r.yaml", "--", "--json"], ("r.yaml", "--", "--json")),  # a file named --json
    (["r.yaml", "build"], ("r.yaml", "build")),  # a second file named build
])
def test_the_words_a_no_op_is_recorded_under(words: list[str],
                                             recorded: tuple[str, ...]) -> None:
    from udo_build.cli import recorded_words

    assert recorded_words(words) == recorded
