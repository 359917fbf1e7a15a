"""What the weight algorithms (bias correction, AdaRound) need of each layer's input, gathered in
one pass of the float model over the calibration inputs, reduced as it goes (no activation is
kept beyond the inference that made it):

- `sums`: per layer, the sum over every output position of each input patch element (channel x
  kernel offset, zero padding included), of the float input and of the input on its encoding's
  grid (fake-quantized), and the number of positions: the mean output of the layer under any
  weights is then W . (sum / positions);
- `columns`: per layer, `samples` input patches at positions drawn with a seeded generator, as
  integers on the input encoding's grid (q + offset, so real = scale x column): AdaRound's data.

Layers: Conv (2-D, explicit or no padding) and Gemm (A as is) whose weight has encodings and
whose input has an activation encoding. Sums run in float64 in a fixed order (np.add.reduce down
a leading axis, one row after the other), so the figures are the same on every machine.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ir import Node
from ..ir.encodings import Encoding
from ..ir.qmodel import QuantizedModel


@dataclass
class LayerInput:
    node: Node
    index: int  # the node's position in the graph
    groups: int  # output channel o reads group o // (out channels / groups)
    kernel: tuple[int, ...] = ()  # a Conv's (from its weight: kernel_shape is optional)
    float_sums: np.ndarray | None = None  # [groups, K per group]
    grid_sums: np.ndarray | None = None
    positions: int = 0
    columns: list[np.ndarray] = field(default_factory=list)  # [groups, K per group, n] each


def layers_of(qmodel: QuantizedModel) -> list[LayerInput]:
    """The layers the weight algorithms work on, in graph order."""
    out = []
    weights = qmodel.model.weights
    for index, node in enumerate(qmodel.model.graph.nodes):
        if node.op not in ("Conv", "Gemm") or len(node.inputs) < 2:
            continue
        w = weights.get(node.inputs[1])
        if w is None or node.inputs[1] not in qmodel.params or \
                node.inputs[0] not in qmodel.activations:
            continue
        if node.op == "Conv" and (w.ndim != 4 or node.attr("auto_pad", "NOTSET")
                                  not in ("NOTSET", "VALID")):
            continue
        if node.op == "Gemm" and node.attr("transA", 0):
            continue
        kernel = tuple(int(d) for d in w.shape[2:]) if node.op == "Conv" else ()
        out.append(LayerInput(node, index, int(node.attr("group", 1)), kernel))
    return out


def rows_of(node: Node, w: np.ndarray) -> np.ndarray:
    """The weight as [output channels, K per group] (a view where it can be)."""
    if node.op == "Gemm":
        return w if node.attr("transB", 0) else w.T
    return w.reshape(w.shape[0], -1)


def gather(qmodel: QuantizedModel, packages: Mapping[str, Any],
           feeds: Iterable[Mapping[str, np.ndarray]], layers: list[LayerInput], *,
           sums: bool = False, samples: int = 0, count: int = 1, seed: int = 0) -> int:
    """Fill `layers` over `feeds` (`count` of them: samples are spread evenly); the number of
    inferences run."""
    from ..runtime.float_session import Session

    session = Session(qmodel.model, packages)
    names = list(dict.fromkeys(layer.node.inputs[0] for layer in layers))
    graph_inputs = {t.name for t in qmodel.model.graph.inputs}
    per_feed = math.ceil(samples / max(count, 1)) if samples else 0
    done = 0
    for done, feed in enumerate(feeds, 1):
        produced = [n for n in names if n not in graph_inputs]
        with np.errstate(all="ignore"):
            values = {**feed, **session.run(feed, produced)}
        for i, layer in enumerate(layers):
            x = np.nan_to_num(np.asarray(values[layer.node.inputs[0]], np.float64))
            enc = qmodel.activations[layer.node.inputs[0]]
            grid = on_grid(x, enc)
            if sums:
                _add_sums(layer, x, grid * enc.scale)
            if per_feed:
                rng = np.random.default_rng([seed, i, done])
                layer.columns.append(_sample(layer, grid, per_feed, rng))
    return done


def on_grid(x: np.ndarray, enc: Encoding) -> np.ndarray:
    """x on the encoding's grid, as the integers q + offset (real = scale x them)."""
    q = np.clip(np.rint(x / enc.scale) - enc.offset, enc.qmin, enc.qmax)
    return q + enc.offset


