"""Where accuracy goes: the SQNR of every quantized layer output against the float model.

For each encoded activation a node makes, over the given inputs:
SQNR = 10 log10(sum of x^2 / sum of (x - x_q)^2), with x the float model's tensor and x_q the
integer path's, dequantized. Both run the same prepared graph (the quantized bundle's), so the
figure is what quantization costs there, layer by layer.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..ir.qmodel import QuantizedModel

MAX_LABELS = 60


@dataclass(frozen=True)
class LayerSqnr:
    index: int
    node: str
    op: str
    tensor: str
    sqnr_db: float  # inf when the integer path is exact

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "node": self.node, "op": self.op, "tensor": self.tensor,
                "sqnr_db": None if math.isinf(self.sqnr_db) else round(self.sqnr_db, 3)}


def layer_sqnr(qmodel: QuantizedModel, packages: Mapping[str, Any],
               feeds: Iterable[Mapping[str, np.ndarray]]) -> list[LayerSqnr]:
    from ..runtime.float_session import Session
    from ..runtime.integer import QuantizedSession

    graph = qmodel.model.graph
    layers = [(i, n, out) for i, n in enumerate(graph.nodes) for out in n.outputs
              if out in qmodel.activations]
    tensors = [out for _, _, out in layers]
    signal = dict.fromkeys(tensors, 0.0)
    noise = dict.fromkeys(tensors, 0.0)
    exact, quantized = Session(qmodel.model, packages), QuantizedSession(qmodel, packages)
    for feed in feeds:
        reference = exact.run(feed, tensors)
        approx = quantized.run(feed, tensors)
        for name in tensors:
            x = np.asarray(reference[name], np.float64)
            signal[name] += float(np.sum(x * x))
            noise[name] += float(np.sum((x - np.asarray(approx[name], np.float64)) ** 2))
    return [LayerSqnr(i, n.name, n.op if n.package == "default" else f"{n.package}::{n.op}",
                      out, _db(signal[out], noise[out])) for i, n, out in layers]


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
