"""The default package's fusions (priority MIDDLE) and tiling rules (priority LATE).

Fusions, on float graphs (an int8 graph's encodings fix every tensor the model has; the
quantized model's own absorbed activations are fused at lowering):

- the folds every vocabulary shares (`udo_build.rewrite.fold`), in the lowered HTP names with
  channels last (`FOLDS`): fold_batch_norm (BatchNorm(Conv2d) -> Conv2d with the batch norm in
  its weights and bias), fold_bias / fold_scale (Conv2d + c, Conv2d * c for a per-channel
  constant), batch_norm_scale / batch_norm_shift (BatchNorm * c, BatchNorm + c -> one
  BatchNorm), each also with the constant first (`_first`);
- conv_relu / conv_clip: Relu(Conv2d) and Clip(Conv2d, lo, hi) -> Conv2d with that activation;
  add_relu: Relu(Add(a, b)) -> Add with the activation (residual blocks).

Tiling: autosplit_rows splits an op whose working set (its activations, crouton-padded) exceeds
the budget (the VTCM, or a quarter of it at level 3) into pieces of the typical slice, the
largest multiple of 8 rows that fits (tiling.py); autosplit_batch splits by samples what rows
cannot split.
"""

from __future__ import annotations

import numpy as np

from ..rewrite.fold import Vocabulary, fold_rules
from ..rewrite.replace import CopyAttrs, InputsOf, New, OpOf, WithSize, WithType
from ..rewrite.rules import (
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
from .tiling import AutoSplit, piece_bytes, splittable, typical_rows

FOLDS = Vocabulary("htp", "Conv2d", "BatchNorm", -1)
PLAIN = Eq(AttrOf("conv", "activation", ""), "")


def finite(value: np.ndarray | None) -> float | None:
    """A one-element bound as a float (None: absent or infinite, i.e. no bound)."""
    if value is None:
        return None
    number = float(np.asarray(value).reshape(-1)[0])
    return number if np.isfinite(number) else None


BOUNDS = Expr("the clip bounds", lambda m: [finite(m.const(n)) for n in ("lo", "hi")])
CONV = Op("Conv2d", ..., name="conv")
ALONE = All(OneUse("conv"), Float("conv"), PLAIN)


def _activated(name: str, **attrs: object) -> New:
    """The captured op again, typed and sized as the root, with a fused activation."""
    return WithSize("*", WithType("*", New(OpOf(name), InputsOf(name),
                                           attrs=CopyAttrs(name, **attrs))))


FUSION_RULES: tuple[Rule, ...] = (
    *fold_rules(FOLDS),
    Rule("conv_relu", MIDDLE, Op("Relu", CONV), _activated("conv", activation="Relu"), ALONE),
    Rule("conv_clip", MIDDLE, Op("Clip", CONV, Const("lo"), Const("hi")),
         _activated("conv", activation="Clip", clip=BOUNDS), ALONE),
    Rule("add_relu", MIDDLE, Op("Relu", Op(("Add", "Sum"), ..., name="add")),
         _activated("add", activation="Relu"),
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
