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
into the op's requantization exactly as it does in the unprepared quantized model. A record's
quantized constants come as the integers it stores; `param_axes` says along which axis of its
own shape each per-channel constant is quantized (the axis the integer path's kernel calls
index, `registry.channel_axis`).

With `fp16` (an fp16 record, see execute.Runner), float constants are rounded to float16 and
every float output of an op is rounded to float16 after the op's last kernel call (a Cast to
float16 and one back to float32): the kernels compute in float32 between.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ir.encodings import Encoding
from ..ir.graph import Graph as IrGraph
from ..ir.graph import Model, Node, TensorInfo
from ..rewrite.graph import BHWC, MODEL, NONE, Op, OpGraph, TType
from .ops import ONNX_OF, TO_BHWC, TO_NCHW

HTP_ATTRS = ("activation", "clip")
FLOAT16, FLOAT = 10, 1  # ONNX element types (Cast's `to`)


@dataclass
class Expanded:
    nodes: list[Node] = field(default_factory=list)
    weights: dict[str, np.ndarray] = field(default_factory=dict)
    infos: dict[str, TensorInfo] = field(default_factory=dict)
    activations: dict[str, Encoding] = field(default_factory=dict)
    params: dict[str, list[Encoding]] = field(default_factory=dict)
    sources: dict[str, int] = field(default_factory=dict)  # weight -> the constant it holds


class Expander:
    def __init__(self, graph: OpGraph, fp16: bool = False) -> None:
        self.g = graph
        self.fp16 = fp16
        self.out = Expanded()

    def name(self, vid: int) -> str:
        if vid == NONE:
            return ""
        name = self.g.names[vid]
        if vid in self.g.consts and name not in self.out.weights:
            t = self.g.types[vid]
            self.out.weights[name] = self._float(self.g.consts[vid], t)
            self.out.sources[name] = vid
            if t.enc:
                self.out.params[name] = list(t.enc)
        elif vid not in self.g.consts:
            self.tensor(name, self.g.types[vid])
        return name

    def _float(self, array: np.ndarray, t: TType) -> np.ndarray:
        """A float constant as the kernels take it: float32 (a record's fp16 constants are
        widened), rounded to float16 first with `fp16`."""
        if t.dtype != "float32" or t.enc or array.dtype.kind != "f":
            return array
        if self.fp16 and array.dtype != np.float16:
            array = array.astype(np.float16)
        return array.astype(np.float32, copy=False)

    def tensor(self, name: str, t: TType, enc: bool = True) -> str:
        dtype = "float32" if t.enc else t.dtype
        self.out.infos[name] = TensorInfo(name, dtype, tuple(t.shape))
        if enc and len(t.enc) == 1 and not t.enc[0].signed:
            self.out.activations[name] = t.enc[0]
        return name

    def const(self, name: str, array: np.ndarray) -> str:
        if self.fp16 and array.dtype == np.float32:
            array = array.astype(np.float16).astype(np.float32)
        self.out.weights[name] = array
        return name

    def node(self, label: str, op: str, inputs: list[str], outputs: list[str],
             attrs: dict[str, Any] | None = None, package: str = "default") -> None:
        self.out.nodes.append(Node.make(label, op, inputs, outputs, attrs, package))

    def reshape(self, label: str, x: str, shape: Sequence[int], out: str) -> str:
        """`x` reshaped to exactly `shape` (allowzero: a 0 is a dimension of size 0, never
        ONNX's "copy the input's dimension"), written to `out`."""
        dims = self.const(f"{label}.shape", np.array(list(shape), np.int64).reshape(-1))
        self.node(label, "Reshape", [x, dims], [out], {"allowzero": 1})
        return out

    # -- ops -------------------------------------------------------------------------------------

    def emit(self, op: Op) -> None:
        ins = [self.name(v) for v in op.inputs]
        names = [self.name(v) for v in op.outputs]
        rounded = self._rounded(op) if self.fp16 else []
        exact = {name: f"{name}@fp32" for _, name in rounded}
        self._emit(op, ins, [exact.get(name, name) for name in names])
        for k, (t, name) in enumerate(rounded):
            half = self.tensor(f"{name}@fp16", TType(t.shape, "float16"))
            self.node(f"op{op.id}.fp16.{k}", "Cast", [exact[name]], [half], {"to": FLOAT16})
            self.node(f"op{op.id}.fp32.{k}", "Cast", [half], [name], {"to": FLOAT})

    def _rounded(self, op: Op) -> list[tuple[TType, str]]:
        """The op's float outputs (their kernels write them as `<name>@fp32`)."""
        out = []
        for vid in op.outputs:
            t, name = self.g.types[vid], self.g.names[vid]
            if t.dtype == "float32" and ":unused" not in name:
                self.tensor(f"{name}@fp32", t)
                out.append((t, name))
        return out

    def _emit(self, op: Op, ins: list[str], outs: list[str]) -> None:
        if op.layout == BHWC:
            self._bhwc(op, ins, outs)
        elif op.layout == MODEL:
            self._model(op, ins, outs)
        elif op.op == "Reshape":
            self.reshape(f"op{op.id}", ins[0], op.attr("shape"), outs[0])
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
                self.reshape(f"op{op.id}.out{k}", name, self.g.types[vid].shape, outs[k])

    def _reshaped(self, op: Op, vid: int, name: str, model: tuple[int, ...], tag: str) -> str:
        if vid == NONE or vid in self.g.consts or tuple(model) == self.g.types[vid].shape:
            if vid in self.g.consts and tuple(model) != self.g.types[vid].shape:
                out = self.const(f"{name}@{tag}.{op.id}", self.out.weights[name].reshape(model))
                self.out.sources[out] = vid
                if self.g.types[vid].enc:
                    self.out.params[out] = list(self.g.types[vid].enc)
                return out
            return name
        t = self.g.types[vid]
        out = self.tensor(f"{name}@{tag}.{op.id}", t.with_shape(model))
        return self.reshape(f"op{op.id}.{tag}", name, model, out)

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
        self.reshape(f"op{op.id}.split", ins[0], split, a)
        self.node(f"op{op.id}", "Transpose", [a], [b], {"perm": perm})
        self.reshape(f"op{op.id}.join", b, t.shape, outs[0])


