"""Folding rules, one definition for every op vocabulary: a per-channel affine (a batch norm in
inference mode, a Mul or an Add by a per-channel constant) folds into the convolution that
feeds it, or into the batch norm that feeds it.

    rules = fold_rules(ONNX)      # the model's ops, channels on axis 1 (runtime, quantization)
    rules = fold_rules(HTP)       # the compiler's lowered ops, channels last (compiler/ops.py)

- fold_batch_norm: BN(Conv(x, w, b)) -> Conv(x, w * m, b * m + a), m and a the batch norm's
  per-channel multiplier and addend;
- fold_scale / fold_bias (and their `_first` forms, the constant first): Conv * c and Conv + c
  for a per-channel (or one-element) constant c;
- batch_norm_scale / batch_norm_shift (and `_first`): BN * c and BN + c -> one batch norm
  (DenseNet, Inception v2 scale and shift their batch norms' outputs).

The replacements are values: `IntoConv(scale, shift)` is the captured convolution again with the
affine folded into its weights and bias, `IntoBatchNorm(scale, shift)` the captured batch norm
with it folded into its scale and bias; the factors are `BatchNormScale()`, `BatchNormShift()`
(of the root batch norm) and `PerChannel("c")` (a constant broadcast along the channel axis).
Factors are computed in float64; the weights are scaled once in float32 (w * float32(m)): the
results differ from the unfolded graph by float32 rounding only. A folded op keeps the layer of
the op it rebuilds (its origin); its new constants are named after it (`conv::w`, `conv::b`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .replace import Builder
from .rules import MIDDLE, All, AttrOf, Check, Const, Eq, Match, OneUse, Op, Rule


@dataclass(frozen=True)
class Vocabulary:
    """The op names the folds speak, and where activations keep their channels (weights are
    OIHW in every vocabulary)."""

    name: str
    conv: str
    batch_norm: str
    channel_axis: int  # 1: NCHW; -1: channel last
    add: tuple[str, ...] = ("Add", "Sum")
    mul: tuple[str, ...] = ("Mul",)


ONNX = Vocabulary("onnx", "Conv", "BatchNormalization", 1)


def channel_vector(value: np.ndarray | None, channels: int, rank: int,
                   axis: int) -> np.ndarray | None:
    """A float constant as one float64 value per channel, if it broadcasts over a tensor of this
    rank along `axis` only (or is one element)."""
    if value is None or value.dtype.kind != "f" or value.ndim > rank:
        return None
    shape = (1,) * (rank - value.ndim) + value.shape
    axis %= rank
    if any(d != 1 for i, d in enumerate(shape) if i != axis) or shape[axis] not in (1, channels):
        return None
    return np.broadcast_to(value.astype(np.float64).reshape(-1), (channels,))


# -- factors: one float64 value per channel, or None (the replacement declines) --------------


@dataclass(frozen=True)
class PerChannel:
    """The constant capture `name` as a per-channel vector."""

    name: str

    def vector(self, m: Match, channels: int, rank: int, axis: int) -> np.ndarray | None:
        if m.type(self.name).enc:
            return None
        return channel_vector(m.const(self.name), channels, rank, axis)


@dataclass(frozen=True)
class BatchNormScale:
    """The root batch norm's multiplier s / sqrt(var + epsilon) (captures "s", "var")."""

    def vector(self, m: Match, channels: int, rank: int, axis: int) -> np.ndarray | None:
        s, var = (m.const(n).astype(np.float64) for n in ("s", "var"))  # type: ignore[union-attr]
        return s / np.sqrt(var + float(m.attr("*", "epsilon", 1e-5)))


@dataclass(frozen=True)
class BatchNormShift:
    """The root batch norm's addend b - mean * multiplier (captures "b", "mean")."""

    def vector(self, m: Match, channels: int, rank: int, axis: int) -> np.ndarray | None:
        b, mean = (m.const(n).astype(np.float64) for n in ("b", "mean"))  # type: ignore
        return b - mean * BatchNormScale().vector(m, channels, rank, axis)  # type: ignore


Factor = PerChannel | BatchNormScale | BatchNormShift


def _factors(scale: Factor | None, shift: Factor | None, m: Match, channels: int, rank: int,
             axis: int) -> tuple[np.ndarray, np.ndarray] | None:
    s = np.ones(channels) if scale is None else scale.vector(m, channels, rank, axis)
    a = np.zeros(channels) if shift is None else shift.vector(m, channels, rank, axis)
    return None if s is None or a is None else (s, a)


# -- replacements ------------------------------------------------------------------------------


