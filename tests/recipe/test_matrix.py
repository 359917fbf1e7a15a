"""Matrix expansion: crossing order, exclude, include, duplicates."""

from __future__ import annotations

from pathlib import Path

import pytest

from udo_build.errors import Diagnostics, UserError
from udo_build.recipe import load_recipe


def targets(project: Path, matrix: str, diag: Diagnostics | None = None) -> list[str]:
    (project / "net.onnx").write_text("x")
    path = project / "r.yaml"
    path.write_text("recipe: 1\nname: m\nmodel: {onnx: net.onnx}\nprepare:\n  matrix:\n"
                    + "".join(f"    {line}\n" for line in matrix.strip().splitlines()))
    return [t.id for t in load_recipe(path, diag).targets]


def test_axes_cross_in_listed_order_with_defaults(project: Path) -> None:
    assert targets(project, "soc: [sm8650, sm8350]\noptimization_level: [3, 1]") == [
        "sm8650/O3/native/default/fp16", "sm8650/O1/native/default/fp16",
        "sm8350/O3/native/default/fp16", "sm8350/O1/native/default/fp16",
    ]


def test_all_five_axes(project: Path) -> None:
    found = targets(project, """
soc: [sm8550]
optimization_level: [2]
input_dimensions: [{b: [2], a: [1, 3]}, {a: [4, 3]}]
outputs: [default, {tensors: [t1, t2]}, {layers: [l], tensors: [t]}]
precision: [fp16]
""")
    assert found == [
        "sm8550/O2/a=1x3,b=2/default/fp16",
        "sm8550/O2/a=1x3,b=2/tensors=t1,t2/fp16",
        "sm8550/O2/a=1x3,b=2/layers=l;tensors=t/fp16",
        "sm8550/O2/a=4x3/default/fp16",
        "sm8550/O2/a=4x3/tensors=t1,t2/fp16",
        "sm8550/O2/a=4x3/layers=l;tensors=t/fp16",
    ]


def test_exclude_matches_on_named_axes_and_unused_exclude_warns(project: Path) -> None:
    diag = Diagnostics()
    found = targets(project, """
soc: [sm8550, sm8650]
optimization_level: [1, 2, 3]
exclude:
  - {soc: SM8550, optimization_level: 1}
  - {optimization_level: 3}
  - {soc: sm8750}
""", diag)
    assert found == ["sm8550/O2/native/default/fp16", "sm8650/O1/native/default/fp16",
                     "sm8650/O2/native/default/fp16"]
    assert [(w.line, w.field, w.message) for w in diag.warnings] == [
        (11, "prepare.matrix.exclude[2]", "this exclude entry matches no target")]


def test_include_is_crossed_with_the_axes_it_does_not_name(project: Path) -> None:
    found = targets(project, """
soc: [sm8550]
optimization_level: [2, 3]
include:
  - {soc: sm8750}
  - {soc: sm8350, optimization_level: 1}
  - {soc: sm8550, optimization_level: 2}
""")
    assert found == [
        "sm8550/O2/native/default/fp16", "sm8550/O3/native/default/fp16",
        "sm8750/O2/native/default/fp16", "sm8750/O3/native/default/fp16",
        "sm8350/O1/native/default/fp16",
    ]


def test_include_only_matrix_and_include_without_soc(project: Path) -> None:
    assert targets(project, "include: [{soc: sm8650, optimization_level: 1}]") == [
        "sm8650/O1/native/default/fp16"]
    with pytest.raises(UserError) as info:
        targets(project, "include: [{optimization_level: 1}]")
    p = info.value.problem
    assert (p.field, p.message, p.hint) == (
        "prepare.matrix.include[0]",
        "this include entry names no soc, and the matrix has no soc list", "add soc: to the entry")


def test_everything_excluded_is_an_error(project: Path) -> None:
    with pytest.raises(UserError) as info:
        targets(project, "soc: [sm8550]\nexclude: [{soc: sm8550}]")
    assert (info.value.problem.field, info.value.problem.message) == (
        "prepare.matrix", "the matrix yields no target")


def test_an_axis_value_listed_twice_is_an_error(project: Path) -> None:
    with pytest.raises(UserError) as info:
        targets(project, "soc: [sm8550, sm8650, sm8550]")
    assert (info.value.problem.field, info.value.problem.message) == (
        "prepare.matrix.soc", "'sm8550' is listed twice")
