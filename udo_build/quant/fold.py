"""Quantization preparation: the float graph the encodings are computed for.

As the vendor's converter does before quantizing: default-package nodes whose inputs are all
constants are computed once (constant folding), and batch norms and per-channel Mul/Add by
constants fold into the convolution that feeds them (or into a batch norm), so that no encoding
is spent on a tensor that the target never materializes. The result is a new Model in the ONNX
op vocabulary (a folded convolution stays a Conv, with new weights and bias); its outputs equal
the original's within float32 rounding.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..ir import Model, Node
from ..kernels.default import DEFAULT
from ..runtime.fusion import RULES, fold_constants, fuse

FOLDING_RULES = ("fold_batch_norm", "fold_scale", "fold_shift", "scale_batch_norm",
                 "shift_batch_norm")


def prepare(model: Model) -> Model:
    graph = model.graph
    nodes, made = fold_constants(graph.nodes, model.weights, _evaluate)
    constants = {**model.weights, **made}
    shapes = {name: info.static_shape for name, info in graph.infos().items()}
    keep = frozenset(t.name for t in graph.outputs)
    rules = [r for r in RULES if r.name in FOLDING_RULES]
    nodes, added, _ = fuse(nodes, constants, keep, shapes, rules)
    constants.update(added)
    nodes = [_as_conv(n) for n in nodes]
    used = {i for n in nodes for i in n.inputs if i} | keep
    weights = {k: v for k, v in constants.items() if k in used}
    produced = {o for n in nodes for o in n.outputs}
    values = tuple(v for v in graph.values if v.name in produced)
    return Model(replace(graph, nodes=tuple(nodes), values=values), weights)


def _as_conv(node: Node) -> Node:
    """A folded convolution (FusedConv without activation or addend) is a Conv again."""
    if node.op != "FusedConv":
        return node
    kwargs = dict(node.kwargs)
    if kwargs.pop("activation", "") or (len(node.inputs) > 3 and node.inputs[3]):
        raise AssertionError(f"quantization folding made a fused activation at {node.name}")
    return Node.make(node.name, "Conv", node.inputs[:3], node.outputs, kwargs)


def _evaluate(node: Node, inputs: list[Any]) -> tuple[np.ndarray, ...] | None:
    impl = DEFAULT.select(node.op, [a.dtype.name for a in inputs if a is not None])
    try:
        result = impl.fn(*inputs, **node.kwargs)
    except Exception:  # a node the kernels refuse on these constants: leave it to run later
        return None
    return result if isinstance(result, tuple) else (result,)

