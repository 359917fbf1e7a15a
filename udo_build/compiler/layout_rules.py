"""The default package's layout rules (priority EARLY): the transposes lowering put around every
channel-last op move through layout-free ops and cancel; reshapes chain into one; identities go.

- remove_identity: Identity(x) -> x
- cancel_transposes: Transpose(Transpose(x, p), q) -> x when q undoes p
- merge_transposes: Transpose(Transpose(x, p), q) -> Transpose(x, p then q)
- identity_transpose / identity_reshape: a transpose by the identity, a reshape to the same shape
- reshape_chain: Reshape(Reshape(x)) -> Reshape(x)
- sink_transpose_unary: U(Transpose(x)) -> Transpose(U(x)) for elementwise U
- sink_transpose_binary: B(Transpose(a), Transpose(b) | constant) -> Transpose(B(a, b'))
- sink_transpose_concat: Concat(Transpose(a), Transpose(b), ...) -> Transpose(Concat(a, b))
- sink_transpose_axis: Softmax/LogSoftmax/ChannelShuffle(Transpose(x)) -> Transpose(op(x))
- channel_shuffle: Reshape(Transpose(Reshape(x))) splitting one axis into (groups, n/groups)
  and swapping the two -> ChannelShuffle(x) (ShuffleNet's 5-D shuffle as a 4-D op)

Every rule that lets a value skip a move requires the same encodings on both sides (int8: the
move would otherwise requantize), and sinking a transpose needs it to have one use (so no
transpose is ever added). A constant operand is permuted at prepare (int8: only per-tensor
encoded ones).

Replacements are values: `Transposed(value, perm)` moves a value through `transpose` (a
constant is permuted now, two transposes compose, an identity permutation is no op). Only the
binary and concat sinks replace through `Call`: they rebuild a variable number of operands, each
by what it is (a constant permuted back, a transpose's input taken).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..rewrite.graph import TType
from ..rewrite.replace import (
    Builder,
    Call,
    CopyAttrs,
    InputsOf,
    New,
    OpOf,
    WithSize,
    WithType,
    build,
)
from ..rewrite.rules import (
    EARLY,
    All,
    AttrOf,
    Check,
    Const,
    Eq,
    Expr,
    Match,
    OneUse,
    Op,
    Rule,
    Shape,
)
from .ops import BINARY, UNARY, compose, inverse, is_identity

TRANSPARENT = tuple(sorted(UNARY))
AXIS_MOVERS = ("Softmax", "LogSoftmax", "ChannelShuffle")


def transpose(b: Builder, vid: int, perm: Sequence[int]) -> int:
    """vid transposed: a constant is permuted now, two transposes compose, an identity
    permutation is no op."""
    perm = tuple(perm)
    if is_identity(perm):
        return vid
    graph = b.graph
    if vid in graph.consts:
        t = graph.types[vid]
        return b.const(np.transpose(graph.consts[vid], perm), t.enc, t.dtype)
    producer = graph.producer_of(vid)
    if producer is not None and producer.op == "Transpose":
        return transpose(b, producer.inputs[0], compose(producer.attr("perm"), perm))
    return b.op("Transpose", [vid], attrs={"perm": list(perm)}).outputs[0]


def same_enc(a: str, b: str) -> Check:
    return Check(f"{a} and {b} have the same type and encodings",
                 lambda m: (m.type(a).dtype, m.type(a).enc) == (m.type(b).dtype, m.type(b).enc))


def _cancels(m: Match) -> bool:
    return is_identity(compose(m.attr("inner", "perm"), m.attr("*", "perm")))


@dataclass(frozen=True)
class Transposed:
    """A replacement's value transposed by `perm` (a list or an `Expr`) through `transpose`."""

    value: Any
    perm: Any

    def build(self, m: Match, b: Builder) -> int | None:
        values = build(self.value, m, b)
        perm = self.perm(m) if isinstance(self.perm, Expr) else self.perm
        return None if values is None else transpose(b, values[0], perm)


MERGED = Expr("the two permutations composed",
              lambda m: compose(m.attr("inner", "perm"), m.attr("*", "perm")))
T_PERM = AttrOf("t", "perm")
AXIS_BEFORE = Expr("the axis before the transpose",
                   lambda m: m.attr("t", "perm")[m.attr("*", "axis")])


def _sunk(*inputs: Any, **attrs: Any) -> Transposed:
    """The root op on the transpose's input x (sized as x, typed as the root), transposed
    after it instead."""
    inner = New(OpOf("*"), "x", *inputs, attrs=CopyAttrs("*", **attrs))
    return Transposed(WithSize("x", WithType("*", inner)), T_PERM)


def _scalar_extras(m: Match) -> bool:
    """Clip bounds and other extra inputs of an elementwise op are one-element constants."""
    extra = m.op("*").inputs[1:]
    return all(v < 0 or (v in m.graph.consts and m.graph.types[v].size == 1) for v in extra)


def _perm_of(m: Match, vid: int) -> tuple[int, ...] | None:
    producer = m.graph.producer_of(vid)
    if producer is None or producer.op != "Transpose" or m.graph.uses(vid) != 1:
        return None
    return tuple(producer.attr("perm"))