@dataclass(frozen=True)
class IntoConv:
    """The convolution captured as "conv" (inputs x, w[, b]) with y -> y * scale + shift folded
    in: weights w * scale, bias b * scale + shift; typed as the root."""

    scale: Factor | None
    shift: Factor | None
    axis: int

    def build(self, m: Match, b: Builder) -> int | None:
        conv = m.op("conv")
        w: np.ndarray = m.graph.consts[m.value("w")]
        bias = m.graph.consts.get(conv.inputs[2]) if len(conv.inputs) > 2 else None
        parts = _factors(self.scale, self.shift, m, w.shape[0], w.ndim, self.axis)
        if parts is None:
            return None
        scale, shift = parts
        new_bias = (np.zeros(w.shape[0]) if bias is None else bias.astype(np.float64)) * scale \
            + shift
        weights = w * scale.astype(np.float32).reshape((-1,) + (1,) * (w.ndim - 1))
        inputs = [conv.inputs[0], b.const(weights.astype(np.float32), name=f"{conv.origin}::w"),
                  b.const(new_bias.astype(np.float32), name=f"{conv.origin}::b")]
        return b.op(conv.op, inputs, [m.type("*")], conv.kwargs, package=conv.package,
                    layout=conv.layout, origin=conv.origin).outputs[0]


@dataclass(frozen=True)
class IntoBatchNorm:
    """The batch norm captured as "bn" with y -> y * scale + shift folded into its scale and
    bias; typed as the root. Its output must have a static shape (the channel count)."""

    scale: Factor | None
    shift: Factor | None
    axis: int

    def build(self, m: Match, b: Builder) -> int | None:
        bn = m.op("bn")
        shape = m.shape("bn")
        parts = _factors(self.scale, self.shift, m, shape[self.axis], len(shape), self.axis)
        if parts is None:
            return None
        factor, addend = parts
        s, shift = (m.const(n).astype(np.float64) for n in ("s", "b"))  # type: ignore[union-attr]
        inputs = [bn.inputs[0],
                  b.const((s * factor).astype(np.float32), name=f"{bn.origin}::scale"),
                  b.const((shift * factor + addend).astype(np.float32), name=f"{bn.origin}::B"),
                  *bn.inputs[3:]]
        return b.op(bn.op, inputs, [m.type("*")], bn.kwargs, package=bn.package,
                    layout=bn.layout, origin=bn.origin).outputs[0]


# -- constraints -------------------------------------------------------------------------------


def F32(*names: str) -> Check:  # noqa: N802
    """The captured constants are float32 without encodings."""
    return Check(f"{', '.join(names)} float32, unencoded", lambda m: all(
        m.type(n).dtype == "float32" and not m.type(n).enc for n in names))


def Unencoded(name: str) -> Check:  # noqa: N802
    return Check(f"{name} has no encoding", lambda m: not m.type(name).enc)


def Static(name: str) -> Check:  # noqa: N802
    return Check(f"the shape of {name} is known", lambda m: m.type(name).static)


def _bias_ok(m: Match) -> bool:
    inputs = m.op("conv").inputs
    return len(inputs) < 3 or inputs[2] < 0 or inputs[2] in m.graph.consts


BIAS = Check("the bias is omitted or a constant", _bias_ok)
ONE_OUTPUT = Check("the batch norm has one output", lambda m: len(m.op("*").outputs) == 1)
BN_PARAMS = (Const("s"), Const("b"), Const("mean"), Const("var"))
INFERENCE = Eq(AttrOf("*", "training_mode", 0), 0)


def fold_rules(v: Vocabulary) -> tuple[Rule, ...]:
    """The folding rules in this vocabulary (priority MIDDLE)."""
    conv = Op(v.conv, "x", Const("w"), ..., name="conv")
    foldable = All(OneUse("conv"), Unencoded("conv"), F32("w"),
                   Eq(AttrOf("conv", "activation", ""), ""), BIAS)
    bn = Op(v.batch_norm, "y", *BN_PARAMS, name="bn")
    alone = All(OneUse("bn"), Unencoded("bn"), Static("bn"), F32("s", "b", "mean", "var"),
                Eq(AttrOf("bn", "training_mode", 0), 0))
    axis = v.channel_axis

    def both(name: str, ops: tuple[str, ...], inner: object, repl: object,
             when: object) -> tuple[Rule, Rule]:
        return (Rule(name, MIDDLE, Op(ops, inner, Const("c")), repl, when),
                Rule(f"{name}_first", MIDDLE, Op(ops, Const("c"), inner), repl, when))

    return (
        Rule("fold_batch_norm", MIDDLE, Op(v.batch_norm, conv, *BN_PARAMS),
             IntoConv(BatchNormScale(), BatchNormShift(), axis),
             All(foldable, INFERENCE, ONE_OUTPUT)),
        *both("fold_bias", v.add, conv, IntoConv(None, PerChannel("c"), axis), foldable),
        *both("fold_scale", v.mul, conv, IntoConv(PerChannel("c"), None, axis), foldable),
        *both("batch_norm_scale", v.mul, bn, IntoBatchNorm(PerChannel("c"), None, axis), alone),
        *both("batch_norm_shift", v.add, bn, IntoBatchNorm(None, PerChannel("c"), axis), alone),
    )
