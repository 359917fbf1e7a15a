"""The edit suite: for each edit a user makes to the softplus example project, the exact set of
actions that run again. The cascade stops where nothing changed: a comment, a description or a
threshold re-runs only what reads it.

The project (the recipe and examples/softplus) is copied into a temp folder and built once; each
edit then starts from a copy of that built project and its store (so every scenario is also a
moved project) and builds with `--json`; the actions it executed are compared with a set named
by kinds and parameters of the plan (not by spelled-out ids, which other changes may extend).
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from udo_build.builder.plan import Plan, plan_recipe
from udo_build.cli import main
from udo_build.recipe import load_recipe

from ..conftest import EXAMPLES, RECIPES

RECIPE = Path("recipes/softplus.yaml")
KERNELS = Path("examples/softplus/ops/kernels.py")
SOFTPLUS = Path("examples/softplus/ops/softplus.xml")
MODEL = Path("examples/softplus/model/net.onnx")


@dataclass(frozen=True)
class Built:
    """A built copy of the project: its root (holding the recipe, the examples, the store and
    the output folder)."""

    root: Path

    @property
    def recipe(self) -> Path:
        return self.root / RECIPE

    def build(self, recipe: Path | None = None, store: str = "store") -> dict[str, Any]:
        return json.loads(self.udo("build", "--out", str(self.root / "out"), "-j", "1",
                                   "--json", recipe=recipe, store=store))

    def udo(self, command: str, *args: str, recipe: Path | None = None,
            store: str = "store") -> str:
        out, err = io.StringIO(), io.StringIO()
        code = main([command, str(recipe or self.recipe), "--store", str(self.root / store),
                     *args], stdout=out, stderr=err, env={})
        assert code == 0, err.getvalue()
        return out.getvalue()

    def edit(self, path: Path, old: str, new: str, count: int = 1) -> None:
        text = (self.root / path).read_text()
        assert text.count(old) == count, f"{old!r} is not in {path} {count} time(s)"
        (self.root / path).write_text(text.replace(old, new))


def executed(report: dict[str, Any]) -> set[str]:
    """The actions whose work was done in this build: those built, and those whose key is a
    twin's built in this build (a prepare whose outputs resolve to the same tensors as another
    target's: it is that target's record)."""
    return {a["id"] for a in report["actions"] if a["status"] == "built"
            or "which ran in this build" in (a.get("reason") or "")}


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Built:
    root = tmp_path_factory.mktemp("edit-suite") / "project"
    (root / "recipes").mkdir(parents=True)
    shutil.copy(RECIPES / "softplus.yaml", root / RECIPE)
    shutil.copytree(EXAMPLES / "softplus", root / "examples" / "softplus",
                    ignore=shutil.ignore_patterns("make_example.py", "__pycache__"))
    (root / ".udo-build-root").write_text("")
    built = Built(root)
    first = built.build()
    assert first["failed"] == 0 and first["executed"] + first["cached"] == len(first["actions"])
    assert all("which ran in this build" in a["reason"] for a in first["actions"]
               if a["status"] == "cached")  # prepares whose outputs resolve to a twin's
    assert executed(built.build()) == set()  # a no-op
    return built


def fresh(base: Built, tmp_path: Path, where: str = "project") -> Built:
    """A copy of the built project (its store and output folder too), in a new place."""
    root = tmp_path / where
    shutil.copytree(base.root, root, symlinks=True)
    return Built(root)


# -- naming the expected actions by kind and parameters ----------------------------------------


def plan_of(project: Built, recipe: Path | None = None) -> Plan:
    return plan_recipe(load_recipe(recipe or project.recipe))


def ids(plan: Plan, kind: str, **params: Any) -> set[str]:
    """The actions of a kind whose parameters have the given values."""
    return {a.id for a in plan.actions.values()
            if a.kind == kind and all(a.params.get(k) == v for k, v in params.items())}


def downstream(plan: Plan, roots: Iterable[str]) -> set[str]:
    """The roots and every action that (transitively) reads one of their outputs."""
    found = set(roots)
    for action in plan.actions.values():  # in dependency order
        if found.intersection(action.deps):
            found.add(action.id)
    return found


def int8_work(plan: Plan) -> set[str]:
    """Everything from quantize on: the int8 records, the deployable bundle, runs and checks."""
    return downstream(plan, {"quantize"})


# -- the edits ---------------------------------------------------------------------------------

Expect = Callable[[Plan], set[str]]


@dataclass(frozen=True)
class Edit:
    name: str
    apply: Callable[[Built], Path | None]  # returns the recipe to build, when it moved
    expect: Expect
    why: str = ""


def recipe_comment(p: Built) -> None:
    p.edit(RECIPE, "recipe: 1\n", "recipe: 1\n# a comment of no consequence\n")


def key_order(p: Built) -> None:
    p.edit(RECIPE, "  act_bitwidth: 8\n  weights_bitwidth: 8\n",
           "  weights_bitwidth: 8\n  act_bitwidth: 8\n")
    p.edit(RECIPE, "name: softplus-demo\ndescription: Softplus and Swish custom ops in a small "
           "CNN\n", "description: Softplus and Swish custom ops in a small CNN\n"
           "name: softplus-demo\n")


def same_arch_soc(p: Built) -> None:
    p.edit(RECIPE, "sm8450, sm8550", "sm8450, sm8475, sm8550")
    p.edit(RECIPE, "      - {soc: sm8450, input_dimensions: {input: [4, 3, 32, 32]}}\n",
           "      - {soc: sm8450, input_dimensions: {input: [4, 3, 32, 32]}}\n"
           "      - {soc: sm8475, input_dimensions: {input: [4, 3, 32, 32]}}\n")


def new_arch(p: Built) -> None:
    p.edit(RECIPE, "sm8750]", "sm8750, sm8850]")


def removed_soc(p: Built) -> None:
    p.edit(RECIPE, "[sm8350, sm8450", "[sm8450")
    p.edit(RECIPE, "      - {soc: sm8350, input_dimensions: {input: [4, 3, 32, 32]}}\n", "")


def level_list(p: Built) -> None:
    p.edit(RECIPE, "optimization_level: [2, 3]", "optimization_level: [2]")


def threshold(p: Built) -> None:
    p.edit(RECIPE, "min_sqnr_db: 25", "min_sqnr_db: 20")


def quantizer(p: Built) -> None:
    p.edit(RECIPE, "quantizer: enhanced", "quantizer: tf")


def kernel_comment(p: Built) -> None:
    p.edit(KERNELS, '    """x * sigmoid(beta * x)."""\n',
           '    """x * sigmoid(beta * x): the SiLU when beta is 1."""\n    # a comment\n')
    p.edit(KERNELS, "import numpy as np\n", "import numpy as np  # arrays\n\n\n# more\n")


def kernel_math(p: Built) -> None:
    p.edit(KERNELS, "np.exp(-beta * x)", "np.exp(-2.0 * beta * x)")


def op_description(p: Built) -> None:
    p.edit(SOFTPLUS, "sharpness; larger values approach ReLU", "sharpness of the curve")


def parameter_default(p: Built) -> None:
    p.edit(SOFTPLUS, "<Default>1.0</Default>", "<Default>2.0</Default>")


def touched_model(p: Built) -> None:
    model = p.root / MODEL
    st = model.stat()
    os.utime(model, ns=(st.st_atime_ns, st.st_mtime_ns + 10**9 * 3600))


def renamed_model(p: Built) -> None:
    (p.root / MODEL).rename(p.root / MODEL.with_name("renamed.onnx"))
    p.edit(RECIPE, "model/net.onnx", "model/renamed.onnx")


def calibration_file(p: Built) -> None:
    """One input of sixteen, four times as large: the activation ranges widen."""
    import numpy as np

    raw = p.root / "examples/softplus/data/calib/input_03.raw"
    (np.fromfile(raw, dtype=np.float32) * 4).tofile(raw)


def gpu_backend(p: Built) -> None:
    p.edit(RECIPE, "backends: [CPU, HTP]", "backends: [CPU, GPU, HTP]")


def renamed_recipe(p: Built) -> Path:
    moved = p.recipe.with_name("renamed.yaml")
    p.recipe.rename(moved)
    return moved


def moved_project(p: Built) -> Path:
    """The copy is moved once more, deeper, with its store and output folder."""
    elsewhere = p.root.parent / "somewhere" / "else"
    elsewhere.parent.mkdir()
    p.root.rename(elsewhere)
    return elsewhere / RECIPE


def nothing(plan: Plan) -> set[str]:
    return set()


def _htp_package(plan: Plan) -> set[str]:
    """The HTP package: it is generated for the archs of the prepare matrix."""
    return {"package:HTP"}


EDITS = [
    Edit("recipe comment", recipe_comment, nothing),
    Edit("key order", key_order, nothing),
    Edit("SoC with the same arch and VTCM", same_arch_soc, nothing,
         "its prepares have the keys of sm8450's; the deployable bundle keys its record set"),
    Edit("new arch", new_arch, lambda plan: (
        ids(plan, "prepare", soc="sm8850") | {"assemble", "run:smoke"} | _htp_package(plan)),
         "the HTP package is generated for the matrix's archs, so it honestly changes; the run "
         "reads the new deployable bundle and gives the same results: its check is cut off"),
    Edit("removed SoC", removed_soc,
         lambda plan: {"assemble", "run:smoke"} | _htp_package(plan),
         "sm8350 was the only v68 SoC: the HTP package drops that arch"),
    Edit("level list", level_list, lambda plan: {"assemble", "run:smoke"}),
    Edit("check threshold", threshold, lambda plan: {"check:smoke"}),
    Edit("quantizer", quantizer, int8_work),
    Edit("kernel comment", kernel_comment, nothing),
    Edit("kernel math", kernel_math, lambda plan: downstream(
        plan, {"quantize", "run:smoke", *ids(plan, "prepare")})),
    Edit("op description", op_description,
         lambda plan: {"opdef", *ids(plan, "package")}),
    Edit("parameter default", parameter_default,
         lambda plan: downstream(plan, {"opdef"}) - ids(plan, "check"),
         "the model gives beta explicitly: every bundle embeds the new default, but the run's "
         "numbers are the same, so its check is cut off"),
    Edit("touched model", touched_model, nothing),
    Edit("renamed identical model", renamed_model, nothing),
    Edit("one calibration file", calibration_file, int8_work),
    Edit("one more backend", gpu_backend, lambda plan: {"opdef", "package:GPU"}),
    Edit("renamed recipe", renamed_recipe, nothing),
    Edit("moved project", moved_project, nothing),
]


@pytest.mark.parametrize("edit", EDITS, ids=[re.sub(r"\W+", "-", e.name) for e in EDITS])
def test_an_edit_runs_exactly_what_it_changes(edit: Edit, base: Built, tmp_path: Path) -> None:
    project = fresh(base, tmp_path)
    recipe = edit.apply(project)
    if recipe is not None and not recipe.is_relative_to(project.root):
        project = Built(recipe.parent.parent)
    report = project.build(recipe)
    expected = edit.expect(plan_of(project, recipe))
    assert report["failed"] == 0
    assert executed(report) == expected, edit.why


# -- what the suite's expectations rest on -----------------------------------------------------

DESCRIPTION = "sharpness; larger values approach ReLU"


def test_no_bundle_holds_description_text(base: Built) -> None:
    """The bundles' keys do not cover descriptions (convert reads opdef's semantics)."""
    from udo_build.ir.bundle import read_bundle

    assert DESCRIPTION in (base.root / "out/opdef/SoftplusPackage.json").read_text()
    bundles = sorted((base.root / "out/model").glob("*.udb"))
    assert len(bundles) == 3
    for path in bundles:
        opdefs = read_bundle(path.read_bytes(), path.name).opdefs
        assert opdefs is not None and [op["name"] for op in opdefs["ops"]] == ["Softplus", "Swish"]
        texts = [op["description"] for op in opdefs["ops"]] + [
            item[field] for op in opdefs["ops"] for group in ("inputs", "outputs", "parameters")
            for item in op[group] for field in ("description", "shape_text")]
        assert not any(texts) and DESCRIPTION not in json.dumps(opdefs), path.name


def test_comments_and_descriptions_reach_no_artifact_of_the_model(
        base: Built, tmp_path: Path) -> None:
    """Built from scratch after a kernel comment and a description edit, every model artifact,
    record and run result is the same bytes: nothing their keys ignore is in them."""
    project = fresh(base, tmp_path)
    kernel_comment(project)
    op_description(project)
    report = project.build(store="another store")
    assert executed(report) == {a["id"] for a in report["actions"]}
    for path in sorted(base.root.joinpath("out").rglob("*")):
        rel = path.relative_to(base.root / "out")
        if path.is_file() and rel.parts[0] in ("model", "runs"):
            assert (project.root / "out" / rel).read_bytes() == path.read_bytes(), rel


def test_a_threshold_edit_prints_the_run_s_numbers_and_verdict(base: Built,
                                                               tmp_path: Path) -> None:
    project = fresh(base, tmp_path)
    threshold(project)
    out = project.udo("build", "--out", str(project.root / "out"), "-j", "1")
    (line,) = [line for line in out.splitlines() if line.startswith("run smoke")]
    assert re.fullmatch(r"run smoke on sm8550: record softplus_net/v73/8MB/O2/input=1x3x32x32/"
                        r"logits/int8; 4 inference\(s\), SQNR \d+\.\d dB vs float; checks passed "
                        r"\(min_sqnr_db 20\)", line), line


def test_explain_names_the_kernels_file_after_a_code_edit(base: Built, tmp_path: Path) -> None:
    project = fresh(base, tmp_path)
    assert executed(project.build()) == set()  # the history is kept by the recipe's path
    kernel_comment(project)
    assert "would run" not in project.udo("explain").replace("0 would run", "")
    kernel_math(project)
    text = project.udo("explain")
    assert "quantize: would run" in text
    assert re.search(r"\n  - input kernels\[0\] \(\S*examples/softplus/ops/kernels\.py\) "
                     r"changed: [0-9a-f]{12} -> [0-9a-f]{12}\n", text), text
