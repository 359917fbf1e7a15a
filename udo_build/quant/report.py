"""Where accuracy goes: the SQNR of every quantized layer output against the float model.

For each encoded activation a node makes, over the given inputs:
SQNR = 10 log10(sum of x^2 / sum of (x - x_q)^2), with x the float model's tensor and x_q the
integer path's, dequantized. Both run the same prepared graph (the quantized bundle's), so the
figure is what quantization costs there, layer by layer. The sums run over the elements where
both are finite, as the encodings' ranges do (udo_build.quant.quantizers): an infinity or NaN of
the float model is no signal a quantized tensor could carry.

    layers = layer_sqnr(qmodel, packages, feeds)       # LayerSqnr per encoded layer output
    LayerFigures(inputs, tuple(layers)).to_bytes()     # quantize's quant/layers.json

The integer path is exact on every machine; the float reference may differ in its last bits
between CPUs, so the published figures are rounded to 3 decimals (runtime/metrics.py does the
same) and an exact layer (no noise at all) has None.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Mapping, Sequence, Sized
from dataclasses import dataclass
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


class KeptInferences:
    """Calibration's observer (quant.calibrate) keeping the first `limit` inferences: their
    feeds and float tensors, so the SQNR after quantizing need not run the float model again."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.feeds: list[Mapping[str, np.ndarray]] = []
        self.tensors: list[Mapping[str, np.ndarray]] = []

    def __call__(self, feed: Mapping[str, np.ndarray],
                 tensors: Mapping[str, np.ndarray]) -> None:
        if len(self.feeds) < self.limit:
            self.feeds.append(dict(feed))
            self.tensors.append(dict(tensors))


def layer_sqnr(qmodel: QuantizedModel, packages: Mapping[str, Any],
               feeds: Iterable[Mapping[str, np.ndarray]],
               progress: Callable[[int, int], None] | None = None,
               references: Sequence[Mapping[str, np.ndarray]] = (), cores: int = 1,
               count: int | None = None, request: Sequence[str] | None = None,
               label: Callable[[int], str] | None = None) -> list[LayerSqnr]:
    """The SQNR of every encoded layer output over `feeds` (`progress(done, 0)` after each).
    `references[i]`, when given, holds float tensors of feed i already computed (calibration's):
    only the tensors it lacks are run on the float model. `request`: the tensors to ask the
    float model for first, as calibration did (its plan, so its bits), when calibration's are not
    at hand. `cores`, `count` (else len(feeds)), `label`: as for calibration
    (udo_build.runtime.pool): the feeds spread over workers, each input's sums come back and are
    added in input order, as one process adds them."""
    from ..runtime.pool import labels, ordered

    graph = qmodel.model.graph
    layers = [(i, n, out) for i, n in enumerate(graph.nodes) for out in n.outputs
              if out in qmodel.activations]
    tensors = [out for _, _, out in layers]
    signal = dict.fromkeys(tensors, 0.0)
    noise = dict.fromkeys(tensors, 0.0)
    total = count if count is not None else (len(feeds) if isinstance(feeds, Sized) else None)
    job = _Measure(qmodel, packages, tensors, list(request or ()))
    items = ((feed, references[i] if i < len(references) else {}) for i, feed in enumerate(feeds))
    for done, (_, sums) in enumerate(ordered(job, items, cores, total,
                                             label or labels("input")), 1):
        for name, (s, e) in zip(tensors, sums, strict=True):
            signal[name] += s
            noise[name] += e
        if progress is not None:
            progress(done, 0)
    return [LayerSqnr(i, n.name, n.op if n.package == DEFAULT_PACKAGE else f"{n.package}::{n.op}",
                      out, _db(signal[out], noise[out]), n.package != DEFAULT_PACKAGE)
            for i, n, out in layers]


Item = tuple[Mapping[str, np.ndarray], Mapping[str, np.ndarray]]  # a feed, its known tensors


class _Measure(Job[Item, list[tuple[float, float]]]):
    """One input on the float model and the integer path: (signal, noise) of each tensor."""

    def __init__(self, qmodel: QuantizedModel, packages: Mapping[str, Any],
                 tensors: list[str], request: list[str]) -> None:
        self.qmodel, self.packages, self.tensors, self.request = qmodel, packages, tensors, request
        self.sessions: Any = None

    def start(self) -> None:
        from ..runtime.float_session import Session
        from ..runtime.integer import QuantizedSession

        if self.sessions is None:  # and their plans: forked workers inherit them, built once
            exact = Session(self.qmodel.model, self.packages)
            quantized = QuantizedSession(self.qmodel, self.packages)
            quantized.plan(tuple(self.tensors))
            if self.request:
                exact.plan(tuple(self.request))
                known = set(self.request)
                missing = tuple(name for name in self.tensors if name not in known)
                if missing:
                    exact.plan(missing)
            self.sessions = (exact, quantized)

    def work(self, index: int, item: Item) -> list[tuple[float, float]]:
        exact, quantized = self.sessions
        feed, known = item
        if not known and self.request:
            known = exact.run(feed, self.request)
        missing = [name for name in self.tensors if name not in known]
        reference = {**known, **(exact.run(feed, missing) if missing else {})}
        approx = quantized.run(feed, self.tensors)
        sums = []
        for name in self.tensors:
            x, e = _finite_pair(reference[name], approx[name])
            sums.append((float(np.sum(x * x)), float(np.sum(e * e))))
        return sums

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "sessions": None}  # a spawned worker starts its own


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