def expand(graph: OpGraph, outputs: list[str], fp16: bool = False) -> tuple[Model, Expanded]:
    """The prepared graph as a model of ONNX-vocabulary nodes (outputs: value names; `fp16`:
    rounded as the module docstring says)."""
    ex = Expander(graph, fp16)
    inputs = [TensorInfo(graph.names[v], *_info(graph.types[v])) for v in graph.inputs]
    for vid in [*graph.inputs, *(v for _, v in graph.outputs)]:
        ex.name(vid)  # (an output may be a constant no op reads)
    for op in graph.order():
        ex.emit(op)
    outs = [ex.out.infos.get(n) or TensorInfo(n, "float32", None) for n in outputs]
    values = tuple(i for n, i in sorted(ex.out.infos.items()))
    ir = IrGraph(graph.name, tuple(inputs), tuple(outs), tuple(ex.out.nodes), values)
    return Model(ir, ex.out.weights), ex.out


def _info(t: TType) -> tuple[str, tuple[int, ...]]:
    return ("float32" if t.enc else t.dtype), tuple(t.shape)


def param_axes(graph: OpGraph) -> dict[int, int | None]:
    """Each constant with per-channel encodings -> the axis of its own shape they index, as the
    integer path quantizes it (None: its readers disagree, or none says)."""
    from ..runtime.integer.registry import channel_axis

    if not any(len(graph.types[v].enc) > 1 for v in graph.consts):
        return {}
    _, ex = expand(graph, [graph.names[v] for _, v in graph.outputs])
    axes: dict[int, set[int | None]] = {}
    for node in ex.nodes:
        for i, name in enumerate(node.inputs):
            vid = ex.sources.get(name)
            if vid is None or len(graph.types[vid].enc) < 2:
                continue
            shape = ex.weights[name].shape
            axis = channel_axis(node, i, len(shape), len(graph.types[vid].enc), shape)
            axes.setdefault(vid, set()).add(_axis_in(graph.consts[vid].shape, shape, axis))
    return {vid: next(iter(found)) if len(found) == 1 else None for vid, found in axes.items()}


def _axis_in(own: tuple[int, ...], shape: tuple[int, ...], axis: int) -> int | None:
    """The axis of `own` that is `axis` of the same array reshaped to `shape` (same length and
    as many elements after it), if any."""
    inner = int(np.prod(shape[axis + 1:], dtype=np.int64))
    for k, n in enumerate(own):
        if n == shape[axis] and int(np.prod(own[k + 1:], dtype=np.int64)) == inner:
            return k
    return None
