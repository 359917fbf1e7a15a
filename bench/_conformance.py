"""onnx's per-op conformance cases through the emulator: import, float session, compare.

    cases = load_cases()                       # onnx.backend.test.case.node, data generated
    result = run_case(case)                    # Result(name, ops, outcome, detail)

Each case of `onnx.backend.test.case.node.collect_testcases()` is a small ONNX model with input
and expected output arrays. A case runs through `udo_build.model.onnx_import.import_onnx` and the
float `Session`, and ends in one outcome:

- pass: every output has the expected dtype and shape; integer and bool outputs are equal,
  float outputs within rtol 1e-3 and atol 1e-5 (NaN where NaN is expected). That is onnx's own
  backend tolerance (rtol 1e-3), with the absolute floor raised from 1e-7 to 1e-5 for float32
  values computed in another order; a case stating a looser tolerance keeps its own.
- refused: a `UserError` whose message says "not supported" (the op, or one of its variants).
- known: a listed difference (`KNOWN`, with the reason), whatever the run gave.
- internal: anything else (another exception, a wrong value): a bug to fix.

A case is claimed when the default package has every op its graph uses (`claimed`); the test
requires every claimed case to pass, be refused or be known.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

RTOL = 1e-3
ATOL = 1e-5

PASS, REFUSED, KNOWN_DIFFERENCE, INTERNAL = "pass", "refused", "known", "internal"
OUTCOMES = (PASS, REFUSED, KNOWN_DIFFERENCE, INTERNAL)

# case name -> why the emulator's result differs from onnx's expected one, by design
KNOWN: dict[str, str] = {}


@dataclass(frozen=True)
class Result:
    name: str
    ops: tuple[str, ...]
    outcome: str
    detail: str = ""


def load_cases(names: Iterable[str] | None = None) -> list[Any]:
    """onnx's node conformance cases (their data generated now), sorted by name."""
    from onnx.backend.test.case.node import collect_testcases

    wanted = None if names is None else set(names)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        cases = collect_testcases()
    picked = [c for c in cases if wanted is None or c.name in wanted]
    return sorted(picked, key=lambda c: c.name)


def case_ops(case: Any) -> tuple[str, ...]:
    """The ops a case's graph uses, sorted (subgraphs of If/Loop/Scan included)."""
    found: set[str] = set()
    _graph_ops(case.model.graph, found)
    return tuple(sorted(found))


def _graph_ops(graph: Any, found: set[str]) -> None:
    from onnx import AttributeProto

    for node in graph.node:
        found.add(node.op_type if node.domain in ("", "ai.onnx") else
                  f"{node.domain}.{node.op_type}")
        for attr in node.attribute:
            if attr.type == AttributeProto.GRAPH:
                _graph_ops(attr.g, found)
            for sub in attr.graphs:
                _graph_ops(sub, found)


def claimed_ops() -> frozenset[str]:
    from udo_build.kernels.default import DEFAULT

    return frozenset(DEFAULT.ops()) | IMPORTED


# ops the importer turns into weights (onnx_import._fold), whatever the package has
IMPORTED = frozenset({"Constant"})


def claimed(case: Any, ops: frozenset[str] | None = None) -> bool:
    """True when the default package has every op of the case."""
    have = claimed_ops() if ops is None else ops
    return all(op in have for op in case_ops(case))


def run_case(case: Any) -> Result:
    """The outcome of one case (see the module docstring)."""
    ops = case_ops(case)
    if case.name in KNOWN:
        return Result(case.name, ops, KNOWN_DIFFERENCE, KNOWN[case.name])
    try:
        detail = _run(case)
    except Exception as error:  # the outcome is the point: every error is classified
        return Result(case.name, ops, *_classify(error))
    return Result(case.name, ops, INTERNAL if detail else PASS, detail)


def _classify(error: Exception) -> tuple[str, str]:
    from udo_build.errors import UserError

    text = f"{type(error).__name__}: {error}".splitlines()[0][:400]
    if isinstance(error, UserError) and "not supported" in str(error):
        return REFUSED, text
    return INTERNAL, text


def _run(case: Any) -> str:
    """'' when every data set gives the expected outputs, else what differs."""
    from udo_build.model.onnx_import import import_onnx
    from udo_build.runtime.float_session import Session

    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        model = import_onnx(case.model, file=f"{case.name}.onnx")
        session = Session(model)
        initialized = {i.name for i in case.model.graph.initializer}
        names = [i.name for i in case.model.graph.input if i.name not in initialized]
        outputs = [o.name for o in case.model.graph.output]
        for inputs, expected in case.data_sets:
            feeds = dict(zip(names, map(_array, inputs), strict=False))
            got = session.run(feeds)
            for name, want in zip(outputs, expected, strict=True):
                problem = compare(got[name], _array(want), max(case.rtol, RTOL),
                                  max(case.atol, ATOL))
                if problem:
                    return f"output {name}: {problem}"
    return ""


def _array(value: Any) -> Any:
    """A data set's value as numpy (some cases give TensorProtos)."""
    from onnx import TensorProto, numpy_helper

    return numpy_helper.to_array(value) if isinstance(value, TensorProto) else value


def compare(got: Any, want: Any, rtol: float = RTOL, atol: float = ATOL) -> str:
    """'' when `got` matches `want` (dtype, shape, values), else what differs."""
    want = np.asarray(want)
    got = np.asarray(got)
    if got.dtype != want.dtype:
        return f"dtype {got.dtype}, expected {want.dtype}"
    if got.shape != want.shape:
        return f"shape {list(got.shape)}, expected {list(want.shape)}"
    if want.dtype.kind in "fc":
        wide = np.complex128 if want.dtype.kind == "c" else np.float64
        g, w = got.astype(wide), want.astype(wide)
        close = np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    else:
        close = got == want
    if bool(np.all(close)):
        return ""
    bad = int(np.size(close) - np.count_nonzero(close))
    if want.dtype.kind in "fc":
        err = float(np.nanmax(np.abs(got.astype(np.float64) - want.astype(np.float64))))
        return f"{bad} of {want.size} values differ (max abs error {err:.3g})"
    return f"{bad} of {want.size} values differ"


def run_all(cases: Sequence[Any]) -> list[Result]:
    return [run_case(c) for c in cases]


def counts(results: Iterable[Result]) -> dict[str, int]:
    out = dict.fromkeys(OUTCOMES, 0)
    for r in results:
        out[r.outcome] += 1
    return out
