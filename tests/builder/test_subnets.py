"""Subnets and CPU fallback through a whole build: a Softplus whose op config lists the CPU only,
in the middle of the softplus example's CNN, splits the graph into HTP, CPU and HTP subnets."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from udo_build.cli import main
from udo_build.compiler.serve import record_for_run
from udo_build.ir.bundle import load_bundle
from udo_build.kernels.load import packages_for
from udo_build.recipe import load_recipe
from udo_build.runtime.float_session import Session
from udo_build.runtime.records import RunSettings
from udo_build.soc.target import FLOAT_REFERENCE, CompileTarget
from udo_build.store import Store
from udo_build.store.parts import parse_layout

from ..compiler.subnet_project import Project

SUBNETS = [("HTP", ["conv1"]), ("CPU", ["softplus1"]),
           ("HTP", ["conv2", "swish1", "pool", "flatten", "head"])]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Project, dict[str, Any]]:
    project = Project(tmp_path_factory.mktemp("subnets"))
    summary, _ = project.build()
    return project, summary


def _subnets(report: dict[str, Any]) -> list[tuple[str, list[str]]]:
    return [(s["runtime"], s["nodes"]) for s in report["partition"]["subnets"]]


def test_each_target_prepares_one_record_per_htp_subnet(built) -> None:  # type: ignore[no-untyped-def]
    project, summary = built
    deploy = load_bundle(project.root / "out/model/net_deploy.udb")
    rows = deploy.meta["records"]
    assert len(rows) == 8  # 4 targets (2 SoCs x int8, fp16), 2 HTP subnets each
    for arch in ("v73", "v75"):
        for precision in ("int8", "fp16"):
            mine = sorted((r["subnet"], r["identifier"], r["output_tensors"]) for r in rows
                          if r["arch"] == arch and r["precision"] == precision)
            # the first record's outputs hold the tensor the CPU subnet reads
            assert mine == [(0, "softplus_net:subnet0", ["conv1_out"]),
                            (2, "softplus_net:subnet2", ["logits"])]
    store = Store(project.root / "store")
    deploy_parts = set(_parts(store, summary, "assemble", "bundle"))
    prepared = set()
    for action in (a for a in summary["actions"] if a["kind"] == "prepare"):
        prepared |= set(_parts(store, summary, action["id"], "record")[1:])  # its records
    assert prepared and prepared <= deploy_parts  # shared blobs, no second copy


def _parts(store: Store, summary: dict[str, Any], action: str, output: str) -> list[str]:
    key = next(a["key"] for a in summary["actions"] if a["id"] == action)
    result = store.ac.get(key)
    assert result is not None
    layout = parse_layout(store.cas.get(result.outputs[output].digest) or b"")
    assert layout is not None
    return [p.digest for p in layout.parts]


def test_runs_execute_the_subnets_in_order_and_report_the_switches(built) -> None:  # type: ignore[no-untyped-def]
    project, _ = built
    for run in ("int8", "fp16"):
        report = project.report(run)
        assert [(p["runtime"], p["nodes"]) for p in report["partition"]] == [
            ("HTP", 1), ("CPU", 1), ("HTP", 5)]
        assert report["switches"] == 2 and not report["online_prepare"]
        names = [p.get("record") for p in report["partition"]]
        assert names[1] is None and all(n.startswith("softplus_net:subnet") for n in
                                        (names[0], names[2]))
        assert report["record"] == f"{names[0]} + {names[2]}"
    assert project.report("int8")["metrics"]["sqnr_db"] >= 25
    assert (project.root / "out/runs/int8/check.json").exists()
    page = (project.root / "out.report.html").read_text()
    assert page.count("(3 subnets: HTP 1 | CPU 1 | HTP 5 nodes; 2 runtime switches)") == 2


def _settings(precision: str) -> RunSettings:
    return RunSettings("t", "sm8550", CompileTarget("v73", 8, 1, {}, {"tensors": ["logits"]},
                                                    precision))


def _feeds(project: Project) -> list[dict[str, np.ndarray]]:
    data = sorted((project.root / "examples/softplus/data/test").glob("*.raw"))
    return [{"input": np.fromfile(p, np.float32).reshape(1, 3, 32, 32)} for p in data]


def test_a_partitioned_float_run_equals_the_float_model(built) -> None:  # type: ignore[no-untyped-def]
    project, _ = built
    bundle = load_bundle(project.root / "out/model/net.udb")
    kernels = [project.root / "examples/softplus/ops/kernels.py"]
    packages = packages_for(bundle, kernels)
    program, selection, _ = record_for_run(bundle, _settings(FLOAT_REFERENCE), packages,
                                           choose=False)
    assert selection["switches"] == 2 and selection["online_prepare"]
    runner = program.runner(packages)
    session = Session(bundle.model, packages)
    for feed in _feeds(project):
        want = session.run(feed, ["logits"])["logits"]
        np.testing.assert_allclose(runner.run(feed)["logits"], want, rtol=1e-5, atol=1e-6)


def test_a_partitioned_int8_run_agrees_with_the_unpartitioned_one(built) -> None:  # type: ignore[no-untyped-def]
    project, _ = built
    bundle = load_bundle(project.root / "out/model/net_quantized.udb")
    packages = packages_for(bundle, [project.root / "examples/softplus/ops/kernels.py"])
    split, _, _ = record_for_run(bundle, _settings("int8"), packages, choose=False)
    anywhere = {**bundle.opdefs, "ops": [{**op, "backends": ["CPU", "HTP"]}
                                         for op in bundle.opdefs["ops"]]}
    whole, selection, _ = record_for_run(replace(bundle, opdefs=anywhere), _settings("int8"),
                                         packages, choose=False)
    assert "partition" not in selection  # one HTP subnet: served as always
    a, b = split.runner(packages), whole.runner(packages)
    for feed in _feeds(project):
        got, want = a.run(feed)["logits"], b.run(feed)["logits"]
        noise = float(np.sum((got - want) ** 2)) or 1e-30
        assert 10 * np.log10(float(np.sum(want ** 2)) / noise) > 30


def test_info_shows_the_partition(built) -> None:  # type: ignore[no-untyped-def]
    project, _ = built
    deploy = str(project.root / "out/model/net_deploy.udb")
    info, _ = project.cli("info", deploy)
    assert _subnets(info) == SUBNETS and info["partition"]["switches"] == 2
    assert [(s["inputs"], s["outputs"]) for s in info["partition"]["subnets"]] == [
        (["input"], ["conv1_out"]), (["conv1_out"], ["softplus1_out"]),
        (["softplus1_out"], ["logits"])]
    out = io.StringIO()
    assert main(["info", deploy], stdout=out, stderr=io.StringIO(), env={}) == 0
    text = out.getvalue()
    assert "subnets (2 runtime switches)" in text
    assert "CPU      1      softplus1      conv1_out      softplus1_out" in text


@pytest.mark.parametrize(("config", "op_runtimes", "model_runtimes", "subnets"), [
    ("softplus.xml", "\n      runtimes: [CPU]", "", SUBNETS),
    ("softplus.xml", "", "\n  runtimes: {conv2: [CPU]}",
     [("HTP", ["conv1", "softplus1"]), ("CPU", ["conv2"]),
      ("HTP", ["swish1", "pool", "flatten", "head"])]),
])
def test_the_recipe_says_which_runtimes_an_op_may_use(tmp_path: Path, config: str,
                                                      op_runtimes: str, model_runtimes: str,
                                                      subnets: list[Any]) -> None:
    project = Project(tmp_path, config=config, op_runtimes=op_runtimes,
                      model_runtimes=model_runtimes)
    summary, _ = project.build()
    assert any(a["id"] == "runtimes" and a["status"] == "built" for a in summary["actions"])
    info, _ = project.cli("info", str(project.root / "out/model/net_deploy.udb"))
    assert _subnets(info) == subnets
    assert [p["runtime"] for p in project.report("int8")["partition"]] == ["HTP", "CPU", "HTP"]


def test_an_op_with_no_runtime_left_is_a_user_error(tmp_path: Path) -> None:
    project = Project(tmp_path, model_runtimes="\n  runtimes: {softplus1: [HTP]}")
    summary, err = project.build(code=2)
    failed = [a for a in summary["actions"] if a["status"] == "failed"]
    assert failed and "node softplus1 (Softplus) may run on no runtime: its op definition " \
        "allows CPU; model.runtimes.softplus1 allows HTP" in err


def test_runtimes_outside_htp_and_cpu_are_refused_with_their_line(tmp_path: Path) -> None:
    from udo_build.errors import UserError

    project = Project(tmp_path, model_runtimes="\n  runtimes: {conv2: [NPU]}")
    with pytest.raises(UserError) as caught:
        load_recipe(project.recipe)
    problem = caught.value.problems[0]
    line = project.recipe.read_text().splitlines().index("  runtimes: {conv2: [NPU]}") + 1
    assert (problem.line, problem.field) == (line, "model.runtimes.conv2[0]")
    assert "'NPU' is not" in problem.message and "HTP" in str(problem)


def test_a_recipe_without_choices_plans_as_before() -> None:
    from udo_build.builder.plan import plan_recipe

    from ..conftest import RECIPES

    plan = plan_recipe(load_recipe(RECIPES / "softplus.yaml"))
    assert "runtimes" not in plan.actions
    assert all("runtimes" not in a.inputs for a in plan.actions.values())
