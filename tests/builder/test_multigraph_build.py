"""Weight-shared graphs through `udo-build build --json` (prepare.matrix.graphs): each graph is
its own prepare, a combine joins them into one record, the runs pick their graph by their input
dimensions (or prepare online with a warning), changing one graph's dimensions re-runs that
graph's prepare, the combine and what follows only, and a second SoC of the same arch and VTCM
builds nothing. The recipe's mistakes about graphs are errors at their field."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from udo_build.cli import main
from udo_build.errors import UserError
from udo_build.ir.bundle import load_bundle
from udo_build.recipe import load_recipe

from ..conftest import EXAMPLES

RECIPE = """\
recipe: 1
name: shared
package:
  name: SoftplusPackage
  ops:
    - {config: ex/ops/softplus.xml, kernels: ex/ops/kernels.py}
    - {config: ex/ops/swish.json, kernels: ex/ops/kernels.py}
  backends: [CPU, HTP]
model: {onnx: ex/model/net.onnx}
quantize: {input_list: ex/data/calib.txt}
prepare:
  matrix:
    soc: [SOCS]
    graphs:
      - {name: one, input_dimensions: {input: [1, 3, 32, 32]}}
      - {name: two, input_dimensions: {input: [TWO, 3, 32, 32]}}
run:
  - {name: native, soc: sm8550, input_list: ex/data/test.txt}
  - {name: pair, soc: sm8550, input_list: pair.txt, input_dimensions: {input: [2, 3, 32, 32]}}
