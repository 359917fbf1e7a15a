"""Empirical bias correction: the quantized layer's mean output made the float layer's.

    qmodel, corrected = correct_biases(qmodel, packages, feeds, count)

As AIMET's empirical bias correction (Nagel et al. 2019, section 4.2): over the calibration
inputs, for each Conv/Gemm with encoded weights (udo_build.quant.layer_inputs.layers_of), the
mean of each output channel of the quantized layer (its weights on their grid, its input on its
encoding's grid) is compared with the float layer's (float weights, float input); the difference
is taken out of the bias. Weight rounding (AdaRound's too: its float weights are the `reference`
the model's rounded ones are compared with) and input clipping both shift a channel's mean;
after correction the layer's mean output over the calibration data is the float one's, up to the
bias's own grid. A layer with no bias gets one (with its encodings: scale = input scale x weight
scale, as udo_build.quant.pipeline gives biases). Both means come from the input patch sums in
one float pass (the mean of a convolution is its weights dotted with the mean patch), in float64
in a fixed order: the same bytes on every machine.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from ..ir import Node
from ..ir.encodings import Encoding
from ..ir.qmodel import QuantizedModel
from .layer_inputs import LayerInput, gather, layers_of, ordered_sum, rows_of


def correct_biases(qmodel: QuantizedModel, packages: Mapping[str, Any],
                   feeds: Iterable[Mapping[str, np.ndarray]], count: int,
                   reference: Mapping[str, np.ndarray] | None = None,
                   ) -> tuple[QuantizedModel, int]:
    """The model with its layers' biases corrected over `feeds` (`count` of them), and how
    many layers were corrected. `reference`: the float weights the model's weights stand for,
    where an algorithm before changed them (AdaRound writes its rounding into the weights, so
    the model's own are already on their grid and would hide the shift the rounding made);
    default: the model's own."""
    layers = [layer for layer in layers_of(qmodel) if _bias_fits(layer.node, qmodel)]
    gather(qmodel, packages, feeds, layers, sums=True, count=count)
    weights = dict(qmodel.model.weights)
    params = dict(qmodel.params)
    nodes = list(qmodel.model.graph.nodes)
    corrected = 0
    for layer in layers:
        if layer.positions == 0:
            continue
        delta = mean_shift(layer, qmodel, reference)
        nodes[layer.index] = _set_bias(layer.node, delta, weights, params, qmodel)
        corrected += 1
    graph = replace(qmodel.model.graph, nodes=tuple(nodes))
    model = replace(qmodel.model, graph=graph, weights=weights)
    return replace(qmodel, model=model, params=params), corrected


def mean_shift(layer: LayerInput, qmodel: QuantizedModel,
               reference: Mapping[str, np.ndarray] | None = None) -> np.ndarray:
    """Per output channel: the quantized layer's mean output minus the float layer's (float64),
    bias left out; the float layer's weights from `reference` where it has them, else the
    model's own (each weight read once: a large model's are read from their files)."""
    node = layer.node
    name = node.inputs[1]
    own = rows_of(node, qmodel.model.weights[name]).astype(np.float64)
    w = own if reference is None or name not in reference else \
        rows_of(node, reference[name]).astype(np.float64)
    wq = w_on_grid(own, qmodel.params[name])
    group = np.arange(w.shape[0]) // (w.shape[0] // layer.groups)
    assert layer.float_sums is not None and layer.grid_sums is not None
    mean_f = layer.float_sums[group] / layer.positions
    mean_q = layer.grid_sums[group] / layer.positions
    alpha = float(node.attr("alpha", 1.0)) if node.op == "Gemm" else 1.0
    return alpha * (ordered_sum(wq * mean_q, (1,)) - ordered_sum(w * mean_f, (1,)))


def w_on_grid(rows: np.ndarray, encs: list[Encoding]) -> np.ndarray:
    """Weights [out channels, K] as the integer path reads them (one encoding, or one per
    output channel), dequantized, float64."""
    scale = np.array([e.scale for e in encs], np.float64).reshape(-1, 1)
    qmin, qmax = encs[0].qmin, encs[0].qmax
    return np.clip(np.rint(rows / scale), qmin, qmax) * scale


def _bias_fits(node: Node, qmodel: QuantizedModel) -> bool:
    """A bias absent, or a constant with one value per output channel."""
    if len(node.inputs) < 3 or not node.inputs[2]:
        return node.op == "Conv"  # a Gemm's C may broadcast either way: leave it
    bias = qmodel.model.weights.get(node.inputs[2])
    w = qmodel.model.weights[node.inputs[1]]
    channels = rows_of(node, w).shape[0]
    return bias is not None and bias.size == channels and bias.dtype == np.float32


def _set_bias(node: Node, delta: np.ndarray, weights: dict[str, np.ndarray],
              params: dict[str, list[Encoding]], qmodel: QuantizedModel) -> Node:
    beta = float(node.attr("beta", 1.0)) if node.op == "Gemm" else 1.0
    if len(node.inputs) > 2 and node.inputs[2]:
        name = node.inputs[2]
        old = weights[name]
        weights[name] = (old.astype(np.float64).reshape(-1) - delta / beta).astype(
            np.float32).reshape(old.shape)
        return node
    name = _fresh(f"{node.name}.bias", weights)
    weights[name] = (-delta).astype(np.float32)
    x = qmodel.activations[node.inputs[0]]
    bits = int(qmodel.settings.get("bias_bitwidth", 32))
    params[name] = [Encoding(bits, x.scale * e.scale, 0, signed=True)
                    for e in qmodel.params[node.inputs[1]]]
    return replace(node, inputs=(*node.inputs[:2], name))


def _fresh(name: str, taken: Mapping[str, Any]) -> str:
    candidate, n = name, 1
    while candidate in taken:
        n += 1
        candidate = f"{name}{n}"
    return candidate
