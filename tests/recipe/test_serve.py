"""The warning for a run entry the prepared matrix can never serve, with the run's file:line,
decided from the recipe alone (outputs or dimensions it cannot compare never warn)."""

from __future__ import annotations

from pathlib import Path

import pytest

from udo_build.errors import Diagnostics
from udo_build.recipe import load_recipe

RECIPE = """\
recipe: 1
name: demo
model: {onnx: net.onnx}
quantize: {input_list: calib.txt}
prepare:
  matrix:
    soc: [sm8550]
    optimization_level: [2]
DIMS    outputs: [{tensors: [logits]}]
run:
  - name: first
    soc: sm8550
    input_list: test.txt
  - name: second
    input_list: test.txt
"""


def warnings(project: Path, run: dict[str, str], dims: str | None = None) -> list[str]:
    """The warnings of the recipe whose second run has the fields `run` (soc sm8550 unless
    given) and whose matrix has input dimensions `dims` (None: the model's own), as
    'file:line: field: message; hint'."""
    for name in ("net.onnx", "calib.txt", "test.txt"):
        (project / name).write_text("x")
    path = project / "recipe.yaml"
    fields = {"soc": "sm8550", **run}
    line = f"    input_dimensions: [{dims}]\n" if dims else ""
    path.write_text(RECIPE.replace("DIMS", line)
                    + "".join(f"    {k}: {v}\n" for k, v in fields.items()))
    diag = Diagnostics()
    load_recipe(path, diag)
    return [f"{Path(w.file or '').name}:{w.line}: {w.field}: {w.message}; {w.hint}"
            for w in diag.warnings]


def unserved(soc: str, level: int, precision: str, reason: str) -> list[str]:
    return [f"recipe.yaml:15: run[1]: run second can never be served by the prepared matrix: "
            f"it will prepare online, at every start-up; every target is rejected ({reason}); "
            f"prepare a target for {soc} at O{level} {precision} with its input dimensions and "
            "outputs"]


@pytest.mark.parametrize("run, soc, level, precision, reason", [
    ({"mode": "strict", "optimization_level": "3"}, "sm8550", 3, "int8",
     "prepared at O2, the run asks O3 (strict mode takes only the run's level)"),
    ({"precision": "fp16"}, "sm8550", 2, "fp16", "prepared for int8, the run is fp16"),
    ({"soc": "sm8350"}, "sm8350", 2, "int8", "prepared for v73, newer than the device's v68"),
    ({"soc": "sm8650", "mode": "strict"}, "sm8650", 2, "int8",
     "strict mode wants a record that uses the device fully (v75, 8 MB), this one is v73, 8 MB"),
    ({"input_dimensions": "{input: [4, 3, 32, 32]}"}, "sm8550", 2, "int8",
     'prepared for input dimensions {"input":[1,3,32,32]}, the run has {"input":[4,3,32,32]}'),
])
def test_a_run_no_target_serves_warns_at_its_line(
        project: Path, run: dict[str, str], soc: str, level: int, precision: str,
        reason: str) -> None:
    assert warnings(project, run, "{input: [1, 3, 32, 32]}") == unserved(soc, level, precision,
                                                                         reason)


@pytest.mark.parametrize("run, dims", [
    ({"optimization_level": "3"}, None),  # permissive: another level serves, with a note
    ({"outputs": "default"}, None),  # may be the same tensors as {tensors: [logits]}
    ({"outputs": "{layers: [head]}"}, None),
    ({"input_dimensions": "{input: [4, 3, 32, 32]}"}, None),  # may be the model's own
    ({}, "{input: [4, 3, 32, 32]}"),  # the run's own dims may be those
    ({"soc": "sm8650"}, None),  # a v73 record runs on v75 (permissive)
    ({"mode": "always_generate_new", "optimization_level": "3"}, None),  # asks for no record
])
def test_a_run_that_may_be_served_does_not_warn(project: Path, run: dict[str, str],
                                                dims: str | None) -> None:
    assert warnings(project, run, dims) == []


def test_a_recipe_that_prepares_nothing_does_not_warn(project: Path) -> None:
    (project / "test.txt").write_text("x")
    (project / "net.onnx").write_text("x")
    path = project / "recipe.yaml"
    path.write_text("recipe: 1\nname: demo\nmodel: {onnx: net.onnx}\nrun:\n"
                    "  - {name: a, soc: sm8550, input_list: test.txt, optimization_level: 3, "
                    "mode: strict}\n")
    diag = Diagnostics()
    load_recipe(path, diag)
    assert diag.warnings == []
