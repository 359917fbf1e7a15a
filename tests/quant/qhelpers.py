"""Helpers of the integer-path and QDQ tests: small models and QuantizedModels whose encodings are
computed here, independently of the quantize pipeline: min/max of the float activations over a
few samples (`quantizers.asymmetric`), per-channel symmetric weights, biases with scale
s_x x s_w[c]; Conv/Gemm/MatMul/Add/Sum outputs read only by a Relu/Clip left unencoded (absorbed).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from udo_build.ir import Graph, Model, Node, TensorInfo
from udo_build.ir.encodings import Encoding
from udo_build.ir.qmodel import ABSORBED_PRODUCERS, ABSORBING, QuantizedModel
from udo_build.quant.quantizers import asymmetric, symmetric_weights
from udo_build.runtime.float_session import Session

SHARES = ("Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "MaxPool", "Identity",
          "Dropout")


def encode(model: Model, samples: Sequence[dict[str, np.ndarray]], *, act_bits: int = 8,
           weight_bits: int = 8, per_channel: bool = True, shared: bool = False,
           packages: dict[str, Any] | None = None,
           unencoded: Sequence[str] = ()) -> QuantizedModel:
    graph = model.graph
    names = [o for n in graph.nodes for o in n.outputs if o]
    session = Session(model, packages)
    lo: dict[str, float] = {}
    hi: dict[str, float] = {}
    for feed in samples:
        values = {**feed, **session.run(feed, names)}
        for name, v in values.items():
            if np.asarray(v).dtype.kind == "f":
                lo[name] = min(lo.get(name, np.inf), float(np.min(v)))
                hi[name] = max(hi.get(name, -np.inf), float(np.max(v)))
    activations = {}
    producers = graph.producers()
    for name in lo:
        node = producers.get(name)
        if name in unencoded or absorbed(graph, name):
            continue
        if shared and node is not None and node.op in SHARES and node.inputs[0] in activations:
            activations[name] = activations[node.inputs[0]]
        else:
            activations[name] = asymmetric(lo[name], hi[name], act_bits)
    params = weight_encodings(model, activations, weight_bits, per_channel)
    return QuantizedModel(model, activations, params, {"act_bitwidth": act_bits})


def absorbed(graph: Graph, name: str) -> bool:
    readers = graph.consumers().get(name, [])
    producer = graph.producers().get(name)
    outputs = {t.name for t in graph.outputs}
    return (producer is not None and producer.op in ABSORBED_PRODUCERS and len(readers) == 1
            and readers[0].op in ABSORBING and name not in outputs)


def weight_encodings(model: Model, activations: dict[str, Encoding], bits: int,
                     per_channel: bool) -> dict[str, list[Encoding]]:
    params: dict[str, list[Encoding]] = {}
    for node in model.graph.nodes:
        for i, name in enumerate(node.inputs):
            w = model.weights.get(name)
            if w is None or w.dtype.kind != "f" or name in params:
                continue
            if i == 1 and node.op in ("Conv", "Gemm", "MatMul"):
                axis = 0 if node.op == "Conv" or node.attr("transB", 0) else w.ndim - 1
                encs = symmetric_weights(w, bits, axis if per_channel else None)
                params[name] = encs
                bias = node.inputs[2] if len(node.inputs) > 2 else ""
                x = activations.get(node.inputs[0])
                if bias in model.weights and x is not None:
                    params[bias] = [Encoding(32, x.scale * e.scale, 0, signed=True)
                                    for e in encs]
            elif i != 2 or node.op not in ("Conv", "Gemm"):
                params[name] = [asymmetric(float(w.min()), float(w.max()), 8)]
    return params


def f32(name: str, shape: Sequence[int] | None = None) -> TensorInfo:
    return TensorInfo(name, "float32", None if shape is None else tuple(shape))


def single(op: str, inputs: Sequence[tuple[str, np.ndarray | None]],
           weights: dict[str, np.ndarray], attrs: dict[str, Any], then: str = "") -> Model:
    """A model of one `op` node reading `inputs` (name, sample; those not in `weights` are graph
    inputs; "" an omitted one), writing `y`, or `t` followed by the activation `then` ("Relu", or
    "Clip": Clip(0, 6)) writing `y`."""
    weights = dict(weights)
    names = [name for name, _ in inputs]
    nodes = [Node.make("op", op, names, ["t" if then else "y"], attrs)]
    if then:
        args = ["t"]
        if then == "Clip":
            weights["clip_lo"] = np.array(0.0, np.float32)
            weights["clip_hi"] = np.array(6.0, np.float32)
            args += ["clip_lo", "clip_hi"]
        nodes.append(Node.make("act", then, args, ["y"]))
    graph_inputs = tuple(f32(n, v.shape) for n, v in inputs
                         if n and n not in weights and v is not None)
    return Model(Graph("case", graph_inputs, (f32("y"),), tuple(nodes)), weights)
