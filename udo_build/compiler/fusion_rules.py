"""The default package's fusions (priority MIDDLE) and tiling rules (priority LATE).

Fusions, on float graphs (an int8 graph's encodings fix every tensor the model has; the
quantized model's own absorbed activations are fused at lowering):

- fold_batch_norm: BatchNorm(Conv2d(x, w, b)) -> Conv2d(x, w * m, b * m + a), with m, a the
  batch norm's per-channel multiplier and addend (computed in float64, stored in float32);
- fold_bias / fold_scale: Conv2d(...) + c and Conv2d(...) * c for a per-channel constant c
  (conv + bias);
- batch_norm_scale / batch_norm_shift: BatchNorm(...) * c, BatchNorm(...) + c -> one BatchNorm
  (DenseNet, Inception v2 scale and shift their batch norms' outputs);
- conv_relu / conv_clip: Relu(Conv2d) and Clip(Conv2d, lo, hi) -> Conv2d with that activation;
  add_relu: Relu(Add(a, b)) -> Add with the activation (residual blocks).

Tiling: autosplit_rows splits an op whose working set (its activations, crouton-padded) exceeds
the budget (the VTCM, or a quarter of it at level 3) into pieces of the typical slice, the
largest multiple of 8 rows that fits (tiling.py); autosplit_batch splits by samples what rows
cannot split.
"""

from __future__ import annotations

import numpy as np

from .ir import NONE
from .replace import AutoSplit, Builder, Call
from .rules import (
    LATE,
    MIDDLE,
    All,
    AttrOf,
    Check,
    Const,
    Eq,
    Expr,
    Float,
    Match,
    OneUse,
    Op,
    Rule,
)
from .tiling import piece_bytes, splittable, typical_rows

PLAIN = Eq(AttrOf("conv", "activation", ""), "")


def channel_vector(m: Match, name: str, channels: int) -> np.ndarray | None:
    """A constant as one float64 value per channel (bhwc: (1, 1, 1, C) or one element)."""
    value = m.const(name)
    if value is None or value.dtype.kind != "f" or m.type(name).enc:
        return None
    if value.size == 1:
        return np.full(channels, float(value.reshape(-1)[0]))
    if value.ndim == 4 and value.shape[:3] == (1, 1, 1) and value.shape[3] == channels:
        return value.reshape(-1).astype(np.float64)
    return None


def _conv_parts(m: Match) -> tuple[np.ndarray, np.ndarray]:
    conv = m.op("conv")
    w = m.graph.consts[conv.inputs[1]].astype(np.float64)
    bias_id = conv.inputs[2] if len(conv.inputs) > 2 else NONE
    bias = m.graph.consts[bias_id].astype(np.float64) if bias_id != NONE \
        else np.zeros(w.shape[0])
    return w, bias


def _bias_const(m: Match) -> bool:
    conv = m.op("conv")
    return len(conv.inputs) <= 2 or conv.inputs[2] == NONE or conv.inputs[2] in m.graph.consts


def _conv_affine(m: Match, b: Builder, scale: np.ndarray, shift: np.ndarray) -> int:
    w, bias = _conv_parts(m)
    conv = m.op("conv")
    weights = b.const((w * scale.reshape(-1, 1, 1, 1)).astype(np.float32))
    new_bias = b.const((bias * scale + shift).astype(np.float32))
    return b.op("Conv2d", [conv.inputs[0], weights, new_bias], [m.type("*")],
                conv.kwargs).outputs[0]


def _fold_bn(m: Match, b: Builder) -> int | None:
    s, shift, mean, var = (m.const(n).astype(np.float64) for n in  # type: ignore[union-attr]
                           ("s", "b", "mean", "var"))
    mult = s / np.sqrt(var + float(m.attr("*", "epsilon", 1e-5)))
    return _conv_affine(m, b, mult, shift - mean * mult)


def _channels(m: Match) -> int:
    return m.shape("*")[-1]


def _fold_channel(m: Match, b: Builder, op: str) -> int | None:
    c = channel_vector(m, "c", _channels(m))
    if c is None:
        return None
    if op == "Mul":
        return _conv_affine(m, b, c, np.zeros_like(c))
    return _conv_affine(m, b, np.ones_like(c), c)


