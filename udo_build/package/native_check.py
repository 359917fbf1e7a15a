"""C++ against numpy: each custom op's compiled CPU body and its numpy kernel, run on the inputs
the op sees over an input list (the calibration list), compared element by element.

    found = compare(model, numpy_packages, library, feeds_of_each_inference, tolerance)
    found.failure()          # None, or the message naming the op, node, input and worst element

The inputs are captured by running the float session with the numpy kernels over the list and
requesting every input tensor of the custom nodes the library implements: each op is checked on
the same inputs whatever the C++ of the ops before it computes, so a difference is that op's.
An element fails when |C++ - numpy| > atol + rtol * |numpy| (numpy.isclose's rule; NaN only
matches NaN, an infinity only itself). The worst element is the one furthest past its bound.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import numpy as np

DEFAULT_ATOL = 1e-5
DEFAULT_RTOL = 1e-4


@dataclass(frozen=True)
class Tolerance:
    """How far a C++ output may be from the numpy kernel's, per element."""

    atol: float = DEFAULT_ATOL
    rtol: float = DEFAULT_RTOL

    KEY_PARAMS: ClassVar[tuple[str, ...]] = ("atol", "rtol")

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> Tolerance:
        return cls(float(params.get("atol", DEFAULT_ATOL)), float(params.get("rtol",
                                                                           DEFAULT_RTOL)))

    def to_params(self) -> dict[str, float]:
        return {"atol": self.atol, "rtol": self.rtol}

    def __str__(self) -> str:
        return f"atol {self.atol:g} + rtol {self.rtol:g} x |numpy|"


@dataclass
class Worst:
    """The element furthest past its bound (or nearest to it, when all pass)."""

    excess: float  # |difference| / bound (above 1: fails); inf for a NaN mismatch
    node: str
    inference: int  # from 0, in the input list's order
    where: str  # the input list line and files of that inference
    output: str
    index: tuple[int, ...]
    cpp: float
    numpy: float

    def to_json(self) -> dict[str, Any]:
        return {"node": self.node, "input": self.inference, "input_at": self.where,
                "output": self.output, "index": list(self.index), "cpp": _num(self.cpp),
                "numpy": _num(self.numpy), "difference": _num(abs(self.cpp - self.numpy))}


@dataclass
class OpFigures:
    """What the comparison found for one op over every node and inference."""

    op: str
    nodes: set[str] = field(default_factory=set)
    calls: int = 0
    elements: int = 0
    failing: int = 0
    max_abs_error: float = 0.0
    worst: Worst | None = None

    def to_json(self) -> dict[str, Any]:
        return {"op": self.op, "nodes": sorted(self.nodes), "calls": self.calls,
                "elements": self.elements, "failing_elements": self.failing,
                "max_abs_error": _num(self.max_abs_error), "passed": self.failing == 0,
                "worst": self.worst.to_json() if self.worst else None}


@dataclass
class Comparison:
    tolerance: Tolerance
    inferences: int
    ops: dict[str, OpFigures]
    unchecked: dict[str, str]  # op -> why it was not compared

    @property
    def passed(self) -> bool:
        return all(f.failing == 0 for f in self.ops.values())

    def to_json(self) -> dict[str, Any]:
        return {"tolerance": self.tolerance.to_params(), "inputs": self.inferences,
                "ops": [self.ops[op].to_json() for op in sorted(self.ops)],
                "unchecked": [{"op": op, "why": why} for op, why in sorted(self.unchecked.items())],
                "passed": self.passed}

    def failure(self) -> str | None:
        """The message of the first failing op (by name), None when every op agrees."""
        for op in sorted(self.ops):
            f = self.ops[op]
            if f.failing and f.worst is not None:
                w = f.worst
                index = ", ".join(map(str, w.index))
                return (f"{op}: the C++ differs from the numpy kernel beyond {self.tolerance} "
                        f"in {f.failing} of {f.elements} elements; worst: node {w.node}, input "
                        f"{w.inference} ({w.where}), output {w.output}[{index}]: C++ "
                        f"{_num(w.cpp)}, numpy {_num(w.numpy)} (difference "
                        f"{_num(abs(w.cpp - w.numpy))})")
        return None

    def summary(self) -> str:
        parts = [f"{op} max abs error {_num(self.ops[op].max_abs_error)}" for op in
                 sorted(self.ops)]
        parts += [f"{op} not checked ({why})" for op, why in sorted(self.unchecked.items())]
        return "; ".join(parts)


Kernel = Callable[..., Any]


