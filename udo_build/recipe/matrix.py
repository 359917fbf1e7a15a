"""Matrix expansion: the recipe's prepare matrix -> concrete prepare targets, in a stable order.

Like CI matrices: every value of every axis is crossed (soc x optimization_level x
input_dimensions x outputs x precision, in the order the recipe lists them). `exclude` entries
remove the crossed cells they match (an entry matches when every axis it names is equal).
`include` entries add targets: each is crossed with the matrix values of the axes it does not
name. Duplicates keep their first place.

`graphs` (in place of input_dimensions: [{name, input_dimensions}, ...]) are the input
dimensions of one weight-shared record: the input_dimensions axis takes their dimensions, and
each target at a graph's dimensions is that graph (RecordTarget.graph), prepared on its own and
combined with the other graphs of its SoC, level, outputs and precision into one record (the
combine step, builder/plan.py). An include or exclude entry's input_dimensions equal to a
graph's add or remove that graph; other dimensions are a record of their own.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

from ..soc.table import Soc
from ..source import FieldPath
from .model import DEFAULT_LEVEL, Dims, Outputs, RecordTarget

AXES = ("soc", "optimization_level", "input_dimensions", "outputs", "precision")
MATRIX_PATH: FieldPath = ("prepare", "matrix")

SocLookup = Callable[[FieldPath, "str | None"], "Soc | None"]
Cell = dict[str, tuple[FieldPath, Any]]


def expand(
    matrix: dict[str, Any], soc_of: SocLookup, default_precision: str
) -> tuple[list[RecordTarget], list[tuple[FieldPath, str]]]:
    """(targets, warnings). `soc_of` resolves a SoC name, recording its own error on failure."""
    values = _axis_values(matrix, default_precision)
    graphs = {Dims.of(g["input_dimensions"]): g["name"] for g in matrix.get("graphs") or []}
    crossed = _cross(values, {}) if "soc" in matrix else []
    excludes = matrix.get("exclude") or []
    used = [False] * len(excludes)
    kept = []
    for cell in crossed:
        hits = [i for i, entry in enumerate(excludes) if _matches(entry, cell)]
        for i in hits:
            used[i] = True
        if not hits:
            kept.append(cell)
    for j, entry in enumerate(matrix.get("include") or []):
        fixed = {k: ((*MATRIX_PATH, "include", j, k), v) for k, v in entry.items()}
        if "soc" not in fixed and "soc" not in matrix:
            soc_of((*MATRIX_PATH, "include", j), None)  # records: this entry names no SoC
            continue
        kept.extend(_cross(values, fixed))
    warnings = [((*MATRIX_PATH, "exclude", i), "this exclude entry matches no target")
                for i, hit in enumerate(used) if not hit]
    targets: dict[RecordTarget, None] = {}
    for cell in kept:
        target = _target(cell, soc_of, graphs)
        if target is not None:
            targets.setdefault(target, None)
    return list(targets), warnings


def _axis_values(matrix: dict[str, Any], default_precision: str) -> dict[str, list[Any]]:
    defaults = {"optimization_level": DEFAULT_LEVEL, "input_dimensions": {},
                "outputs": "default", "precision": default_precision}
    out: dict[str, list[Any]] = {}
    for axis in AXES:
        if axis == "input_dimensions" and "graphs" in matrix:
            out[axis] = [((*MATRIX_PATH, "graphs", i, axis), g[axis])
                         for i, g in enumerate(matrix["graphs"])]
        elif axis in matrix:
            out[axis] = [((*MATRIX_PATH, axis, i), v) for i, v in enumerate(matrix[axis])]
        elif axis in defaults:
            out[axis] = [((*MATRIX_PATH,), defaults[axis])]
        else:
            out[axis] = []
    return out


def _cross(values: dict[str, list[Any]], fixed: Cell) -> list[Cell]:
    choices = [[fixed[a]] if a in fixed else values[a] for a in AXES]
    return [dict(zip(AXES, combo, strict=True)) for combo in itertools.product(*choices)]


def _norm(axis: str, value: Any) -> Any:
    if axis == "soc":
        return str(value).lower()
    if axis == "input_dimensions":
        return Dims.of(value)
    if axis == "outputs":
        return Outputs.of(value)
    return value


def _matches(entry: dict[str, Any], cell: Cell) -> bool:
    return all(_norm(axis, v) == _norm(axis, cell[axis][1]) for axis, v in entry.items())


def _target(cell: Cell, soc_of: SocLookup, graphs: dict[Dims, str]) -> RecordTarget | None:
    path, name = cell["soc"]
    soc = soc_of(path, name)
    if soc is None:
        return None
    dims = Dims.of(cell["input_dimensions"][1])
    return RecordTarget(
        soc=soc,
        optimization_level=cell["optimization_level"][1],
        input_dimensions=dims,
        outputs=Outputs.of(cell["outputs"][1]),
        precision=cell["precision"][1],
        outputs_at=cell["outputs"][0],
        graph=graphs.get(dims, ""),
    )


def graph_problems(matrix: dict[str, Any]) -> list[tuple[FieldPath, str, str]]:
    """(field, what is wrong, what would be right) of `graphs` beyond the schema: each graph
    has its own name and its own input dimensions (a run tells them apart by those)."""
    problems = []
    names: dict[str, int] = {}
    dims: dict[Dims, int] = {}
    for i, graph in enumerate(matrix.get("graphs") or []):
        path = (*MATRIX_PATH, "graphs", i)
        first = names.setdefault(graph["name"], i)
        if first != i:
            problems.append(((*path, "name"), f"graph name '{graph['name']}' is used twice",
                             f"the first is prepare.matrix.graphs[{first}]: name each graph "
                             "once"))
        same = dims.setdefault(Dims.of(graph["input_dimensions"]), i)
        if same != i:
            problems.append(((*path, "input_dimensions"), "these are the input dimensions of "
                             f"prepare.matrix.graphs[{same}] too: a run could not tell the two "
                             "graphs apart", "give each graph its own input dimensions"))
    return problems