def _bn_channel(m: Match, b: Builder, op: str) -> int | None:
    c = channel_vector(m, "c", _channels(m))
    if c is None:
        return None
    bn = m.op("bn")
    s, shift = (m.graph.consts[v].astype(np.float64) for v in bn.inputs[1:3])
    s, shift = (s * c, shift * c) if op == "Mul" else (s, shift + c)
    inputs = [bn.inputs[0], b.const(s.astype(np.float32)), b.const(shift.astype(np.float32)),
              *bn.inputs[3:]]
    return b.op("BatchNorm", inputs, [m.type("*")], bn.kwargs).outputs[0]


def _activate(m: Match, b: Builder, name: str, **attrs: object) -> int:
    inner = m.op(name)
    return b.op(inner.op, inner.inputs, [m.type("*")], {**inner.kwargs, **attrs},
                layout=inner.layout).outputs[0]


def _clip(m: Match, b: Builder) -> int:
    bounds = [finite(m.const(n)) for n in ("lo", "hi")]
    return _activate(m, b, "conv", activation="Clip", clip=bounds)


def finite(value: np.ndarray | None) -> float | None:
    """A one-element bound as a float (None: absent or infinite, i.e. no bound)."""
    if value is None:
        return None
    number = float(np.asarray(value).reshape(-1)[0])
    return number if np.isfinite(number) else None


CONV = Op("Conv2d", "x", Const("w"), ..., name="conv")
FOLDABLE = All(OneUse("conv"), Float("conv"), PLAIN, Check("the bias is a constant", _bias_const))
BN_PARAMS = (Const("s"), Const("b"), Const("mean"), Const("var"))
BN = Op("BatchNorm", "y", *BN_PARAMS, name="bn")
BN_ALONE = All(OneUse("bn"), Float("bn"), Eq(AttrOf("bn", "training_mode", 0), 0))

FUSION_RULES: tuple[Rule, ...] = (
    Rule("fold_batch_norm", MIDDLE, Op("BatchNorm", CONV, *BN_PARAMS), Call(_fold_bn),
         All(FOLDABLE, Eq(AttrOf("*", "training_mode", 0), 0))),
    Rule("fold_bias", MIDDLE, Op("Add", CONV, Const("c")),
         Call(lambda m, b: _fold_channel(m, b, "Add")), FOLDABLE),
    Rule("fold_bias_first", MIDDLE, Op("Add", Const("c"), CONV),
         Call(lambda m, b: _fold_channel(m, b, "Add")), FOLDABLE),
    Rule("fold_scale", MIDDLE, Op("Mul", CONV, Const("c")),
         Call(lambda m, b: _fold_channel(m, b, "Mul")), FOLDABLE),
    Rule("batch_norm_scale", MIDDLE, Op("Mul", BN, Const("c")),
         Call(lambda m, b: _bn_channel(m, b, "Mul")), BN_ALONE),
    Rule("batch_norm_shift", MIDDLE, Op("Add", BN, Const("c")),
         Call(lambda m, b: _bn_channel(m, b, "Add")), BN_ALONE),
    Rule("conv_relu", MIDDLE, Op("Relu", Op("Conv2d", ..., name="conv")),
         Call(lambda m, b: _activate(m, b, "conv", activation="Relu")),
         All(OneUse("conv"), Float("conv"), PLAIN)),
    Rule("conv_clip", MIDDLE, Op("Clip", Op("Conv2d", ..., name="conv"), Const("lo"),
                                 Const("hi")),
         Call(_clip), All(OneUse("conv"), Float("conv"), PLAIN)),
    Rule("add_relu", MIDDLE, Op("Relu", Op(("Add", "Sum"), ..., name="add")),
         Call(lambda m, b: _activate(m, b, "add", activation="Relu")),
         All(OneUse("add"), Float("add"), Eq(AttrOf("add", "activation", ""), ""))),
)


def _over_budget(axis: int) -> Check:
    def check(m: Match) -> bool:
        op = m.op("*")
        if len(op.outputs) != 1 or len(m.shape("*")) != 4 or m.shape("*")[axis] < 2:
            return False
        if not splittable(op, axis, m.graph):
            return False
        return piece_bytes(op, m.graph, axis, m.shape("*")[axis]) > m.ctx.budget
    return Check(f"its working set exceeds the budget and it splits along axis {axis}", check)


def _rows(axis: int) -> Expr:
    return Expr("the typical slice", lambda m: typical_rows(m.op("*"), m.graph, m.ctx.budget,
                                                            axis))


TILING_RULES: tuple[Rule, ...] = (
    Rule("autosplit_rows", LATE, Op("*", ...), AutoSplit(1, _rows(1)), _over_budget(1)),
    Rule("autosplit_batch", LATE + 10, Op("*", ...), AutoSplit(0, _rows(0)), _over_budget(0)),
)
