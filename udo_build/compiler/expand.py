"""Each HTP op as the ONNX-vocabulary kernel calls that compute it (its implementation in the
emulator), and the whole prepared graph as a runnable model.

- a BHWC op: its data input transposed to NCHW, the ONNX op (Conv2d -> Conv, ...), a fused
  activation (Relu, or Clip with its bounds as constants) on the result, and the result
  transposed back to bhwc;
- an ANY op: the ONNX op itself on the 4-D tensors (Reshape and Slice with their shapes and
  bounds as int64 constants; ChannelShuffle as Reshape, Transpose, Reshape);
- a MODEL op: inputs reshaped to the model's shapes, the op (a custom op runs its package's
  kernel), outputs reshaped back to 4-D.

For an int8 graph every tensor of the expansion has the encoding of the value it carries, and
the result before a fused activation has none: the integer path then absorbs the activation
into the op's requantization exactly as it does in the unprepared quantized model.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ir.encodings import Encoding
from ..ir.graph import Graph as IrGraph
from ..ir.graph import Model, Node, TensorInfo
from ..rewrite.graph import BHWC, MODEL, NONE, Op, OpGraph, TType
from .ops import ONNX_OF, TO_BHWC, TO_NCHW

HTP_ATTRS = ("activation", "clip")


@dataclass
class Expanded:
    nodes: list[Node] = field(default_factory=list)
    weights: dict[str, np.ndarray] = field(default_factory=dict)
    infos: dict[str, TensorInfo] = field(default_factory=dict)
    activations: dict[str, Encoding] = field(default_factory=dict)
    params: dict[str, list[Encoding]] = field(default_factory=dict)


class Expander:
    def __init__(self, graph: OpGraph) -> None:
        self.g = graph
        self.out = Expanded()

    def name(self, vid: int) -> str:
        if vid == NONE:
            return ""
        name = self.g.names[vid]
        if vid in self.g.consts and name not in self.out.weights:
            t = self.g.types[vid]
            self.out.weights[name] = self.g.consts[vid]
            if t.enc:
                self.out.params[name] = list(t.enc)
        elif vid not in self.g.consts:
            self.tensor(name, self.g.types[vid])
        return name

    def tensor(self, name: str, t: TType, enc: bool = True) -> str:
        dtype = "float32" if t.enc else t.dtype
        self.out.infos[name] = TensorInfo(name, dtype, tuple(t.shape))
        if enc and len(t.enc) == 1 and not t.enc[0].signed:
            self.out.activations[name] = t.enc[0]
        return name

    def const(self, name: str, array: np.ndarray) -> str:
        self.out.weights[name] = array
        return name

    def node(self, label: str, op: str, inputs: list[str], outputs: list[str],
             attrs: dict[str, Any] | None = None, package: str = "default") -> None:
        self.out.nodes.append(Node.make(label, op, inputs, outputs, attrs, package))

    # -- ops -------------------------------------------------------------------------------------

    def emit(self, op: Op) -> None:
        ins = [self.name(v) for v in op.inputs]
        outs = [self.name(v) for v in op.outputs]
        if op.layout == BHWC:
            self._bhwc(op, ins, outs)
        elif op.layout == MODEL:
            self._model(op, ins, outs)
        elif op.op == "Reshape":
            shape = self.const(f"op{op.id}.shape", np.array(op.attr("shape"), np.int64))
            self.node(f"op{op.id}", "Reshape", [ins[0], shape], outs)
        elif op.op == "Slice":
            self._slice(op, ins, outs)
        elif op.op == "ChannelShuffle":
            self._shuffle(op, ins, outs)
        else:
            self._main(op, op.op, ins, outs[0], op.kwargs, outs[1:])

    def _main(self, op: Op, onnx: str, ins: list[str], out: str, attrs: dict[str, Any],
              more: list[str] = (), out_type: TType | None = None) -> None:  # type: ignore
        """The op's kernel, then its fused activation, writing `out`."""
        activation = attrs.pop("activation", "")
        bounds = attrs.pop("clip", None)
        if not activation:
            self.node(f"op{op.id}", onnx, ins, [out, *more], attrs, op.package)
            return
        raw = f"{out}@raw"
        t = out_type or self.g.types[op.outputs[0]]
        self.tensor(raw, TType(t.shape, "float32" if t.enc else t.dtype), enc=False)
        self.node(f"op{op.id}", onnx, ins, [raw, *more], attrs, op.package)
        act_ins = [raw]
        if activation == "Clip":
            for k, bound in enumerate(bounds or (None, None)):
                act_ins.append("" if bound is None else self.const(
                    f"op{op.id}.clip{k}", np.array(bound, np.float32)))
        self.node(f"op{op.id}.act", activation, act_ins, [out])

    def _bhwc(self, op: Op, ins: list[str], outs: list[str]) -> None:
        x = self.g.types[op.inputs[0]]
        y = self.g.types[op.outputs[0]]
        x_nchw = self.tensor(f"{ins[0]}@nchw{op.id}", x.permuted(TO_NCHW))
        self.node(f"op{op.id}.in", "Transpose", [ins[0]], [x_nchw], {"perm": list(TO_NCHW)})
        y_nchw = self.tensor(f"{outs[0]}@nchw", y.permuted(TO_NCHW))
        self._main(op, ONNX_OF[op.op], [x_nchw, *ins[1:]], y_nchw, op.kwargs,
                   out_type=y.permuted(TO_NCHW))
        self.node(f"op{op.id}.out", "Transpose", [y_nchw], [outs[0]], {"perm": list(TO_BHWC)})

    def _model(self, op: Op, ins: list[str], outs: list[str]) -> None:
        n = len(op.inputs)
        shaped = []
        for k, (vid, name) in enumerate(zip(op.inputs, ins, strict=True)):
            shaped.append(self._reshaped(op, vid, name, op.model[k], f"in{k}"))
        results = []
        for k, vid in enumerate(op.outputs):
            t = self.g.types[vid]
            model = op.model[n + k]
            unused = ":unused" in self.g.names[vid]
            results.append("" if unused else outs[k] if tuple(model) == t.shape else
                           self.tensor(f"{outs[k]}@model", t.with_shape(model)))
        out_type = self.g.types[op.outputs[0]].with_shape(op.model[n])
        self._main(op, op.op, shaped, results[0], op.kwargs, results[1:], out_type)
        for k, (vid, name) in enumerate(zip(op.outputs, results, strict=True)):
            if name and name != outs[k]:
                shape = self.const(f"op{op.id}.out{k}", np.array(self.g.types[vid].shape,
                                                                 np.int64))
                self.node(f"op{op.id}.out{k}", "Reshape", [name, shape], [outs[k]])

    def _reshaped(self, op: Op, vid: int, name: str, model: tuple[int, ...], tag: str) -> str:
        if vid == NONE or vid in self.g.consts or tuple(model) == self.g.types[vid].shape:
            if vid in self.g.consts and tuple(model) != self.g.types[vid].shape:
                out = self.const(f"{name}@{tag}.{op.id}", self.g.consts[vid].reshape(model))
                if self.g.types[vid].enc:
                    self.out.params[out] = list(self.g.types[vid].enc)
                return out
            return name
        t = self.g.types[vid]
        out = self.tensor(f"{name}@{tag}.{op.id}", t.with_shape(model))
        shape = self.const(f"op{op.id}.{tag}", np.array(model, np.int64))
        self.node(f"op{op.id}.{tag}", "Reshape", [name, shape], [out])
        return out

    def _slice(self, op: Op, ins: list[str], outs: list[str]) -> None:
        starts, ends = op.attr("starts"), op.attr("ends")
        axes = [a for a, (s, e) in enumerate(zip(starts, ends, strict=True))]
        names = [self.const(f"op{op.id}.{k}", np.array(v, np.int64))
                 for k, v in (("starts", starts), ("ends", ends), ("axes", axes))]
        self.node(f"op{op.id}", "Slice", [ins[0], *names], outs)

    def _shuffle(self, op: Op, ins: list[str], outs: list[str]) -> None:
        t = self.g.types[op.inputs[0]]
        axis, groups = int(op.attr("axis")), int(op.attr("groups"))
        split = t.shape[:axis] + (groups, t.shape[axis] // groups) + t.shape[axis + 1:]
        perm = list(range(len(split)))
        perm[axis], perm[axis + 1] = axis + 1, axis
        a = self.tensor(f"{outs[0]}@split", t.with_shape(split))
        b = self.tensor(f"{outs[0]}@swap", t.with_shape([split[p] for p in perm]))
        s1 = self.const(f"op{op.id}.split", np.array(split, np.int64))
        s2 = self.const(f"op{op.id}.join", np.array(t.shape, np.int64))
        self.node(f"op{op.id}.split", "Reshape", [ins[0], s1], [a])
        self.node(f"op{op.id}", "Transpose", [a], [b], {"perm": perm})
        self.node(f"op{op.id}.join", "Reshape", [b, s2], outs)


def expand(graph: OpGraph, outputs: list[str]) -> tuple[Model, Expanded]:
    """The prepared graph as a model of ONNX-vocabulary nodes (outputs: value names)."""
    ex = Expander(graph)
    inputs = [TensorInfo(graph.names[v], *_info(graph.types[v])) for v in graph.inputs]
    for vid in graph.inputs:
        ex.name(vid)
    for op in graph.order():
        ex.emit(op)
    outs = [ex.out.infos.get(n) or TensorInfo(n, "float32", None) for n in outputs]
    values = tuple(i for n, i in sorted(ex.out.infos.items()))
    ir = IrGraph(graph.name, tuple(inputs), tuple(outs), tuple(ex.out.nodes), values)
    return Model(ir, ex.out.weights), ex.out


def _info(t: TType) -> tuple[str, tuple[int, ...]]:
    return ("float32" if t.enc else t.dtype), tuple(t.shape)
