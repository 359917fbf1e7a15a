"""Shapes past the custom ops: what ONNX's shape inference cannot know, the compiler's can.

ONNX infers no shape for a node of a custom domain, so every tensor after the first custom op
of an imported model is left without one, unless the exporter recorded it (and only at the
model's own input dimensions: an override drops those records). `complete_shapes` fills the
gaps with udo_build.compiler.shapes, which knows the standard ops and takes a custom op's output
shapes from its kernels run on zeros (when given) or, without kernels, from the exporter's
record at the model's own dimensions (equal input shapes: the recorded ones; a custom op that
kept its input's shape there keeps it at the new dimensions). Known shapes are kept as they
are, and only the tensors at or after a custom op are filled (a gap ONNX leaves elsewhere is a
shape that depends on the data); a gap that cannot be filled stays a gap (the bundle then says
"?" there, as before).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

from ..errors import UserError
from ..ir import DEFAULT_PACKAGE, Model, TensorInfo
from ..kernels.oppkg import OpPackage

Evidence = Callable[[], "Mapping[str, TensorInfo] | None"]


def complete_shapes(model: Model, evidence: Evidence,
                    packages: Mapping[str, OpPackage] | None = None) -> Model:
    """`model` with every tensor's static shape that can be inferred; `evidence()` gives the
    tensor infos at the model's own dimensions (None: the graph's own are those)."""
    from ..compiler.shapes import infer

    graph = model.graph
    infos = graph.infos()
    after = _after_custom(model)
    produced = [o for n in graph.nodes for o in n.outputs if o in after]
    if all(o in infos and infos[o].static_shape is not None for o in produced):
        return model  # (a gap ONNX left elsewhere is a shape that depends on data: it stays)
    dims = {t.name: t.static_shape for t in graph.inputs if t.name not in model.weights}
    if any(d is None for d in dims.values()):
        return model  # symbolic input dimensions: nothing to infer from
    try:
        found = infer(model, dims, packages, evidence=evidence()).infos
    except UserError:
        return model  # a custom op whose shapes nothing tells: the gap stays
    found = {k: v for k, v in found.items() if k in after}
    outputs = tuple(_filled(t, found) for t in graph.outputs)
    values = {t.name: _filled(t, found) for t in graph.values}
    named = {t.name for t in outputs}
    for name in produced:
        if name not in named and name not in values and name in found:
            values[name] = found[name]
    return Model(replace(graph, outputs=outputs, values=tuple(values[k] for k in sorted(values))),
                 model.weights)


def _after_custom(model: Model) -> set[str]:
    """The tensors a custom op computes, or that depend on one."""
    after: set[str] = set()
    for node in model.graph.nodes:  # in topological order
        if node.package != DEFAULT_PACKAGE or any(i in after for i in node.inputs):
            after.update(o for o in node.outputs if o)
    return after


def _filled(info: TensorInfo, found: Mapping[str, TensorInfo]) -> TensorInfo:
    known = found.get(info.name)
    if info.static_shape is not None or known is None:
        return info
    return TensorInfo(info.name, info.dtype, known.static_shape)