"""
PREPARE = "prepare:sm8550/O2/graph:{}/default/int8"
COMBINE = "combine:sm8550/O2/default/int8"
RUNS = ["run:native", "run:pair"]


class Project:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.recipe = root / "recipe.yaml"
        shutil.copytree(EXAMPLES / "softplus", root / "ex",
                        ignore=shutil.ignore_patterns("make_example.py", "cpu"))
        (root / ".udo-build-root").write_text("")
        rng = np.random.default_rng(0)
        rng.standard_normal((2, 3, 32, 32)).astype("<f4").tofile(root / "pair.raw")
        (root / "pair.txt").write_text("pair.raw\n")
        self.write()

    def write(self, socs: str = "sm8550", two: int = 2, text: str = RECIPE) -> None:
        self.recipe.write_text(text.replace("SOCS", socs).replace("TWO", str(two)))

    def build(self) -> dict[str, Any]:
        out, err = io.StringIO(), io.StringIO()
        code = main(["build", str(self.recipe), "--store", str(self.root / "store"), "--out",
                     str(self.root / "out"), "-j", "1", "--json"], stdout=out, stderr=err,
                    env={})
        assert code == 0, err.getvalue()
        return json.loads(out.getvalue())

    def report(self, run: str) -> dict[str, Any]:
        return json.loads((self.root / "out" / "runs" / run / "report.json").read_text())


def executed(summary: dict[str, Any]) -> list[str]:
    return [a["id"] for a in summary["actions"] if a["status"] == "built"]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Project, dict[str, Any]]:
    project = Project(tmp_path_factory.mktemp("shared"))
    return project, project.build()


def test_the_graphs_are_prepared_apart_and_combined_into_one_record(
        built: tuple[Project, dict[str, Any]]) -> None:
    project, summary = built
    ran = executed(summary)
    assert [a for a in ran if a.startswith(("prepare", "combine", "assemble"))] == [
        PREPARE.format("one"), PREPARE.format("two"), COMBINE, "assemble"]
    deployable = load_bundle(project.root / "out" / "model" / "net_deploy.udb")
    rows = deployable.meta["records"]
    assert [row["graph"] for row in rows] == ["one", "two"]
    assert len({row["part"] for row in rows}) == 1  # one record holds both graphs


def test_each_run_picks_its_graph(built: tuple[Project, dict[str, Any]]) -> None:
    project, _ = built
    native, pair = project.report("native"), project.report("pair")
    assert (native["graph"], native["online_prepare"]) == ("one", False)
    assert (pair["graph"], pair["online_prepare"]) == ("two", False)
    assert pair["metrics"]["sqnr_db"] > 20


def test_changing_one_graph_reruns_its_prepare_the_combine_and_what_follows_only(
        built: tuple[Project, dict[str, Any]], tmp_path: Path) -> None:
    project = Project(tmp_path)
    shutil.copytree(built[0].root / "store", tmp_path / "store")  # built already
    assert executed(project.build()) == []
    project.write(two=4)  # the pair run's dimensions: no graph has them now
    assert executed(project.build()) == [PREPARE.format("two"), COMBINE, "assemble", *RUNS]
    pair = project.report("pair")
    assert pair["online_prepare"] is True and "prepared online" in pair["warning"]
    assert [seen["record"].split("#")[1] for seen in pair["seen"]] == ["one", "two"]
    project.write(socs="sm8550, sm8635", two=4)  # v73 with 8 MB of VTCM, as sm8550
    second = project.build()  # its prepares and combine key as sm8550's: all cached
    assert executed(second) == []
    assert {a["id"] for a in second["actions"]} >= {
        "prepare:sm8635/O2/graph:two/default/int8", "combine:sm8635/O2/default/int8"}


def _problems(project: Project, text: str) -> list[tuple[str | None, str]]:
    project.recipe.write_text(text)
    with pytest.raises(UserError) as info:
        load_recipe(project.recipe)
    return [(p.field, p.message) for p in info.value.problems]


def test_mistakes_about_graphs_are_errors_at_their_field(tmp_path: Path) -> None:
    project = Project(tmp_path)
    both = RECIPE.replace("    graphs:", "    input_dimensions: [{input: [1, 3, 32, 32]}]\n"
                                       "    graphs:")
    assert _problems(project, both.replace("SOCS", "sm8550").replace("TWO", "2")) == [
        ("prepare.matrix.input_dimensions", "a list is not allowed here")]
    twice = RECIPE.replace("name: two", "name: one").replace("SOCS", "sm8550")
    assert _problems(project, twice.replace("TWO", "2")) == [
        ("prepare.matrix.graphs[1].name", "graph name 'one' is used twice")]
    same = RECIPE.replace("SOCS", "sm8550").replace("TWO", "1")
    field, message = _problems(project, same)[0]
    assert field == "prepare.matrix.graphs[1].input_dimensions"
    assert "could not tell the two graphs apart" in message


def test_graphs_of_a_model_split_into_subnets_are_refused_as_not_supported(
        built: tuple[Project, dict[str, Any]], tmp_path: Path) -> None:
    project = Project(tmp_path)
    shutil.copytree(built[0].root / "store", tmp_path / "store")  # converted and quantized
    project.write(text=RECIPE.replace("model: {onnx: ex/model/net.onnx}",
                                      "model: {onnx: ex/model/net.onnx, "
                                      "runtimes: {conv2: [CPU]}}"))
    out, err = io.StringIO(), io.StringIO()
    code = main(["build", str(project.recipe), "--store", str(tmp_path / "store"), "--out",
                 str(tmp_path / "out"), "-j", "1"], stdout=out, stderr=err, env={})
    assert code == 2, err.getvalue()
    assert "weight-shared graphs of a split model are not supported yet" in err.getvalue()


def test_validate_checks_each_graphs_dimensions_against_the_model(tmp_path: Path) -> None:
    project = Project(tmp_path)
    project.write(text=RECIPE.replace("{name: two, input_dimensions: {input:",
                                      "{name: two, input_dimensions: {image:"))
    out, err = io.StringIO(), io.StringIO()
    assert main(["validate", str(project.recipe)], stdout=out, stderr=err, env={}) == 2
    assert "prepare.matrix.graphs[1].input_dimensions.image: 'image' is not an input of the " \
           "model" in err.getvalue()


def test_the_plan_combines_each_socs_graphs_and_an_exclude_drops_one(tmp_path: Path) -> None:
    from udo_build.builder.plan import Dep, plan_recipe

    project = Project(tmp_path)
    exclude = "    exclude: [{soc: sm8650, input_dimensions: {input: [2, 3, 32, 32]}}]\nrun:"
    project.write(socs="sm8550, sm8650", text=RECIPE.replace("run:", exclude, 1))
    plan = plan_recipe(load_recipe(project.recipe))
    combines = {aid: a for aid, a in plan.actions.items() if a.kind == "combine"}
    assert {aid: a.params["graphs"] for aid, a in combines.items()} == {
        COMBINE: ["one", "two"], "combine:sm8650/O2/default/int8": ["one"]}
    assert combines[COMBINE].inputs == {
        "graph[0]": Dep(PREPARE.format("one"), "record"),
        "graph[1]": Dep(PREPARE.format("two"), "record")}
    assert sorted(d.action for d in plan.actions["assemble"].inputs.values()
                  if isinstance(d, Dep) and d.output == "record") == sorted(combines)
    one = "      - {name: one, input_dimensions: {input: [1, 3, 32, 32]}}\n"
    two = "      - {name: two, input_dimensions: {input: [TWO, 3, 32, 32]}}\n"
    assert one + two in RECIPE
    project.write(text=RECIPE.replace(one + two, two + one))  # the graphs in another order
    again = plan_recipe(load_recipe(project.recipe))
    assert (again.actions[COMBINE].params, again.actions[COMBINE].inputs) == (
        combines[COMBINE].params, combines[COMBINE].inputs)