def compare(model: Any, numpy_packages: Mapping[str, Any], native_packages: Mapping[str, Any],
            inferences: Iterable[tuple[str, Mapping[str, np.ndarray]]],
            tolerance: Tolerance, unwritten: Sequence[str] = ()) -> Comparison:
    """Run each native op and its numpy kernel on the inputs every custom node of `model` sees
    (`inferences`: (where, feeds) per input of the list); `native_packages` are the numpy ones
    with the library's implementations in (kernels.native.with_native)."""
    from ..runtime.float_session import Session

    nodes, unchecked = _checked_nodes(model, numpy_packages, native_packages)
    unchecked.update({op: "no C++ body written" for op in unwritten})
    found = Comparison(tolerance, 0, {op: OpFigures(op) for op in {n.op for n, _, _ in nodes}},
                       unchecked)
    if not nodes:
        return found
    wanted = sorted({name for node, _, _ in nodes for name in node.inputs if name})
    session = Session(model, numpy_packages)
    for count, (where, feeds) in enumerate(inferences):
        tensors = session.run(feeds, wanted)
        for node, reference, native in nodes:
            args = [tensors[name] if name else None for name in node.inputs]
            _compare_node(found, node, reference(*args, **node.kwargs),
                          native(*args, **node.kwargs), count, where)
        found.inferences = count + 1
    return found


def _checked_nodes(model: Any, numpy_packages: Mapping[str, Any],
                   native_packages: Mapping[str, Any]
                   ) -> tuple[list[tuple[Any, Kernel, Kernel]], dict[str, str]]:
    """(node, numpy kernel, C++ kernel) of each custom node whose op the library implements,
    and the custom ops that are not compared, with why."""
    infos = model.graph.infos()
    weights = dict(model.weights)
    nodes, unchecked = [], {}
    for node in model.graph.nodes:
        if node.package not in native_packages:
            continue
        types = [str(weights[i].dtype) if i in weights else
                 (infos[i].dtype if i in infos else "") for i in node.inputs if i]
        native = native_packages[node.package].select(node.op, types).fn
        if not native.__module__.startswith("udo_build_native_"):
            unchecked.setdefault(node.op, "its numpy kernel for these input types runs "
                                 "instead of the C++" if _has_native(native_packages, node)
                                 else "not in the compiled library")
            continue
        nodes.append((node, numpy_packages[node.package].select(node.op, types).fn, native))
    return nodes, unchecked


def _has_native(packages: Mapping[str, Any], node: Any) -> bool:
    return any(i.fn.__module__.startswith("udo_build_native_")
               for i in packages[node.package].impls(node.op))


def _compare_node(found: Comparison, node: Any, want: Any, got: Any, inference: int,
                  where: str) -> None:
    wants = want if isinstance(want, tuple) else (want,)
    gots = got if isinstance(got, tuple) else (got,)
    figures = found.ops[node.op]
    figures.nodes.add(node.name)
    figures.calls += 1
    for position, (w, g) in enumerate(zip(wants, gots, strict=True)):
        name = node.outputs[position] if position < len(node.outputs) else str(position)
        w, g = np.asarray(w, np.float64), np.asarray(g, np.float64)
        excess, diff = _excess(w, g, found.tolerance)
        figures.elements += excess.size
        if not excess.size:
            continue
        figures.failing += int(np.count_nonzero(excess > 1.0))
        finite = diff[np.isfinite(diff)]
        if finite.size:
            figures.max_abs_error = max(figures.max_abs_error, float(finite.max()))
        at = int(np.argmax(excess))
        if figures.worst is None or excess.flat[at] > figures.worst.excess:
            index = tuple(int(i) for i in np.unravel_index(at, excess.shape))
            figures.worst = Worst(float(excess.flat[at]), node.name, inference, where, name,
                                  index, float(g.flat[at]), float(w.flat[at]))


def _excess(want: np.ndarray, got: np.ndarray, tolerance: Tolerance
            ) -> tuple[np.ndarray, np.ndarray]:
    """(|difference| / bound per element: above 1 fails, inf where a NaN or an infinity meets
    anything else; |difference|)."""
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        diff = np.where(got == want, 0.0, np.abs(got - want))  # equal infinities: 0
        bound = tolerance.atol + tolerance.rtol * np.abs(want)
        same = (got == want) | (np.isnan(got) & np.isnan(want))
        finite = np.isfinite(got) & np.isfinite(want)
        excess = np.where(same, 0.0, np.where(finite, diff / bound, np.inf))
    return excess, diff


def _num(value: float) -> float | str:
    """A figure for JSON and messages: 6 significant digits; NaN and infinities as text."""
    if not np.isfinite(value):
        return str(value)
    return float(f"{value:.6g}")


def inference_places(listing: Any) -> list[str]:
    """How each inference of an input list is named in messages: its line and file names."""
    return [f"{listing.file.name} line {inference[0].line}: " + " ".join(
        (f"{e.name}:=" if e.name else "") + e.path.name for e in inference) if inference
        else "an empty line" for inference in listing.inferences]
