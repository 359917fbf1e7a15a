"""Workspaces: several recipes planned and built as ONE action graph (`udo-build build A B`, or a
workspace file). An action key runs once for them all (counted where the kinds run, worker
processes included), each recipe publishes to its own output folder, one summary and one report
page; `--json` gives a report per recipe plus the totals; explain and graph see the same graph."""

from __future__ import annotations

import io
import json
import re
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from udo_build.builder import actions
from udo_build.builder.actions import ActionContext, Produced, action_kind
from udo_build.cli import main

from .fakes import FAIL, fake_kinds
from .test_engine import Project

COUNTED = ("opdef", "package", "convert", "quantize", "outputs", "prepare", "assemble", "run")


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err, env={})
    return code, out.getvalue(), err.getvalue()


@contextmanager
def counted(log: Path) -> Iterator[Callable[[], Counter[str]]]:
    """Every execution of the COUNTED kinds appends its kind to `log` (the pool's workers are
    forked: a file sees them all); yields a function reading the counts."""
    saved = {name: actions.get_kind(name) for name in COUNTED}
    for name, kind in saved.items():
        assert kind is not None
        actions.unregister(name)
        action_kind(name, version=kind.version, params=kind.params, set_inputs=kind.set_inputs,
                    resources=dict(kind.resources))(_counting(name, kind.run, log))
    try:
        yield lambda: Counter(log.read_text().split()) if log.exists() else Counter()
    finally:
        for name, kind in saved.items():
            assert kind is not None
            actions.unregister(name)
            action_kind(name, version=kind.version, params=kind.params,
                        set_inputs=kind.set_inputs, resources=dict(kind.resources))(kind.run)


def _counting(name: str, run: Callable[[ActionContext], Produced],
              log: Path) -> Callable[[ActionContext], Produced]:
    def counting(ctx: ActionContext) -> Produced:
        with log.open("a") as fh:
            fh.write(name + "\n")
        return run(ctx)
    return counting


class Workspace:
    """The engine tests' project with two recipes over one model and ops: `a` prepares for
    sm8550, `b` for sm8650 (and `c`, when written, is `a` under another name)."""

    def __init__(self, project: Project) -> None:
        self.project = project
        self.root = project.root
        text = project.recipe.read_text()
        self.a = self.root / "a.yaml"
        self.b = self.root / "b.yaml"
        self.a.write_text(text.replace("name: demo", "name: a"))
        self.b.write_text(text.replace("name: demo", "name: b").replace("sm8550]", "sm8650]"))
        self.file = self.root / "ws.yaml"
        self.file.write_text("workspace: 1\nname: ci\nrecipes: [a.yaml, b.yaml]\n")

    def build(self, *argv: str, code: int = 0, jobs: str = "1") -> dict[str, Any]:
        got, out, err = cli("build", *argv, "--store", str(self.project.store), "--out",
                            str(self.project.out), "-j", jobs, "--json")
        assert got == code, err
        return json.loads(out)


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    with fake_kinds():
        yield Workspace(Project(tmp_path))


def built(report: dict[str, Any]) -> list[str]:
    return [a["id"] for a in report["actions"] if a["status"] == "built"]


def test_two_recipes_over_one_model_convert_and_quantize_once(ws: Workspace) -> None:
    with counted(ws.root / "calls.log") as calls:
        first = ws.build(str(ws.file), jobs="2")  # a pool: actions with equal keys at once
    # one execution per key across both recipes: the model's steps once, each record once (and
    # the HTP package per recipe: it is built for the architectures of the recipe's SoCs)
    assert calls() == Counter({"opdef": 1, "package": 3, "convert": 1, "quantize": 1,
                               "outputs": 1, "prepare": 2, "assemble": 2, "run": 2})
    a, b = first["recipes"]
    assert (a["recipe"], b["recipe"]) == ("a", "b")
    assert "convert" in built(a) and "quantize" in built(a)
    shared = {x["id"]: x for x in b["actions"] if x["status"] == "cached"}
    assert {"opdef", "convert", "quantize", "package:CPU", "outputs:int8"} <= set(shared)
    assert shared["convert"]["reason"] == "the same key as a/convert, which ran in this build"
    assert shared["convert"]["key"] == next(x["key"] for x in a["actions"]
                                            if x["id"] == "convert")
    totals = first["totals"]
    assert totals["executed"] == len(built(a)) + len(built(b)) == sum(calls().values())
    assert totals["shared"] == b["shared"] == len(shared) and totals["actions"] == 18
    assert (first["workspace"], first["file"], first["ok"]) == ("ci", str(ws.file), True)
    for name in ("a", "b"):  # each its own output folder, as alone
        assert (ws.project.out / name / "model" / "net_quantized.udb").is_file()
    assert sorted(p.name for p in ws.project.out.iterdir()) == ["a", "b", "ci.report.html"]
    with counted(ws.root / "again.log") as calls:
        again = ws.build(str(ws.a), str(ws.b))  # the same two, named on the command line
    assert calls() == Counter() and again["totals"]["executed"] == 0
    assert again["totals"]["hit_rate"] == 1.0 and again["workspace"] == "workspace"
    _one_page_a_section_per_recipe(first)
    alone = ws.build(str(ws.a))  # a recipe alone: the single-recipe JSON, all cached
    assert "recipes" not in alone and alone["recipe"] == "a" and alone["executed"] == 0
    code, out, err = cli("explain", str(ws.b), "--store", str(ws.project.store), "--json")
    assert code == 0, err  # the workspace build recorded b's history under b's own ids
    assert {e["status"] for e in json.loads(out)["actions"]} == {"cached"}


