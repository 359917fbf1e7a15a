"""What `udo-build info` tells about a bundle, as the vendor's dlc-info does: the layers (id,
name, type, inputs, outputs, output dims, parameters), the inputs with dims and types, the total
number of parameters and of multiply-accumulates, the UDOs used, the cache records, and (for a
quantized bundle) each tensor's encoding; and the partition: the subnets the HTP and CPU
runtimes run (udo_build.compiler.partition, for the graph's outputs under the runtime choices
a deployable bundle keeps), each with its runtime, nodes and boundary tensors."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from ..ir import DEFAULT_PACKAGE, Node, TensorInfo
from ..ir.bundle import Bundle
from ..ir.encodings import Encoding, aimet_offset
from ..ir.graph import bulk_building
from ..ir.qmodel import ENCODINGS_PART, from_bundle


def describe(bundle: Bundle) -> dict[str, Any]:
    with bulk_building():
        return _describe(bundle)


def _describe(bundle: Bundle) -> dict[str, Any]:
    graph = bundle.model.graph
    infos = graph.infos()
    weights = bundle.model.weights
    layers = []
    for i, node in enumerate(graph.nodes):
        layers.append({
            "id": i, "name": node.name,
            "type": node.op if node.package == DEFAULT_PACKAGE else f"{node.package}::{node.op}",
            "inputs": [x for x in node.inputs if x],
            "outputs": list(node.outputs),
            "output_dims": [_dims(infos.get(o)) for o in node.outputs],
            "parameters": node.kwargs,
            "macs": macs(node, infos, weights),
        })
    udos = sorted({f"{n.package}::{n.op}" for n in graph.nodes if n.package != DEFAULT_PACKAGE})
    return {
        "name": graph.name,
        "producer": bundle.meta.get("producer"),
        "inputs": [{"name": t.name, "dims": _dims(t), "type": t.dtype} for t in graph.inputs],
        "outputs": [{"name": t.name, "dims": _dims(t), "type": t.dtype} for t in graph.outputs],
        "layers": layers,
        "total_parameters": int(sum(a.size for a in weights.values())),
        "total_macs": int(sum(layer["macs"] for layer in layers)),
        "udos": udos,
        "records": bundle.meta.get("records", []),
        "parts": sorted(bundle.parts),
        "encodings": encodings(bundle),
        "partition": partition_of(bundle),
    }


def partition_of(bundle: Bundle) -> dict[str, Any]:
    """The subnets of the graph's outputs (see udo_build.compiler.partition); a node that may
    run nowhere gives {"error": why} instead."""
    from ..compiler.partition import RuntimeChoices, node_runtimes, partition
    from ..errors import UserError

    model = bundle.model
    choices = RuntimeChoices.from_json(bundle.meta.get("runtimes"))
    try:
        allowed = node_runtimes(model, bundle.opdefs, choices)
    except UserError as exc:
        return {"error": str(exc)}
    found = partition(model, allowed, [t.name for t in model.graph.outputs])
    return found.to_json()


def encodings(bundle: Bundle) -> list[dict[str, Any]]:
    """One row per encoded tensor (activations, then parameters, each by name): bit width,
    signedness, channels, the scale (the smallest and largest of the channels'), the offset as
    the encodings file writes it (None when the channels differ) and the real range; [] for a
    float bundle."""
    if ENCODINGS_PART not in bundle.parts:
        return []
    qmodel = from_bundle(bundle)
    rows = [_encoding_row(n, "activation", [e]) for n, e in sorted(qmodel.activations.items())]
    rows += [_encoding_row(n, "parameter", list(e)) for n, e in sorted(qmodel.params.items())]
    return rows


def _encoding_row(name: str, kind: str, encs: list[Encoding]) -> dict[str, Any]:
    offsets = {aimet_offset(e) for e in encs}
    return {"tensor": name, "kind": kind, "bitwidth": encs[0].bitwidth,
            "signed": encs[0].signed, "channels": len(encs),
            "scale": [min(e.scale for e in encs), max(e.scale for e in encs)],
            "offset": offsets.pop() if len(offsets) == 1 else None,
            "range": [min(e.min for e in encs), max(e.max for e in encs)]}


def _dims(info: Any) -> list[Any] | None:
    return None if info is None or info.shape is None else list(info.shape)


def _shape(name: str, infos: Mapping[str, TensorInfo], weights: Any) -> tuple[int, ...] | None:
    if name in weights:
        return tuple(weights[name].shape)
    info = infos.get(name)
    return info.static_shape if info is not None else None


def macs(node: Node, infos: Mapping[str, TensorInfo], weights: Any) -> int:
    """Multiply-accumulates of a conv, gemm or matmul node (0 for others or unknown shapes);
    `infos` is the graph's `infos()`, computed once for all its nodes."""
    out = _shape(node.outputs[0], infos, weights) if node.outputs else None
    if out is None:
        return 0
    if node.op in ("Conv", "ConvTranspose") and len(node.inputs) > 1:
        w = _shape(node.inputs[1], infos, weights)
        x = _shape(node.inputs[0], infos, weights)
        if w is None or x is None:
            return 0
        # Conv: each output element sums Cin/group x kernel products; ConvTranspose: each input
        # element is spread over Cout/group x kernel outputs
        return math.prod(out) * math.prod(w[1:]) if node.op == "Conv" \
            else math.prod(x) * math.prod(w[1:])
    if node.op in ("Gemm", "MatMul") and node.inputs:
        a = _shape(node.inputs[0], infos, weights)
        if a is None:
            return 0
        if not a:
            return 0
        k = a[0] if node.op == "Gemm" and node.attr("transA", 0) else a[-1]
        return math.prod(out) * k
    return 0
