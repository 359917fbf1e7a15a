"""Lowering: the bundle's model (ONNX vocabulary, NCHW) -> the compiler graph in HTP form.

1. The requested outputs are resolved to tensor names (`resolve_outputs`): layers (every output
   of those nodes), tensors (by name), or the default (every output of the last layer); a name
   the model lacks is a UserError listing what it has. Nodes nothing requested needs are dropped.
2. Every tensor becomes 4-D: lower ranks get leading ones (ranks above 4 stay, until a rule
   removes them, as `channel_shuffle` does for ShuffleNet's 5-D shuffles).
3. Ops whose meaning depends on the channel axis (ops.SPATIAL) run channel-last: a Transpose to
   bhwc before and one back to the model's layout after, which the layout rules remove where
   they cancel. Axis attributes of Concat and Softmax move with the backfilled ranks; Reshape,
   Flatten, Squeeze and Unsqueeze become one Reshape to the 4-D target. Everything else,
   custom ops included, runs in the model's layout (`MODEL` ops, ops.py).
4. int8: tensors with an activation encoding are uint8 (uint16), weights with parameter
   encodings int8, and a Conv/Gemm/MatMul/Add output the quantized model never materializes
   (absorbed by its Relu/Clip, `QuantizedModel.absorbed`) is one op with that activation:
   this is the quantized model's meaning, not an optimization, so it happens at every level.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import UserError
from ..ir.graph import DEFAULT_PACKAGE, Model, Node, TensorInfo, needed_nodes
from ..ir.qmodel import QuantizedModel
from ..rewrite.graph import ANY, BHWC, MODEL, OpGraph, TType
from .ops import AXIS_OPS, BINARY, HTP, SPATIAL, TO_BHWC, TO_NCHW, UNARY, backfill

RESHAPES = ("Reshape", "Flatten", "Squeeze", "Unsqueeze")


@dataclass
class Lowered:
    graph: OpGraph
    outputs: dict[str, tuple[int, ...]]  # requested tensor -> its model shape
    inputs: dict[str, tuple[int, ...]]  # graph input -> its model shape
    notes: list[str] = field(default_factory=list)


def resolve_outputs(model: Model, spec: Any) -> list[str]:
    """The tensor names an outputs spec asks for ("default", {"layers": [...]},
    {"tensors": [...]}, or both lists)."""
    graph = model.graph
    by_layer = {n.name: [o for o in n.outputs if o] for n in graph.nodes}
    if spec in (None, "default", {}):
        if not graph.nodes:
            return [t.name for t in graph.outputs]
        return by_layer[graph.nodes[-1].name]
    tensors: list[str] = []
    for layer in spec.get("layers", ()):
        if layer not in by_layer:
            raise UserError(f"the model has no layer {layer!r}", field="outputs.layers",
                            hint="its layers: " + _listing(list(by_layer)))
        tensors += by_layer[layer]
    known = [t.name for t in graph.inputs if t.name not in model.weights]
    known += [o for outs in by_layer.values() for o in outs]
    known += [t.name for t in graph.outputs if t.name in model.weights]  # folded by the importer
    for name in spec.get("tensors", ()):
        if name not in known:
            raise UserError(f"the model has no tensor {name!r}", field="outputs.tensors",
                            hint="its tensors: " + _listing(known))
        tensors.append(name)
    return list(dict.fromkeys(tensors))


def _listing(names: list[str], limit: int = 30) -> str:
    more = len(names) - limit
    return ", ".join(names[:limit]) + (f" (and {more} more)" if more > 0 else "")


class Lowerer:
    def __init__(self, model: Model, infos: Mapping[str, TensorInfo],
                 qmodel: QuantizedModel | None, requested: Sequence[str]) -> None:
        self.model = model
        self.infos = infos
        self.q = qmodel
        self.requested = list(requested)
        self.graph = OpGraph(model.graph.name, HTP)
        self.vals: dict[str, int] = {}
        self.absorbed: dict[str, Node] = {}
        if qmodel is not None:
            readers = model.graph.consumers()
            self.absorbed = {t: readers[t][0] for t in qmodel.absorbed() if t not in requested}
        self.skipped = {n.name for n in self.absorbed.values()}
        self.read = {i for n in model.graph.nodes for i in n.inputs} | set(requested)

    # -- types ----------------------------------------------------------------------------------

    def ttype(self, name: str, shape: Sequence[int] | None = None) -> TType:
        info = self.infos[name]
        shape = backfill(info.static_shape if shape is None else shape)  # type: ignore[arg-type]
        enc = self.q.activations.get(name) if self.q is not None else None
        if enc is None:
            return TType(shape, info.dtype)
        from ..runtime.integer.fixed import qtype

        return TType(shape, qtype(enc).name, (enc,))

    def model_shape(self, name: str) -> tuple[int, ...]:
        if name in self.model.weights:
            return tuple(self.model.weights[name].shape)
        return tuple(self.infos[name].static_shape or ())

    def value(self, name: str, shaped: bool = False) -> int:
        """The value of a model tensor (a weight becomes a constant; `shaped`: 4-D)."""
        if name in self.vals:
            return self.vals[name]
        array = self.model.weights[name]
        if shaped:
            array = array.reshape(backfill(array.shape))
        encs = tuple(self.q.params.get(name, ())) if self.q is not None else ()
        dtype = None
        if encs:
            from ..runtime.integer.fixed import qtype

            dtype = qtype(encs[0]).name
        return self.graph.const(array, name, encs, dtype)

    # -- lowering -------------------------------------------------------------------------------

    def run(self) -> Lowered:
        g = self.graph
        for t in self.model.graph.inputs:
            if t.name not in self.model.weights:
                self.vals[t.name] = g.value(self.ttype(t.name), t.name)
                g.inputs.append(self.vals[t.name])
        for node in needed_nodes(self.model.graph.nodes, self.requested):
            if node.name in self.skipped:
                continue
            self.lower(node)
        # an output the importer folded to a weight (a Shape of a static shape) is a constant
        g.outputs = [(name, self.value(name, shaped=name in self.model.weights))
                     for name in self.requested]
        return Lowered(g, {n: self.model_shape(n) for n in self.requested},
                       {t.name: self.model_shape(t.name) for t in self.model.graph.inputs
                        if t.name not in self.model.weights})

    def lower(self, node: Node) -> None:
        activation = self._activation(node)
        rank = len(self.model_shape(node.inputs[0])) if node.inputs and node.inputs[0] else 0
        if node.package != DEFAULT_PACKAGE:
            self.wrapped(node, {})
        elif node.op in SPATIAL and rank == 4 and len([o for o in node.outputs if o]) == 1:
            self.spatial(node, activation)
        elif node.op in UNARY or node.op in BINARY or (
                node.op == "Dropout" and not self.read & set(node.outputs[1:])):
            self.elementwise(node, activation)
        elif node.op == "Transpose":
            perm = node.attr("perm") or list(reversed(range(rank)))
            k = max(4 - rank, 0)
            self.simple(node, "Transpose", {"perm": [*range(k), *(p + k for p in perm)]})
        elif node.op in RESHAPES and self.infos[node.outputs[0]].static_shape is not None:
            self.simple(node, "Reshape", {"shape": list(backfill(self.model_shape(
                node.outputs[0])))})
        elif node.op in AXIS_OPS and 0 < rank <= 4 and (node.op != "Concat"
                                                        or node.attr("axis") is not None):
            axis = int(node.attr("axis", -1)) % rank + 4 - rank
            self.simple(node, node.op, {**node.kwargs, "axis": axis},
                        inputs=len(node.inputs), shaped=True)
        else:
            self.wrapped(node, activation)

    def _activation(self, node: Node) -> dict[str, Any]:
        """The Relu/Clip that absorbs this node's output (int8), as attributes."""
        out = node.outputs[0] if node.outputs else ""
        reader = self.absorbed.get(out)
        if reader is None:
            return {}
        attrs: dict[str, Any] = {"activation": reader.op}
        if reader.op == "Clip":
            from .fusion_rules import finite

            attrs["clip"] = [finite(self.model.weights[n]) if n else None
                             for n in (*reader.inputs[1:3], "", "")[:2]]
        return attrs

    def _output(self, node: Node, activation: dict[str, Any]) -> str:
        return self.absorbed[node.outputs[0]].outputs[0] if activation else node.outputs[0]

    def spatial(self, node: Node, activation: dict[str, Any]) -> None:
        g = self.graph
        x = self.value(node.inputs[0])
        xt = g.add("Transpose", [x], [g.types[x].permuted(TO_BHWC)], {"perm": list(TO_BHWC)},
                   origin=node.name, names=[f"{node.inputs[0]}@bhwc"]).outputs[0]
        rest = [self.value(i) if i else -1 for i in node.inputs[1:]]
        while rest and rest[-1] == -1:
            rest.pop()
        out = self._output(node, activation)
        ttype = self.ttype(out)
        y = g.add(SPATIAL[node.op], [xt, *rest], [ttype.permuted(TO_BHWC)],
                  {**node.kwargs, **activation}, layout=BHWC, origin=node.name,
                  names=[f"{out}@bhwc"]).outputs[0]
        self.vals[out] = g.add("Transpose", [y], [ttype], {"perm": list(TO_NCHW)},
                               origin=node.name, names=[out]).outputs[0]

    def elementwise(self, node: Node, activation: dict[str, Any]) -> None:
        op = "Identity" if node.op == "Dropout" else node.op  # inference: its mask unread
        inputs = node.inputs[:1] if node.op == "Dropout" else node.inputs
        self.simple(node, op, {**({} if op == "Identity" else node.kwargs), **activation},
                    inputs=len(inputs), shaped=True, activation=activation)

    def simple(self, node: Node, op: str, attrs: dict[str, Any], inputs: int = 1,
               shaped: bool = False, activation: dict[str, Any] | None = None) -> None:
        g = self.graph
        ins = [self.value(i, shaped) if i else -1 for i in node.inputs[:inputs]]
        out = self._output(node, activation or {})
        self.vals[out] = g.add(op, ins, [self.ttype(out)], attrs, layout=ANY, origin=node.name,
                               names=[out]).outputs[0]

    def wrapped(self, node: Node, activation: dict[str, Any]) -> None:
        """An op in the model's layout and ranks: the executor reshapes around it."""
        g = self.graph
        ins = [self.value(i) if i else -1 for i in node.inputs]
        outs = [self._output(node, activation)] + list(node.outputs[1:])
        model = tuple(self.model_shape(i) if i else () for i in node.inputs) + tuple(
            self.model_shape(o) if o else () for o in outs)
        types = [self.ttype(o) if o else TType((0,), "float32") for o in outs]
        made = g.add(node.op, ins, types, {**node.kwargs, **activation},
                     package=node.package, layout=MODEL, model=model, origin=node.name,
                     names=[o or f"{node.name}:unused{i}" for i, o in enumerate(outs)])
        for name, vid in zip(outs, made.outputs, strict=True):
            if name:
                self.vals[name] = vid


def lower(model: Model, infos: Mapping[str, TensorInfo], requested: Sequence[str],
          qmodel: QuantizedModel | None = None) -> Lowered:
    return Lowerer(model, infos, qmodel, requested).run()