def ordered_sum(a: np.ndarray, axes: tuple[int, ...]) -> np.ndarray:
    """The sum over `axes`, one row after the other in a fixed order (float64)."""
    kept = [d for d in range(a.ndim) if d not in axes]
    moved = np.ascontiguousarray(np.transpose(a, (*axes, *kept)), dtype=np.float64)
    flat = moved.reshape(-1, *[a.shape[d] for d in kept]) if axes else moved[None]
    return np.add.reduce(flat, axis=0)


def _add_sums(layer: LayerInput, x: np.ndarray, fake: np.ndarray) -> None:
    f, positions = _patch_sums(layer, x)
    g, _ = _patch_sums(layer, fake)
    shape = (layer.groups, -1)
    f, g = f.reshape(shape), g.reshape(shape)
    layer.float_sums = f if layer.float_sums is None else layer.float_sums + f
    layer.grid_sums = g if layer.grid_sums is None else layer.grid_sums + g
    layer.positions += positions


def _geometry(layer: LayerInput, x: np.ndarray) -> tuple[np.ndarray, tuple[int, ...],
                                                         tuple[int, ...], tuple[int, ...],
                                                         tuple[int, int]]:
    """(padded input, kernel, strides, dilations, output height and width) of a 2-D Conv."""
    node, kernel = layer.node, layer.kernel
    strides = tuple(node.attr("strides") or (1, 1))
    dil = tuple(node.attr("dilations") or (1, 1))
    pads = tuple(node.attr("pads") or (0, 0, 0, 0))
    xp = np.pad(x, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    out = tuple((xp.shape[2 + d] - dil[d] * (kernel[d] - 1) - 1) // strides[d] + 1
                for d in range(2))
    return xp, kernel, strides, dil, (out[0], out[1])


def _patch_sums(layer: LayerInput, x: np.ndarray) -> tuple[np.ndarray, int]:
    """([C x KH x KW] sums of each patch element over the output positions, positions)."""
    if layer.node.op == "Gemm":
        return ordered_sum(x.reshape(-1, x.shape[-1]), (0,)), int(np.prod(x.shape[:-1]))
    xp, kernel, strides, dil, (oh, ow) = _geometry(layer, x)
    sums = np.empty((x.shape[1], kernel[0], kernel[1]))
    for i in range(kernel[0]):
        for j in range(kernel[1]):
            window = xp[:, :, i * dil[0]:i * dil[0] + strides[0] * (oh - 1) + 1:strides[0],
                        j * dil[1]:j * dil[1] + strides[1] * (ow - 1) + 1:strides[1]]
            sums[:, i, j] = ordered_sum(window, (0, 2, 3))
    return sums.reshape(-1), x.shape[0] * oh * ow


def _sample(layer: LayerInput, grid: np.ndarray, count: int,
            rng: np.random.Generator) -> np.ndarray:
    """`count` patches of the on-grid input at random output positions: [groups, K, count]."""
    node = layer.node
    if node.op == "Gemm":
        rows = grid.reshape(-1, grid.shape[-1])
        picked = rows[rng.integers(0, rows.shape[0], count)]  # [count, K]
        return picked.T[None]
    xp, kernel, strides, dil, (oh, ow) = _geometry(layer, grid)
    n = rng.integers(0, xp.shape[0], count)
    h = rng.integers(0, oh, count)
    w = rng.integers(0, ow, count)
    hh = h[:, None] * strides[0] + np.arange(kernel[0])[None, :] * dil[0]
    ww = w[:, None] * strides[1] + np.arange(kernel[1])[None, :] * dil[1]
    patches = xp[n[:, None, None], :, hh[:, :, None], ww[:, None, :]]  # [count, KH, KW, C]
    patches = np.transpose(patches, (0, 3, 1, 2)).reshape(count, layer.groups, -1)
    return np.ascontiguousarray(np.transpose(patches, (1, 2, 0)))
