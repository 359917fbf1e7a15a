"""The quantization pipeline: fold the float graph, calibrate it, choose every encoding.

    qmodel = quantize_model(model, packages, feeds, settings)
    qmodel, figures = quantize_and_measure(model, packages, read_feeds, settings, ...)

Settings: act_bitwidth (8|16), weights_bitwidth (4|8|16), bias_bitwidth (8|32), per_channel,
quantizer (tf|enhanced|symmetric), float_fallback; weights_block_size (> 0: MatMul, Gemm and
Conv weights per block along their input axis, and Gather tables (embeddings) per row by blocks,
as LPBQ with `lpbq`: udo_build.quant.blocks).
Activation encodings come from the calibration statistics through the quantizer; tensors that
only move data (Reshape, Transpose, MaxPool, ...) take their input's encoding so the integer
path moves bytes; a Conv/Gemm/MatMul/Add output read only by a Relu or Clip gets no encoding
(the activation absorbs it); another tensor read only by a Relu or a Clip takes that
reader's output encoding (`one_grid`: rounded once). Weights of Conv (per output channel, axis
0), Gemm (axis of B's output dim) and MatMul (last axis) are signed symmetric, per channel when
`per_channel`; other constant operands get unsigned encodings of their finite range (none when
they hold no finite value: see udo_build.quant.quantizers); biases get scale = input scale x
weight scale, and a weight channel whose 32-bit bias would not fit at that scale gets the
smallest wider scale at which it does (quantizers.with_bias). Inputs read for their exact values
(Range's bounds, Resize's scales, a QuantizeLinear's scale, IsNaN's input, Pow's exponent:
FLOAT_INPUTS) keep their float values.
`widths` (udo_build.quant.settings.Widths: the mixed precision search's choice) give tensors their
own bit widths instead of act_bitwidth / weights_bitwidth.
`overrides` (AIMET encodings, e.g. from `override_encodings`) replace what was computed for the
tensors they name; with float_fallback only they are used, and no calibration runs: every other
tensor stays float.
`quantize_and_measure` then measures the SQNR of each layer over the first `report_inputs`
calibration inputs (udo_build.quant.report), reading them again and asking the float model for
the very tensors calibration asked for, so that the figures are the bits of calibration's
float tensors (kept instead, an LLM's would be most of a gigabyte). `cores`: how many cores
both may use (udo_build.runtime.pool).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import islice
from typing import Any

import numpy as np

from ..ir import DEFAULT_PACKAGE, Graph, Model, Node
from ..ir.blocks import block_input, weight_layout
from ..ir.encodings import Encoding
from ..ir.qmodel import ABSORBED_PRODUCERS, ABSORBING, QuantizedModel
from .algorithm_settings import Widths
from .blocks import block_or_channel
from .calibrate import calibrate, calibration_request, observed_tensors
from .fold import fold_for_quantization
from .quantizers import (
    activation_encoding,
    asymmetric,
    finite_range,
    symmetric_weights,
    with_bias,
)
from .report import LayerFigures, layer_sqnr
from .settings import QuantizeSettings
from .stats import TensorStats

SHARES_ENCODING = ("Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "MaxPool",
                   "GlobalMaxPool", "Identity", "Dropout", "Slice", "Split", "Gather",
                   "DepthToSpace", "SpaceToDepth", "Expand", "Tile")
# inputs read for their exact float values: as parameters (a shape, a size, a scale, a
# threshold), as bits, or to find NaN and infinities (which no encoding holds); they get no
# encoding, so quantization changes no shape and no scale and IsNaN still sees NaN
# an exponent stays float too: 2.0 on an 8-bit grid is 2.00064, and x**2.00064 of x < 0 is NaN
FLOAT_INPUTS = {"Range": (0, 1, 2), "Resize": (1, 2), "Upsample": (1,), "QuantizeLinear": (1,),
                "DequantizeLinear": (1,), "Dropout": (1,), "NonMaxSuppression": (3, 4),
                "MelWeightMatrix": (3, 4), "BitCast": (0,), "IsNaN": (0,), "IsInf": (0,),
                "Pow": (1,)}
DEFAULTS = QuantizeSettings().quantizer_params()
Overrides = tuple[dict[str, list[Encoding]], dict[str, list[Encoding]]]


def quantize_model(model: Model, packages: Mapping[str, Any],
                   feeds: Iterable[Mapping[str, np.ndarray]], settings: Mapping[str, Any],
                   overrides: Overrides | None = None,
                   progress: Callable[[int, int], None] | None = None,
                   cores: int = 1, count: int | None = None,
                   label: Callable[[int], str] | None = None,
                   widths: Widths | None = None) -> QuantizedModel:
    """`cores`, `count` and `label`: see calibrate. `widths`: per-tensor bit widths
    instead of act_bitwidth / weights_bitwidth (mixed precision)."""
    config = {**DEFAULTS, **settings}
    prepared = fold_for_quantization(model)
    stats: dict[str, TensorStats] = {}
    done = 0
    if not config["float_fallback"]:
        stats, done = calibrate(prepared, packages, feeds, _calibrated_tensors(prepared),
                                histograms=config["quantizer"] == "enhanced",
                                progress=progress, cores=cores, count=count, label=label)
    chooser = _Chooser(prepared, stats, config, widths)
    activations, params = chooser.choose()
    if overrides is not None:
        activations.update({k: v[0] for k, v in overrides[0].items()})
        params.update(overrides[1])
    if config["float_fallback"]:
        names = set(overrides[0]) if overrides else set()
        activations = {k: v for k, v in activations.items() if k in names}
        params = {k: v for k, v in params.items() if overrides and k in overrides[1]}
    return QuantizedModel(prepared, activations, params,
                          {**config, "calibration_inputs": done})


def quantize_and_measure(model: Model, packages: Mapping[str, Any],
                         feeds: Callable[[], Iterable[Mapping[str, np.ndarray]]],
                         settings: QuantizeSettings, overrides: Overrides | None = None,
                         progress: Callable[[int, int], None] | None = None,
                         measuring: Callable[[int, int], None] | None = None,
                         cores: int = 1, count: int | None = None,
                         label: Callable[[int], str] | None = None,
                         widths: Widths | None = None,
                         ) -> tuple[QuantizedModel, LayerFigures | None]:
    """The quantized model and, unless `settings.report_inputs` is 0, the SQNR of its layers
    over that many first inputs (None: not measured). `feeds()` reads the inputs afresh;
    `count`: their number, when known (see calibrate)."""
    limit = settings.report_inputs
    qmodel = quantize_model(model, packages, feeds(), settings.quantizer_params(), overrides,
                            progress, cores, count, label, widths)
    if limit <= 0:
        return qmodel, None
    measured = min(limit, count) if count is not None else None
    inputs = islice(feeds(), limit)
    request = None if qmodel.settings["calibration_inputs"] == 0 else \
        calibration_request(qmodel.model, _calibrated_tensors(qmodel.model))
    counter = _Counted(inputs)
    layers = layer_sqnr(qmodel, packages, counter, measuring, cores=cores, count=measured,
                        request=request, label=label)
    return qmodel, LayerFigures(counter.count, tuple(layers))


class _Counted:
    """An iterable that counts what it gave."""

    def __init__(self, items: Iterable[Any]) -> None:
        self.items, self.count = items, 0

    def __iter__(self) -> Iterator[Any]:
        for item in self.items:
            self.count += 1
            yield item


class _Chooser:
    def __init__(self, model: Model, stats: dict[str, TensorStats], config: dict[str, Any],
                 widths: Widths | None = None):
        self.model = model
        self.widths = widths or Widths()
        self.graph = model.graph
        self.stats = stats
        self.config = config
        self.consumers = self.graph.consumers()
        self.exact = float_tensors(self.graph)
        self.one_grid = one_grid(self.graph, self.consumers)
        self.acts: dict[str, Encoding] = {}
        self.params: dict[str, list[Encoding]] = {}

    def choose(self) -> tuple[dict[str, Encoding], dict[str, list[Encoding]]]:
        for t in self.graph.inputs:
            self._activation(t.name)
        for node in self.graph.nodes:
            self._outputs(node)
        for node in self.graph.nodes:
            self._weights(node)
        return self.acts, self.params

    def _activation(self, name: str) -> None:
        grid = self.one_grid.get(name, name)  # the reader's output whose encoding it takes
        if grid not in self.stats or grid in self.exact:
            grid = name
        if grid in self.stats and name not in self.exact:
            bits = self.widths.activation(grid, self.config["act_bitwidth"])
            self.acts[name] = activation_encoding(self.stats[grid], bits, self.config["quantizer"])

    def _outputs(self, node: Node) -> None:
        source = node.inputs[0] if node.inputs else ""
        for out in node.outputs:
            if not out or out not in self.stats or out in self.exact:
                continue
            if node.op in SHARES_ENCODING and source in self.acts:
                self.acts[out] = self.acts[source]
            elif not self._absorbed(node, out):
                self._activation(out)

    def _absorbed(self, node: Node, out: str) -> bool:
        return _absorbed(self.graph, self.consumers, node, out)

    def _blocks(self, node: Node, w: np.ndarray) -> list[Encoding] | None:
        """Block encodings (weights_block_size, lpbq) when the weight's input axis takes
        them (udo_build.quant.blocks), else None."""
        size = self.config.get("weights_block_size", 0)
        layout = weight_layout(node, tuple(w.shape)) if size else None
        if layout is None:
            return None
        return block_or_channel(w, layout, self.config["weights_bitwidth"], size,
                                bool(self.config.get("lpbq", False)))

    def _weights(self, node: Node) -> None:
        weights = self.model.weights
        w_name = node.inputs[1] if len(node.inputs) > 1 else ""
        if node.op in ("Conv", "Gemm", "MatMul") and w_name in weights:
            w = weights[w_name]  # read once: a streamed weight is read from its file each time
            axis = _channel_axis(node, w)
            encs = self._blocks(node, w) or symmetric_weights(
                w, self.widths.weight(w_name, self.config["weights_bitwidth"]),
                axis if self.config["per_channel"] else None)
            bias = node.inputs[2] if len(node.inputs) > 2 else ""
            x = self.acts.get(node.inputs[0])
            if bias in weights and x is not None:
                encs, self.params[bias] = with_bias(encs, weights[bias], x.scale,
                                                    self.config["bias_bitwidth"])
            self.params[w_name] = encs
            return
        table = node.inputs[0] if block_input(node) == 0 else ""
        if table in weights and table not in self.params and weights[table].dtype.kind == "f":
            encs = self._blocks(node, weights[table])  # an embedding per row, by blocks
            if encs is not None:
                self.params[table] = encs
        for name in node.inputs:  # other constant operands: the range they hold
            if (name in weights and name not in self.params and name not in self.exact
                    and weights[name].dtype.kind == "f"):
                span = finite_range(weights[name])  # None: no finite value, stays float
                if span is not None:
                    self.params[name] = [asymmetric(*span, self.config["act_bitwidth"])]


def float_tensors(graph: Graph) -> set[str]:
    """The tensors some default-package node reads for their exact float values
    (FLOAT_INPUTS)."""
    return {node.inputs[i] for node in graph.nodes if node.package == DEFAULT_PACKAGE
            for i in FLOAT_INPUTS.get(node.op, ()) if i < len(node.inputs) and node.inputs[i]}


def one_grid(graph: Graph, consumers: Mapping[str, list[Node]] | None = None) -> dict[str, str]:
    """Tensors quantized straight onto their reader's output encoding: {tensor: that output}.

    A tensor whose only reader is a Relu or Clip, and that no activation absorbs (a Concat's,
    an AveragePool's output), takes the encoding of that reader's output (followed to the end
    of a chain). The reader still runs, on the same grid, and clamps as it would have: the
    values are those of rounding once instead of twice, on a grid that spends no codes below
    zero (ShuffleNet's Concat -> Relu spent half of them there). Graph outputs, and tensors that
    take their input's encoding (SHARES_ENCODING), keep their own. (A Concat's inputs could
    take its output's encoding too: that helped ShuffleNet, DenseNet and Inception, and cost
    SqueezeNet's softmax 2.4 dB, bench/RESULTS.md; left out.)"""
    consumers = graph.consumers() if consumers is None else consumers
    outputs = {t.name for t in graph.outputs}
    direct: dict[str, str] = {}
    for node in graph.nodes:
        if node.op in SHARES_ENCODING:
            continue
        for out in node.outputs:
            readers = consumers.get(out, [])
            if (not out or out in outputs or len(readers) != 1 or not readers[0].outputs
                    or _absorbed(graph, consumers, node, out)):
                continue
            if readers[0].op in ABSORBING and readers[0].outputs[0]:
                direct[out] = readers[0].outputs[0]
    found = {}
    for name, target in direct.items():
        while target in direct:
            target = direct[target]
        found[name] = target
    return found


def _calibrated_tensors(model: Model) -> list[str]:
    """The observed tensors whose statistics the chooser may read: all but those an activation
    absorbs (they get no encoding, so the session may fuse them away)."""
    consumers = model.graph.consumers()
    absorbed = {out for node in model.graph.nodes for out in node.outputs
                if out and _absorbed(model.graph, consumers, node, out)}
    return [name for name in observed_tensors(model) if name not in absorbed]


def _absorbed(graph: Graph, consumers: Mapping[str, list[Node]], node: Node, out: str) -> bool:
    """An output read only by the activation that absorbs it (no encoding of its own)."""
    readers = consumers.get(out, [])
    return (node.op in ABSORBED_PRODUCERS and len(readers) == 1 and readers[0].op in ABSORBING
            and out not in {t.name for t in graph.outputs})


def _channel_axis(node: Node, w: np.ndarray) -> int:
    """The axis of a weight that indexes output channels."""
    if node.op == "Conv":
        return 0
    if node.op == "Gemm":
        return 0 if node.attr("transB", 0) else w.ndim - 1
    return w.ndim - 1  # MatMul: (K, N)
