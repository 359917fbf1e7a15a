"""Where accuracy goes: the SQNR of every quantized layer output against the float model.

For each encoded activation a node makes, over the given inputs:
SQNR = 10 log10(sum of x^2 / sum of (x - x_q)^2), with x the float model's tensor and x_q the
integer path's, dequantized. Both run the same prepared graph (the quantized bundle's), so the
figure is what quantization costs there, layer by layer. The sums run over the elements where
both are finite, as the encodings' ranges do (udo_build.quant.quantizers): an infinity or NaN of
the float model is no signal a quantized tensor could carry.

    layers = layer_sqnr(qmodel, packages, feeds)       # LayerSqnr per encoded layer output
    LayerFigures(inputs, tuple(layers)).to_bytes()     # quantize's quant/layers.json

Memory: the two sessions run in step, each handing its tensors over as it makes them
(`stream`); a tensor's sums are taken once both have made it, and each session frees it after
its last reader. An inference holds the widest cut of each graph and the few tensors one run
made before the other, not the two runs' tensors at once (an LLM's AR-128 step: gigabytes).
The float tensors come from calibration's plan (`request`), so they are the bits calibration
saw, run again here rather than kept from calibration.

The integer path is exact on every machine; the float reference may differ in its last bits
between CPUs, so the published figures are rounded to 3 decimals (runtime/metrics.py does the
same) and an exact layer (no noise at all) has None.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Sized
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Any

import numpy as np

from ..ir.graph import DEFAULT_PACKAGE
from ..ir.qmodel import QuantizedModel
from ..runtime.pool import Job

MAX_LABELS = 60


@dataclass(frozen=True)
class LayerSqnr:
    index: int
    node: str
    op: str
    tensor: str
    sqnr_db: float  # inf when the integer path is exact
    custom: bool = False  # made by a custom op (an op package's, not the default package's)

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "node": self.node, "op": self.op, "tensor": self.tensor,
                "sqnr_db": None if math.isinf(self.sqnr_db) else round(self.sqnr_db, 3),
                "custom": self.custom}


@dataclass(frozen=True)
class LayerFigures:
    """The per-layer SQNR over `inputs` inferences: quantize's `quant/layers.json`."""

    inputs: int
    layers: tuple[LayerSqnr, ...]

    def to_bytes(self) -> bytes:
        """Sorted keys, like a run's report.json: a function of the model and the inputs."""
        document = {"inputs": self.inputs, "layers": [layer.to_json() for layer in self.layers]}
        return (json.dumps(document, indent=1, sort_keys=True) + "\n").encode()


def layer_sqnr(qmodel: QuantizedModel, packages: Mapping[str, Any],
               feeds: Iterable[Mapping[str, np.ndarray]],
               progress: Callable[[int, int], None] | None = None, cores: int = 1,
               count: int | None = None, request: Sequence[str] | None = None,
               label: Callable[[int], str] | None = None) -> list[LayerSqnr]:
    """The SQNR of every encoded layer output over `feeds` (`progress(done, 0)` after each).
    `request`: the tensors to ask the float model for first, as calibration did (its plan, so
    its bits); the others come from a plan of their own. `cores`, `count` (else len(feeds)),
    `label`: as for calibration (udo_build.runtime.pool): the feeds spread over workers, each
    input's sums come back and are added in input order, as one process adds them."""
    from ..runtime.pool import labels, ordered

    graph = qmodel.model.graph
    layers = [(i, n, out) for i, n in enumerate(graph.nodes) for out in n.outputs
              if out in qmodel.activations]
    tensors = [out for _, _, out in layers]
    signal = dict.fromkeys(tensors, 0.0)
    noise = dict.fromkeys(tensors, 0.0)
    total = count if count is not None else (len(feeds) if isinstance(feeds, Sized) else None)
    job = _Measure(qmodel, packages, tensors, list(request or ()))
    for done, (_, sums) in enumerate(ordered(job, feeds, cores, total,
                                             label or labels("input")), 1):
        for name, (s, e) in zip(tensors, sums, strict=True):
            signal[name] += s
            noise[name] += e
        if progress is not None:
            progress(done, 0)
    return [LayerSqnr(i, n.name, n.op if n.package == DEFAULT_PACKAGE else f"{n.package}::{n.op}",
                      out, _db(signal[out], noise[out]), n.package != DEFAULT_PACKAGE)
            for i, n, out in layers]


Stream = Iterator[tuple[str, np.ndarray]]