def _binary_ok(m: Match) -> bool:
    """Every operand a one-use transpose by one permutation, or a permutable constant."""
    perms = set()
    for vid in m.op("*").inputs:
        if vid in m.graph.consts:
            t = m.graph.types[vid]
            if len(t.shape) != 4 or len(t.enc) > 1:
                return False
            continue
        perm = _perm_of(m, vid)
        if perm is None:
            return False
        perms.add(perm)
    return len(perms) == 1


def _sink_operands(m: Match, b: Builder, axis_attr: bool) -> int:
    root = m.op("*")
    perm = next(_perm_of(m, v) for v in root.inputs if v not in m.graph.consts)
    inputs = [transpose(b, v, inverse(perm)) if v in m.graph.consts
              else m.graph.producer_of(v).inputs[0] for v in root.inputs]  # type: ignore
    attrs = root.kwargs
    if axis_attr:
        attrs["axis"] = perm[attrs["axis"]]
    ttype: TType = m.type("*").permuted(inverse(perm))
    inner = b.op(root.op, inputs, [ttype], attrs)
    return transpose(b, inner.outputs[0], perm)


def _shuffle_axis(m: Match) -> int | None:
    """The axis a Reshape-Transpose-Reshape shuffles (None when it is not a shuffle)."""
    x, split, out = m.shape("x"), m.shape("r1"), m.shape("*")
    perm = m.attr("t", "perm")
    if x != out or len(split) != len(x) + 1:
        return None
    for a in range(len(x)):
        swap = list(range(len(split)))
        swap[a], swap[a + 1] = a + 1, a
        if (split[:a] + (split[a] * split[a + 1],) + split[a + 2:] == x
                and list(perm) == swap and split[a] > 1):
            return a
    return None


SHUFFLE_AXIS = Expr("the shuffled axis", _shuffle_axis)
SHUFFLE_GROUPS = Expr("the groups", lambda m: m.shape("r1")[_shuffle_axis(m)])  # type: ignore


def elementwise(op: str) -> Rule:
    """The rule that moves transposes through a custom op of one input that is elementwise
    (each output element depends on the input element at its position only), as the layout
    rules do through the default elementwise ops. A kernels module registers it:

        package.rule(elementwise("Softplus"))

    The op then runs on the tensor in whatever layout the graph has there (bhwc)."""
    return Rule(f"sink_transpose_{op}", EARLY, Op(op, Op("Transpose", "x", name="t")),
                _sunk(), OneUse("t"))


LAYOUT_RULES: tuple[Rule, ...] = (
    Rule("remove_identity", EARLY, Op("Identity", "x"), "x", same_enc("x", "*")),
    Rule("channel_shuffle", EARLY,
         Op("Reshape", Op("Transpose", Op("Reshape", "x", name="r1"), name="t")),
         WithType("*", New("ChannelShuffle", "x", attrs={"axis": SHUFFLE_AXIS,
                                                         "groups": SHUFFLE_GROUPS})),
         All(same_enc("x", "*"), OneUse("r1"), OneUse("t"),
             Check("it splits one axis in two and swaps them", lambda m: _shuffle_axis(m)
                   is not None))),
    Rule("cancel_transposes", EARLY, Op("Transpose", Op("Transpose", "x", name="inner")), "x",
         All(Check("the permutations cancel", _cancels), same_enc("x", "*"))),
    Rule("merge_transposes", EARLY, Op("Transpose", Op("Transpose", "x", name="inner")),
         Transposed("x", MERGED), same_enc("x", "*")),
    Rule("identity_transpose", EARLY, Op("Transpose", "x"), "x",
         All(Check("the permutation is the identity", lambda m: is_identity(
             m.attr("*", "perm"))), same_enc("x", "*"))),
    Rule("identity_reshape", EARLY, Op("Reshape", "x"), "x",
         All(Eq(Shape("x"), AttrOf("*", "shape")), same_enc("x", "*"))),
    Rule("reshape_chain", EARLY, Op("Reshape", Op("Reshape", "x", name="inner")),
         WithType("*", New("Reshape", "x", attrs=CopyAttrs("*"))),
         All(same_enc("x", "inner"), same_enc("inner", "*"))),
    Rule("sink_transpose_unary", EARLY, Op(TRANSPARENT, Op("Transpose", "x", name="t"), ...),
         _sunk(InputsOf("*", start=1)),
         All(OneUse("t"), Check("extra inputs are one-element constants", _scalar_extras))),
    Rule("sink_transpose_binary", EARLY, Op(tuple(sorted(BINARY)), ...),
         Call(lambda m, b: _sink_operands(m, b, False)),
         Check("every operand is a one-use transpose by one permutation, or a permutable 4-D "
               "constant", _binary_ok)),
    Rule("sink_transpose_concat", EARLY, Op("Concat", ...),
         Call(lambda m, b: _sink_operands(m, b, True)),
         Check("every input is a one-use transpose by one permutation", lambda m: _binary_ok(m)
               and not any(v in m.graph.consts for v in m.op("*").inputs))),
    Rule("sink_transpose_axis", EARLY, Op(AXIS_MOVERS, Op("Transpose", "x", name="t")),
         _sunk(axis=AXIS_BEFORE), OneUse("t")),
)

__all__ = ["LAYOUT_RULES", "Const", "elementwise", "same_enc"]
