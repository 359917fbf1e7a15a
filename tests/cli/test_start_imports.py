"""What every command pays before it does anything: the modules a replayed no-op imports stay
light (no dataclasses, hence no inspect, ast, dis, tokenize), and the hand-written Problem
behaves as the frozen dataclass it was."""

from __future__ import annotations

import dataclasses
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from udo_build.errors import Diagnostics, Problem, UserError

REPO = Path(__file__).resolve().parents[2]


def test_the_no_op_path_imports_neither_dataclasses_nor_inspect() -> None:
    code = ("import sys, udo_build.cli, udo_build.cli.build, udo_build.builder.session, "
            "udo_build.builder.uptodate, udo_build.builder.owner, udo_build.store; "
            "print(sorted(m for m in ('dataclasses', 'inspect') if m in sys.modules))")
    got = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO, env={"PYTHONPATH": str(REPO)}, check=True)
    assert got.stdout.strip() == "[]", got.stderr


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