class _Measure(Job[Mapping[str, np.ndarray], list[tuple[float, float]]]):
    """One input on the float model and the integer path, in step: (signal, noise) of each
    tensor, taken as soon as both have made it (see `_paired`)."""

    def __init__(self, qmodel: QuantizedModel, packages: Mapping[str, Any],
                 tensors: list[str], request: list[str]) -> None:
        self.qmodel, self.packages, self.tensors = qmodel, packages, tensors
        known = set(request)
        self.plans = (request, [name for name in tensors if name not in known]) if request \
            else ([], tensors)  # the float plans, in turn: calibration's, the rest's
        self.sessions: Any = None

    def start(self) -> None:
        from ..runtime.float_session import Session
        from ..runtime.integer import QuantizedSession

        if self.sessions is None:  # and their plans: forked workers inherit them, built once
            exact = Session(self.qmodel.model, self.packages)
            quantized = QuantizedSession(self.qmodel, self.packages)
            quantized.plan(tuple(self.tensors))
            for names in self.plans:
                if names:
                    exact.plan(tuple(names))
            self.sessions = (exact, quantized)

    def work(self, index: int, feed: Mapping[str, np.ndarray]) -> list[tuple[float, float]]:
        exact, quantized = self.sessions
        reference = chain.from_iterable(exact.stream(feed, names)
                                        for names in self.plans if names)
        sums = {}
        with np.errstate(all="ignore"):  # as the sessions' runs: NaN and infinities as IEEE
            pairs = _paired(reference, quantized.stream(feed, self.tensors), set(self.tensors))
            for name, x, y in pairs:
                x, e = _finite_pair(x, y)
                sums[name] = (float(np.sum(x * x)), float(np.sum(e * e)))
                x = y = e = None  # type: ignore[assignment]  (freed before the next is made)
        return [sums[name] for name in self.tensors]

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "sessions": None}  # a spawned worker starts its own


def _paired(reference: Stream, approx: Stream, names: set[str]
            ) -> Iterator[tuple[str, np.ndarray, np.ndarray]]:
    """(name, float tensor, integer tensor) of each of `names`, as soon as both streams have
    made it: the float stream leads, the integer one is run until it catches up, and what one
    made before the other waits (both run the graph's nodes in order, so few wait)."""
    floats: dict[str, np.ndarray] = {}
    ints: dict[str, np.ndarray] = {}
    for name, x in reference:
        if name in ints:
            yield name, x, ints.pop(name)
        elif name in names:
            floats[name] = x
        x = None  # type: ignore[assignment]  (not held while the next is made)
        if name not in floats:
            continue
        for other, y in approx:
            if other in floats:
                yield other, floats.pop(other), y
            elif other in names:
                ints[other] = y
            y = None  # type: ignore[assignment]
            if name not in floats:
                break
    if floats or ints or next(approx, None) is not None:
        raise RuntimeError(f"the float and integer runs made different tensors: "
                           f"{sorted(floats)[:3]} {sorted(ints)[:3]}")


def _finite_pair(reference: np.ndarray, approx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(x, x - x_q) in float64 at the elements where both are finite."""
    x, y = np.asarray(reference, np.float64), np.asarray(approx, np.float64)
    finite = np.isfinite(x) & np.isfinite(y)
    if not finite.all():
        x, y = x[finite], y[finite]
    return x, x - y


def _db(signal: float, noise: float) -> float:
    if noise == 0.0:
        return math.inf
    return 10.0 * math.log10(max(signal, 1e-30) / noise)


def require_plotting() -> None:
    """A UserError unless matplotlib (the `report` extra) is installed: checked before the
    long work a plot comes after."""
    import importlib.util

    if importlib.util.find_spec("matplotlib") is None:
        from ..errors import UserError

        raise UserError("the per-layer plot needs matplotlib, which is not installed",
                        hint="pip install 'udo-build[report]' (or leave out --png)")


def plot(layers: list[LayerSqnr], path: Path, title: str) -> None:
    """A bar per layer (SQNR in dB), the worst ones labeled, written as a PNG."""
    require_plotting()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    values = [min(layer.sqnr_db, 80.0) for layer in layers]
    labeled = len(layers) <= MAX_LABELS
    fig, ax = plt.subplots(figsize=(max(6.0, 0.18 * len(layers) + 2), 6.0 if labeled else 4.0),
                           dpi=110)
    colors = ["#c0392b" if v < 20 else "#e67e22" if v < 30 else "#2e86c1" for v in values]
    ax.bar(range(len(values)), values, color=colors)
    ax.set_xlabel("layer (graph order)")
    ax.set_ylabel("SQNR vs float (dB)")
    ax.set_title(title)
    ax.axhline(30, color="#888", linewidth=0.8, linestyle="--")
    if labeled:  # name every bar
        ax.set_xticks(range(len(layers)), [f"{layer.node} ({layer.op})" for layer in layers],
                      rotation=90, fontsize=7)
    else:  # name the three worst
        worst = sorted(range(len(layers)), key=lambda i: layers[i].sqnr_db)[:3]
        for rank, bar in enumerate(worst):
            ax.annotate(layers[bar].node, (bar, values[bar]), fontsize=7,
                        textcoords="offset points", xytext=(0, 4 + 10 * rank), ha="center")
    ax.set_xlim(-0.6, len(values) - 0.4)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path)
    plt.close(fig)
