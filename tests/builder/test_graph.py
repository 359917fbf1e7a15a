"""`udo-build graph`: the action graph with each action's kind, key and status, as dot and JSON."""

from __future__ import annotations

import io
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from udo_build.cli import main

from .fakes import fake_kinds
from .test_engine import Project


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    with fake_kinds():
        yield Project(tmp_path)


def graph(project: Project, *extra: str, recipes: tuple[Path, ...] = ()) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["graph", *(map(str, recipes or (project.recipe,))), "--store",
                 str(project.store), *extra], stdout=out, stderr=err, env={})
    return code, out.getvalue(), err.getvalue()


def actions(project: Project, *extra: str) -> dict[str, dict[str, Any]]:
    code, out, err = graph(project, "--format", "json", *extra)
    assert code == 0, err
    (recipe,) = json.loads(out)["recipes"]
    return {a["id"]: a for a in recipe["actions"]}


def explained(project: Project) -> dict[str, dict[str, Any]]:
    out, err = io.StringIO(), io.StringIO()
    assert main(["explain", str(project.recipe), "--store", str(project.store), "--json",
                 "--all"], stdout=out, stderr=err, env={}) == 0, err.getvalue()
    return {a["id"]: a for a in json.loads(out.getvalue())["actions"]}


def test_json_is_the_plan_in_dependency_order_with_explain_s_status(project: Project) -> None:
    found = actions(project)
    order = list(found)
    for aid, action in found.items():
        for dep in action["deps"]:
            assert order.index(dep["action"]) < order.index(aid), (dep, aid)
    assert {a["status"] for a in found.values()} == {"would run"}
    assert found["quantize"]["deps"] == [{"action": "convert", "output": "bundle",
                                          "input": "bundle"}]
    assert {"input": "input_list", "path": "ex/data/calib.txt"} in found["quantize"]["sources"]
    same = explained(project)
    assert {aid: (a["status"], a["key"], a["reasons"]) for aid, a in found.items()} == {
        aid: (a["status"], a["key"], a["reasons"]) for aid, a in same.items()}


def test_after_a_build_and_a_change(project: Project) -> None:
    project.build()
    assert {a["status"] for a in actions(project).values()} == {"cached"}
    calib = project.root / "ex/data/calib/input_00.raw"
    calib.write_bytes(calib.read_bytes()[::-1])
    found = actions(project)
    assert found["convert"]["status"] == "cached"
    assert found["quantize"]["status"] == "would run"
    assert any("input_00.raw) changed" in r for r in found["quantize"]["reasons"])
    assert found["quantize"]["key"] != found["convert"]["key"]


def test_action_patterns_keep_what_they_need(project: Project) -> None:
    found = actions(project, "--action", "quantize")
    assert set(found) == {"opdef", "convert", "quantize"}


def test_dot_declares_every_node_its_edges_use(project: Project) -> None:
    code, out, err = graph(project)
    assert code == 0, err
    assert out.startswith("digraph udo_build {") and out.rstrip().endswith("}")
    assert out.count("{") == out.count("}")
    declared = set(re.findall(r'^\s+("[^"]+") \[label=', out, re.M))
    edges = re.findall(r'^\s+("[^"]+") -> ("[^"]+") \[', out, re.M)
    assert edges and all(a in declared and b in declared for a, b in edges)
    assert '"0/quantize" [label="quantize", ' in out
    listed = re.findall(r'"0:listed:ex/data/calib.txt" \[label="(\d+) files named by', out)
    files = [s for s in actions(project)["quantize"]["sources"]
             if s["input"].startswith("input_list.files[")]
    assert len(files) > 1 and listed == [str(len(files))]
    assert 'fillcolor="#ffe0b2"' in out and 'fillcolor="#c8e6c9"' not in out


def test_two_recipes_are_two_clusters_and_out_writes_a_file(project: Project) -> None:
    other = project.recipe.with_name("other.yaml")
    other.write_text(project.recipe.read_text().replace("name: ", "name: other-", 1))
    target = project.root / "graph.dot"
    code, out, err = graph(project, "--out", str(target), recipes=(project.recipe, other))
    assert code == 0, err
    assert "wrote" in out and "actions" in out
    text = target.read_text()
    assert "subgraph cluster_0 {" in text and "subgraph cluster_1 {" in text
    assert text.count("label=\"other-") == 1


def test_a_missing_recipe_is_a_user_error(project: Project) -> None:
    code, _, err = graph(project, recipes=(project.root / "nope.yaml",))
    assert code == 2
    assert "nope.yaml" in err