def _one_page_a_section_per_recipe(report: dict[str, Any]) -> None:
    page = Path(report["page"]).read_text()
    assert report["page"] == report["recipes"][1]["page"]
    assert "<h2>Recipe a</h2>" in page and "<h2>Recipe b</h2>" in page
    assert page.count("<h3>Actions</h3>") == 2 and "<h2>Actions</h2>" not in page
    ids = re.findall(r' id="([^"]+)"', page)
    assert len(ids) == len(set(ids)) and "r1-actions" in ids  # each recipe's tables its own


def test_two_recipes_with_one_name_are_an_error_naming_both(ws: Workspace) -> None:
    ws.b.write_text(ws.b.read_text().replace("name: b", "name: a"))
    code, _, err = cli("build", str(ws.file), "--store", str(ws.project.store))
    assert code == 2
    assert "a.yaml and" in err and "b.yaml are both named 'a'" in err and "b.yaml:2" in err
    assert not ws.project.store.joinpath("history").exists() or not any(
        ws.project.store.joinpath("history").iterdir())


def test_patterns_match_in_every_recipe_or_in_one(ws: Workspace) -> None:
    every = ws.build(str(ws.a), str(ws.b), "convert", "-n")
    assert [[x["id"] for x in r["actions"]] for r in every["recipes"]] == [
        ["opdef", "convert"], ["opdef", "convert"]]
    one = ws.build(str(ws.file), "b/quantize", "-n")
    assert [[x["id"] for x in r["actions"]] for r in one["recipes"]] == [
        [], ["opdef", "convert", "quantize"]]
    code, _, err = cli("build", str(ws.file), "c/convert", "--store", str(ws.project.store))
    assert code == 2 and "no action matches 'c/convert'" in err


def test_check_and_dry_run_count_a_shared_key_once(ws: Workspace) -> None:
    c = ws.root / "c.yaml"
    c.write_text(ws.a.read_text().replace("name: a", "name: c"))
    dry = ws.build(str(ws.a), str(c), "--check", code=1)
    a, other = dry["recipes"]
    assert a["would_run"] == 9 and other["shared"] == 1  # the rest: keys known once a runs
    assert other["actions"][0]["reason"] == "the same key as a/opdef, which would run"
    code, out, err = cli("explain", str(ws.a), str(c), "--store", str(ws.project.store),
                         "--json")
    assert code == 0, err
    found = json.loads(out)
    assert [r["recipe"] for r in found["recipes"]] == ["a", "c"]
    assert found["recipes"][1]["actions"][0]["status"] == "shared"
    assert found["totals"] == {"would run": 17, "cached": 0, "shared": 1, "not available": 0}
    code, out, err = cli("graph", str(ws.a), str(c), "--store", str(ws.project.store))
    assert code == 0, err
    assert '"0/opdef" -> "1/opdef" [label="same key"' in out


def test_a_step_failing_in_one_recipe_exits_1_and_keep_going_builds_the_other(
        ws: Workspace) -> None:
    FAIL.add("prepare:soc=sm8650")  # b's record
    report = ws.build(str(ws.file), "-k", code=1)
    a, b = report["recipes"]
    assert (a["ok"], a["failed"], b["failed"], report["ok"]) == (True, 0, 1, False)
    assert {x["id"]: x["status"] for x in b["actions"]}["assemble"] == "skipped"
    assert (ws.project.out / "a" / "model" / "net_deploy.udb").is_file()
    code, _, err = cli("build", str(ws.file), "--store", str(ws.project.store), "--out",
                       str(ws.project.out), "-j", "1")
    assert code == 1 and "b/prepare:sm8650/O2/native/default/int8 (prepare sm8650" in err
