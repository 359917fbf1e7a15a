"""Optimization rules as data: a name, a priority, a match pattern, a constraint, a replacement.

    Rule("conv_relu", MIDDLE,
         match=Op("Relu", Op("Conv2d", ..., name="conv")),
         constraint=All(OneUse("conv"), Eq(AttrOf("conv", "activation", ""), "")),
         replace=WithSize("*", WithType("*", New("Conv2d", InputsOf("conv"),
                                                 attrs=CopyAttrs("conv", activation="Relu")))))

Patterns (`Op`) name ops (a name, a tuple of alternatives, or "*" for any op) and their inputs:
a string captures the input value (the same name twice must be the same value; "_" ignores
it), `Const(name)` wants a constant, a nested `Op` wants the input made by such an op, None an
omitted input, and a trailing `...` allows any further inputs. `name=` captures the op; the
root op is always captured as "*". Op names are qualified as the vendor's are: "Pkg::Op" names
an op of package Pkg, "default::Op" (or an unqualified name no other package claims) one of the
default package; in a rule a package registers, an unqualified name of one of its own ops is
that package's (`qualify`).

Constraints are values too (`Eq(Dim("x", 3), 32)`, `OneUse("conv")`, `IsConst("w")`, `All`,
`AnyOf`, `Not`, and `Check("why", fn)` for anything else): `check(match)` returns None when it
holds, else a sentence saying what was false (the trace shows it). Replacements are in
`replace.py`. Priorities: EARLY=2000, MIDDLE=3000, LATE=4000, plus offsets; rules of one
priority form one pass, run to a fixed point (`engine.py`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ir.graph import DEFAULT_PACKAGE
from .graph import NONE, OpGraph, TType
from .graph import Op as IrOp

EARLY, MIDDLE, LATE = 2000, 3000, 4000


@dataclass(frozen=True)
class Pat:
    ops: tuple[str, ...]  # qualified op names; ("*",) matches any op
    inputs: tuple[Any, ...] = ()
    name: str = ""
    rest: bool = False  # further inputs allowed


def Op(op: str | Sequence[str], *inputs: Any, name: str = "") -> Pat:  # noqa: N802
    ops = (op,) if isinstance(op, str) else tuple(op)
    rest = bool(inputs) and inputs[-1] is Ellipsis
    return Pat(ops, tuple(inputs[:-1] if rest else inputs), name, rest)


@dataclass(frozen=True)
class Const:
    name: str


@dataclass(frozen=True)
class Rule:
    name: str
    priority: int
    match: Pat
    replace: Any
    constraint: Any = None
    package: str = DEFAULT_PACKAGE
    doc: str = ""


def qualify(rule: Rule, package: str, own_ops: Sequence[str]) -> Rule:
    """The rule with every op name of its pattern in the qualified form Op.qname uses."""
    def name(op: str) -> str:
        if op == "*":
            return op
        pkg, sep, bare = op.rpartition("::")
        if sep:
            return bare if pkg in ("", DEFAULT_PACKAGE) else op
        return f"{package}::{op}" if package != DEFAULT_PACKAGE and op in own_ops else op

    def walk(p: Any) -> Any:
        if not isinstance(p, Pat):
            return p
        return Pat(tuple(name(o) for o in p.ops), tuple(walk(i) for i in p.inputs), p.name,
                   p.rest)
    from dataclasses import replace

    return replace(rule, match=walk(rule.match), package=package)


# -- matching --------------------------------------------------------------------------------


@dataclass
class Match:
    graph: OpGraph
    ctx: Any  # the compile context (target facts) the constraints may read
    ops: dict[str, IrOp] = field(default_factory=dict)
    values: dict[str, int] = field(default_factory=dict)

    def value(self, name: str) -> int:
        return self.values[name]

    def op(self, name: str) -> IrOp:
        return self.ops[name]

    def type(self, name: str) -> TType:
        return self.graph.types[self.values[name]]

    def shape(self, name: str) -> tuple[int, ...]:
        return self.type(name).shape

    def const(self, name: str) -> np.ndarray | None:
        vid = self.values.get(name, NONE)
        return self.graph.consts.get(vid)

    def attr(self, name: str, key: str, default: Any = None) -> Any:
        return self.ops[name].attr(key, default)

    def users(self, name: str) -> int:
        return self.graph.uses(self.values[name])


def match(pattern: Pat, op: IrOp, graph: OpGraph, ctx: Any) -> tuple[Match | None, str]:
    """(the match, "") or (None, why not)."""
    m = Match(graph, ctx)
    why = _match(pattern, op, m, "*")
    return (None, why) if why else (m, "")


def _match(pat: Pat, op: IrOp, m: Match, capture: str) -> str:
    if pat.ops != ("*",) and op.qname not in pat.ops:
        return f"expected {' or '.join(pat.ops)}, found {op}"
    m.ops[capture] = op
    m.values.setdefault(capture, op.outputs[0])
    inputs = list(op.inputs)
    while inputs and inputs[-1] == NONE:
        inputs.pop()
    n, k = len(inputs), len(pat.inputs)
    if (n > k and not pat.rest) or (n < k and any(p is not None for p in pat.inputs[n:])):
        return f"{op} has {n} inputs, the pattern wants {k}{' or more' if pat.rest else ''}"
    for i, sub in enumerate(pat.inputs):
        vid = inputs[i] if i < len(inputs) else NONE
        why = _match_input(sub, vid, m, f"input {i} of {op}")
        if why:
            return why
    return ""


def _match_input(sub: Any, vid: int, m: Match, where: str) -> str:
    if sub is None:
        return "" if vid == NONE else f"{where} is given, the pattern wants it omitted"
    if vid == NONE:
        return f"{where} is omitted"
    if isinstance(sub, str):
        if sub == "_":
            return ""
        if sub in m.values and m.values[sub] != vid:
            return f"{where} is not the same value as {sub!r}"
        m.values[sub] = vid
        return ""
    if isinstance(sub, Const):
        if vid not in m.graph.consts:
            return f"{where} is not a constant"
        m.values[sub.name] = vid
        return ""
    producer = m.graph.producer_of(vid)
    if producer is None:
        return f"{where} is a graph input or constant, not the output of {'|'.join(sub.ops)}"
    if producer.outputs[0] != vid:
        return f"{where} is output {producer.outputs.index(vid)} of {producer}"
    if sub.name:
        m.values[sub.name] = vid
    return _match(sub, producer, m, sub.name or f"{where}>")


# -- constraints -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Expr:
    """A value computed from a match, with a description for traces."""

    text: str
    fn: Callable[[Match], Any]

    def __call__(self, m: Match) -> Any:
        return self.fn(m)

    def __str__(self) -> str:
        return self.text


def Dim(name: str, axis: int) -> Expr:  # noqa: N802
    return Expr(f"dim {axis} of {name}", lambda m: m.shape(name)[axis])


def Shape(name: str) -> Expr:  # noqa: N802
    return Expr(f"shape of {name}", lambda m: m.shape(name))


def Rank(name: str) -> Expr:  # noqa: N802
    return Expr(f"rank of {name}", lambda m: len(m.shape(name)))


def Dtype(name: str) -> Expr:  # noqa: N802
    return Expr(f"dtype of {name}", lambda m: m.type(name).dtype)


def AttrOf(name: str, key: str, default: Any = None) -> Expr:  # noqa: N802
    return Expr(f"{key} of {name}", lambda m: m.attr(name, key, default))


def Users(name: str) -> Expr:  # noqa: N802
    return Expr(f"uses of {name}", lambda m: m.users(name))


def _value(x: Any, m: Match) -> Any:
    return x(m) if isinstance(x, Expr) else x


@dataclass(frozen=True)
class Cmp:
    op: str
    a: Any
    b: Any

    def check(self, m: Match) -> str | None:
        a, b = _value(self.a, m), _value(self.b, m)
        a = list(a) if isinstance(a, tuple) else a
        b = list(b) if isinstance(b, tuple) else b
        ok = {"==": a == b, "!=": a != b}.get(self.op)
        if ok is None:
            ok = {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b}[self.op]
        return None if ok else f"{self} is false ({a!r} vs {b!r})"

    def __str__(self) -> str:
        return f"{self.a} {self.op} {self.b}"


def Eq(a: Any, b: Any) -> Cmp:  # noqa: N802
    return Cmp("==", a, b)


def Ne(a: Any, b: Any) -> Cmp:  # noqa: N802
    return Cmp("!=", a, b)


def Le(a: Any, b: Any) -> Cmp:  # noqa: N802
    return Cmp("<=", a, b)


def Gt(a: Any, b: Any) -> Cmp:  # noqa: N802
    return Cmp(">", a, b)


@dataclass(frozen=True)
class Check:
    text: str
    fn: Callable[[Match], bool]

    def check(self, m: Match) -> str | None:
        return None if self.fn(m) else f"not: {self.text}"

    def __str__(self) -> str:
        return self.text


def OneUse(name: str) -> Check:  # noqa: N802
    return Check(f"{name} has one use", lambda m: m.users(name) == 1)


def IsConst(name: str) -> Check:  # noqa: N802
    return Check(f"{name} is a constant", lambda m: m.values.get(name) in m.graph.consts)


def Float(name: str) -> Check:  # noqa: N802
    return Check(f"{name} is float (no encoding)", lambda m: not m.type(name).enc
                 and m.type(name).dtype.startswith("float"))


@dataclass(frozen=True)
class All:
    parts: tuple[Any, ...]

    def __init__(self, *parts: Any) -> None:
        object.__setattr__(self, "parts", parts)

    def check(self, m: Match) -> str | None:
        for part in self.parts:
            why = part.check(m)
            if why:
                return why
        return None

    def __str__(self) -> str:
        return " and ".join(str(p) for p in self.parts)


@dataclass(frozen=True)
class AnyOf:
    parts: tuple[Any, ...]

    def __init__(self, *parts: Any) -> None:
        object.__setattr__(self, "parts", parts)

    def check(self, m: Match) -> str | None:
        reasons = [part.check(m) for part in self.parts]
        return None if any(r is None for r in reasons) else "; ".join(reasons)  # type: ignore

    def __str__(self) -> str:
        return " or ".join(f"({p})" for p in self.parts)


@dataclass(frozen=True)
class Not:
    part: Any

    def check(self, m: Match) -> str | None:
        return f"{self.part} holds" if self.part.check(m) is None else None

    def __str__(self) -> str:
        return f"not ({self.part})"
