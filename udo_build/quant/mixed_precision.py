"""Mixed precision: which tensors may take another width, a model with chosen widths, and the
SQNR of its outputs over held-out inputs (the measure of every step of `quantize.target`).

Two quantized models of the same float model and calibration inputs are the candidates: the
reference (the quantize settings' widths everywhere) and the alternate (every activation at
the other of 8 and 16 bits, every Conv/Gemm/MatMul weight at the other of 8 and 4). A unit is
what takes one width:

- an activation: a tensor with an encoding of its own (graph input or node output); the tensors
  that share its encoding (a Reshape's, a MaxPool's output: udo_build.quant.pipeline
  SHARES_ENCODING) follow it, and so do the tensors rounded onto it (a Concat's output read
  only by a Relu: udo_build.quant.pipeline.one_grid);
- a weight of a Conv, Gemm or MatMul; its bias's encoding (scale = input scale x weight scale)
  follows the two.

A tensor whose encoding is the same in both models (an override's) is no unit. `compose` makes
the model of a choice from the two models' encodings alone, with no calibration: the same
encodings the quantize step makes from those widths (udo_build.quant.settings.Widths), since
each is a function of its tensor's statistics and width.

    candidates = Candidates.of(reference, alternate)
    measure = OutputNoise(candidates, packages, feeds)
    figures = measure.sqnr_db([candidates.low_alone(unit) for unit in candidates.units], cores)

The SQNR is of the model's outputs, all of them together: 10 log10(sum x^2 / sum (x - x_q)^2)
over their finite elements, x from the float model (the prepared graph the integer path runs,
as udo_build.quant.report) and x_q from the integer path.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir.qmodel import QuantizedModel
from ..runtime.pool import Job, ordered
from .algorithm_settings import Widths
from .pipeline import SHARES_ENCODING, one_grid
from .quantizers import with_bias

WEIGHTED = ("Conv", "Gemm", "MatMul")
ACTIVATION, WEIGHT = "activation", "weight"


@dataclass(frozen=True)
class Unit:
    kind: str  # ACTIVATION | WEIGHT
    name: str  # the tensor (an activation's own encoding) or the weight
    node: str  # the node that makes the activation or reads the weight ("" for a graph input)
    op: str
    index: int  # that node's position in the prepared graph (-1: a graph input)
    reference: int  # bits in the reference model
    alternate: int  # bits in the alternate

    @property
    def low(self) -> int:
        return min(self.reference, self.alternate)

    @property
    def high(self) -> int:
        return max(self.reference, self.alternate)


@dataclass(frozen=True)
class Candidates:
    reference: QuantizedModel
    alternate: QuantizedModel
    units: tuple[Unit, ...]  # activations in graph order, then weights in graph order
    roots: dict[str, str]  # activation tensor -> the tensor whose encoding it takes

    @classmethod
    def of(cls, reference: QuantizedModel, alternate: QuantizedModel) -> Candidates:
        """The units of two quantized models of one float model (a ValueError when their
        graphs or encoded tensors differ: they were not made from the same model)."""
        if (reference.model.graph != alternate.model.graph
                or set(reference.activations) != set(alternate.activations)
                or set(reference.params) != set(alternate.params)):
            raise ValueError("the reference and alternate models are not of one float model")
        roots = _roots(reference, alternate)
        units = [*_activation_units(reference, alternate, roots),
                 *_weight_units(reference, alternate)]
        return cls(reference, alternate, tuple(units), roots)

    def widths(self, chosen: Mapping[Unit, int]) -> Widths:
        """The Widths of a choice: each unit's bits (units left out stay at the reference's)."""
        bits = {u: chosen.get(u, u.reference) for u in self.units}
        return Widths.of({u.name: b for u, b in bits.items() if u.kind == ACTIVATION},
                         {u.name: b for u, b in bits.items() if u.kind == WEIGHT})

    def low_alone(self, unit: Unit) -> Widths:
        """The widths of a sensitivity (udo_build.quant.mixed_search): `unit` at its low width,
        every other unit at its high width."""
        return self.widths({u: u.low if u == unit else u.high for u in self.units})

    def compose(self, widths: Widths) -> QuantizedModel:
        """The quantized model with `widths` (a tensor it does not name: the reference's)."""
        ref, alt = self.reference, self.alternate
        acts = {}
        for name, enc in ref.activations.items():
            root = self.roots.get(name, name)
            bits = widths.activation(root, enc.bitwidth)
            acts[name] = enc if bits == enc.bitwidth else alt.activations[name]
        params = dict(ref.params)
        graph = ref.model.graph
        for node in graph.nodes:
            w = node.inputs[1] if node.op in WEIGHTED and len(node.inputs) > 1 else ""
            if w not in ref.params:
                continue
            bits = widths.weight(w, ref.params[w][0].bitwidth)
            if bits != ref.params[w][0].bitwidth:
                params[w] = alt.params[w]
            bias = node.inputs[2] if len(node.inputs) > 2 else ""
            x = acts.get(node.inputs[0])
            if bias in ref.params and x is not None:  # the quantize step's rule
                fitted, bias_encs = with_bias(params[w], ref.model.weights[bias], x.scale,
                                              ref.params[bias][0].bitwidth)
                if ref.params[bias] != alt.params[bias] or fitted != ref.params[w]:
                    params[w], params[bias] = fitted, bias_encs
        return QuantizedModel(ref.model, acts, params, dict(ref.settings))

    def bits_of(self, widths: Widths) -> dict[Unit, int]:
        return {u: (widths.activation(u.name, u.reference) if u.kind == ACTIVATION
                    else widths.weight(u.name, u.reference)) for u in self.units}


def _roots(reference: QuantizedModel, alternate: QuantizedModel) -> dict[str, str]:
    """Each encoded activation -> the tensor whose encoding it takes (itself; the source of a
    tensor that shares its input's encoding in both models; the reader's output a tensor is
    rounded onto, udo_build.quant.pipeline.one_grid)."""
    ref, alt = reference.activations, alternate.activations
    graph = reference.model.graph
    roots = {t.name: t.name for t in graph.inputs if t.name in ref}
    for node in graph.nodes:
        source = node.inputs[0] if node.inputs else ""
        for out in node.outputs:
            if out not in ref:
                continue
            shares = (node.op in SHARES_ENCODING and source in roots
                      and ref[source] == ref[out] and alt[source] == alt[out])
            roots[out] = roots[source] if shares else out
    for name, grid in one_grid(graph).items():  # rounded onto a reader's output encoding
        if name in roots and grid in roots and ref[name] == ref[grid] and alt[name] == alt[grid]:
            roots[name] = roots[grid]
    return roots


def _activation_units(reference: QuantizedModel, alternate: QuantizedModel,
                      roots: dict[str, str]) -> list[Unit]:
    made = {out: (i, node) for i, node in enumerate(reference.model.graph.nodes)
            for out in node.outputs if out}
    units = []
    for name, root in roots.items():
        ref, alt = reference.activations[name], alternate.activations[name]
        if root != name or ref.bitwidth == alt.bitwidth:
            continue
        index, node = made.get(name, (-1, None))
        units.append(Unit(ACTIVATION, name, node.name if node else "", node.op if node else "",
                          index, ref.bitwidth, alt.bitwidth))
    return units


def _weight_units(reference: QuantizedModel, alternate: QuantizedModel) -> list[Unit]:
    units, seen = [], set()
    for index, node in enumerate(reference.model.graph.nodes):
        w = node.inputs[1] if node.op in WEIGHTED and len(node.inputs) > 1 else ""
        if w not in reference.params or w in seen:
            continue
        seen.add(w)
        ref, alt = reference.params[w][0].bitwidth, alternate.params[w][0].bitwidth
        if ref != alt:
            units.append(Unit(WEIGHT, w, node.name, node.op, index, ref, alt))
    return units


def elements(candidates: Candidates, packages: Mapping[str, Any],
             feed: Mapping[str, np.ndarray]) -> dict[Unit, int]:
    """How many elements each unit's tensor has (activations: as one inference makes them)."""
    from ..runtime.float_session import Session

    model = candidates.reference.model
    inputs = {t.name for t in model.graph.inputs}
    wanted = [u.name for u in candidates.units if u.kind == ACTIVATION and u.name not in inputs]
    with np.errstate(all="ignore"):
        made = {**feed, **(Session(model, packages).run(feed, wanted) if wanted else {})}
    return {u: int(np.size(made[u.name] if u.kind == ACTIVATION else model.weights[u.name]))
            for u in candidates.units}


class OutputNoise(Job[Widths, tuple[float, float]]):
    """The outputs' (signal, noise) of a choice of widths over the held-out feeds."""

    def __init__(self, candidates: Candidates, packages: Mapping[str, Any],
                 feeds: Sequence[Mapping[str, np.ndarray]]) -> None:
        self.candidates, self.packages, self.feeds = candidates, packages, list(feeds)
        self.outputs = [t.name for t in candidates.reference.model.graph.outputs]
        self.references: list[dict[str, np.ndarray]] | None = None

    def start(self) -> None:
        from ..runtime.float_session import Session

        if self.references is None:  # once, before the workers fork
            session = Session(self.candidates.reference.model, self.packages)
            with np.errstate(all="ignore"):
                self.references = [session.run(feed, self.outputs) for feed in self.feeds]

    def work(self, index: int, item: Widths) -> tuple[float, float]:
        from ..runtime.integer import QuantizedSession

        assert self.references is not None
        session = QuantizedSession(self.candidates.compose(item), self.packages)
        signal = noise = 0.0
        for feed, reference in zip(self.feeds, self.references, strict=True):
            with np.errstate(all="ignore"):
                approx = session.run(feed, self.outputs)
            for name in self.outputs:
                x, y = (np.asarray(a, np.float64).ravel() for a in (reference[name], approx[name]))
                finite = np.isfinite(x) & np.isfinite(y)
                x, e = x[finite], x[finite] - y[finite]
                signal += float(np.dot(x, x))
                noise += float(np.dot(e, e))
        return signal, noise

    def sqnr_db(self, choices: Sequence[Widths], cores: int = 1,
                progress: Callable[[int, int], None] | None = None) -> list[float]:
        """The output SQNR (dB; inf: exact) of each choice, spread over `cores`."""
        from ..runtime.pool import labels

        found = []  # the pool starts the job (the references) on one BLAS thread
        for done, (_, (signal, noise)) in enumerate(ordered(
                self, choices, cores, len(choices), labels("width choice")), 1):
            found.append(db(signal, noise))
            if progress is not None:
                progress(done, 0)
        return found


def db(signal: float, noise: float) -> float:
    if noise == 0.0:
        return math.inf
    return 10.0 * math.log10(max(signal, 1e-30) / noise)
