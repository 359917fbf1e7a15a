"""Quantization preparation: the float graph the encodings are computed for.

As the vendor's converter does before quantizing: default-package nodes whose inputs are all
constants are computed once (constant folding), and batch norms and per-channel Mul/Add by
constants fold into the convolution that feeds them (or into a batch norm), so that no encoding
is spent on a tensor that the target never materializes. The result is a new Model in the ONNX
op vocabulary (a folded convolution stays a Conv, with new weights and bias); its outputs equal
the original's within float32 rounding. The folds are the rules every vocabulary shares
(`udo_build.rewrite.fold`), run by the one rewrite engine on the nodes in the model's layout.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..ir import Model, Node
from ..ir.weights import streams, weights_of
from ..kernels.default import DEFAULT
from ..rewrite.fold import ONNX, fold_rules
from ..rewrite.model import rewrite_nodes
from ..runtime.float_session import tensor_types
from ..runtime.fusion import fold_constants

FOLDING_RULES = fold_rules(ONNX)


def fold_for_quantization(model: Model) -> Model:
    """The model with constants folded and affines folded into convolutions and batch norms."""
    graph = model.graph
    nodes, made = fold_constants(graph.nodes, model.weights, _evaluate)
    constants = weights_of(model.weights, made)
    keep = [t.name for t in graph.outputs]
    nodes, used, _ = rewrite_nodes(nodes, constants, keep, tensor_types(graph.infos()),
                                   FOLDING_RULES)
    read = {i for n in nodes for i in n.inputs if i} | set(keep)
    # a model that streams its weights keeps them in their files: only what folding made is
    # held (udo_build.ir.weights)
    changed = {k: v for k, v in used.items() if k not in model.weights or k in made}
    weights = weights_of(model.weights, {**made, **changed}, read) if streams(model.weights) \
        else {k: v for k, v in {**constants, **used}.items() if k in read}
    produced = {o for n in nodes for o in n.outputs}
    values = tuple(v for v in graph.values if v.name in produced)
    return Model(replace(graph, nodes=tuple(nodes), values=values), weights)


def _evaluate(node: Node, inputs: list[Any]) -> tuple[np.ndarray, ...] | None:
    impl = DEFAULT.select(node.op, [a.dtype.name for a in inputs if a is not None])
    try:
        result = impl.fn(*inputs, **node.kwargs)
    except Exception:  # a node the kernels refuse on these constants: leave it to run later
        return None
    return result if isinstance(result, tuple) else (result,)

