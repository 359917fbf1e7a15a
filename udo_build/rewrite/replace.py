"""Replacements: what a matched rule puts in place of the root op's outputs.

A replacement is a value, evaluated against the match:

- a capture name ("x"): that value (e.g. Identity(x) -> "x");
- `New(op, *inputs, attrs=...)`: a new op; inputs are replacements again (captures, `New`,
  `ConstScalar`, `GenShape`, None for an omitted input, `InputsOf("conv")` for all the inputs of
  a captured op); attrs a dict whose values may be `Expr`s, or `CopyAttrs("conv", **changes)`;
  the op a name or `OpOf("add")` (the captured op's name and package). Its output type is
  inferred for the ops whose shapes the graph's dialect knows (the compiler's moves and
  elementwise ops); `WithSize("x", New(...))` takes the shape of a capture and `WithType("x",
  New(...))` its dtype and encodings (the vendor's WITH_SIZE, WITH_TYPE); an op whose shape
  cannot be inferred needs WithSize;
- `ConstScalar(v, dtype)`: a 1x1x1x1 constant (gen_ConstScalar); `GenShape(*dims)`: an int64
  shape constant whose dims may be `Expr`s (gen_Shape);
- a value with a `build(match, builder)` method (the folds of `fold.py`, the compiler's
  `AutoSplit`): the value ids it returns, or None to decline;
- `Call(fn)`: `fn(match, builder)` returns value ids, or None to decline (no exception): the
  escape hatch for what no value type states.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ir.graph import DEFAULT_PACKAGE
from .graph import MODEL, NONE, Op, OpGraph, TType
from .rules import Expr, Match


class RuleError(Exception):
    """A rule's replacement is malformed (names a capture the pattern lacks, an unknown size)."""


@dataclass(frozen=True)
class CopyAttrs:
    name: str
    changes: Mapping[str, Any] = field(default_factory=dict)

    def __init__(self, name: str, **changes: Any) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "changes", changes)


@dataclass(frozen=True)
class OpOf:
    """As `New`'s op: the op (name and package) of a capture."""

    name: str


@dataclass(frozen=True)
class InputsOf:
    """Among `New`'s inputs: the inputs of a captured op from `start`, in order (exactly `count`
    of them when it is given: cut, or padded with omitted inputs)."""

    name: str
    count: int = 0
    start: int = 0


@dataclass(frozen=True)
class New:
    op: str | OpOf
    inputs: tuple[Any, ...] = ()
    attrs: Any = None  # dict (values may be Expr) or CopyAttrs
    size: str | None = None
    type: str | None = None
    package: str = DEFAULT_PACKAGE

    def __init__(self, op: str | OpOf, *inputs: Any, attrs: Any = None, size: str | None = None,
                 type: str | None = None, package: str = DEFAULT_PACKAGE) -> None:  # noqa: A002
        for key, value in (("op", op), ("inputs", inputs), ("attrs", attrs), ("size", size),
                           ("type", type), ("package", package)):
            object.__setattr__(self, key, value)


def WithSize(source: str, new: New) -> New:  # noqa: N802
    return New(new.op, *new.inputs, attrs=new.attrs, size=source, type=new.type,
               package=new.package)


def WithType(source: str, new: New) -> New:  # noqa: N802
    return New(new.op, *new.inputs, attrs=new.attrs, size=new.size, type=source,
               package=new.package)


@dataclass(frozen=True)
class ConstScalar:
    value: float
    dtype: str = "float32"


@dataclass(frozen=True)
class GenShape:
    dims: tuple[Any, ...]

    def __init__(self, *dims: Any) -> None:
        object.__setattr__(self, "dims", dims)


@dataclass(frozen=True)
class Call:
    fn: Callable[[Match, Builder], Any]


class Builder:
    """Makes ops and constants for a replacement; remembers what it made (the worklist)."""

    def __init__(self, graph: OpGraph, origin: str) -> None:
        self.graph = graph
        self.origin = origin
        self.made: list[int] = []

    def type(self, vid: int) -> TType:
        return self.graph.types[vid]

    def op(self, name: str, inputs: Sequence[int], types: Sequence[TType] | None = None,
           attrs: Mapping[str, Any] | None = None, *, package: str = DEFAULT_PACKAGE,
           layout: str | None = None, like: int | None = None, origin: str | None = None) -> Op:
        """A new op; `types` default to the inferred shapes with the dtype and encodings of
        `like` (default: the first input)."""
        attrs = dict(attrs or {})
        if types is None:
            shapes = [self.graph.types[v].shape if v != NONE else None for v in inputs]
            base = self.graph.types[like if like is not None else inputs[0]]
            types = [base.with_shape(s)
                     for s in self.graph.dialect.shapes(name, shapes, attrs)]
        layout = layout or self.graph.dialect.layout(name, package)
        model: tuple[tuple[int, ...], ...] = ()
        if layout == MODEL:
            model = tuple(self.graph.types[v].shape if v != NONE else () for v in inputs) + \
                tuple(t.shape for t in types)
        made = self.graph.add(name, inputs, list(types), attrs, package=package, layout=layout,
                              model=model, origin=self.origin if origin is None else origin)
        self.made.append(made.id)
        return made

    def const(self, array: np.ndarray, enc: tuple = (), dtype: str | None = None,
              name: str = "") -> int:
        return self.graph.const(array, name or f"{self.origin}:const", enc, dtype)


def build(repl: Any, m: Match, b: Builder) -> list[int] | None:
    """The values that take the root's outputs' places, or None when the replacement declines."""
    if isinstance(repl, Call):
        out = repl.fn(m, b)
        if out is None:
            return None
        return [out] if isinstance(out, int) else list(out)
    if hasattr(repl, "build"):
        out = repl.build(m, b)
        if out is None:
            return None
        return [out] if isinstance(out, int) else list(out)
    return [_value(repl, m, b)]


def _value(repl: Any, m: Match, b: Builder) -> int:
    if repl is None:
        return NONE
    if isinstance(repl, str):
        if repl not in m.values:
            raise RuleError(f"the replacement names {repl!r}, which the pattern does not capture")
        return m.values[repl]
    if isinstance(repl, ConstScalar):
        return b.const(np.full((1, 1, 1, 1), repl.value, dtype=repl.dtype))
    if isinstance(repl, GenShape):
        dims = [int(d(m) if isinstance(d, Expr) else d) for d in repl.dims]
        return b.const(np.array(dims, dtype=np.int64))
    if isinstance(repl, New):
        return _new(repl, m, b)
    raise RuleError(f"a replacement cannot be a {type(repl).__name__}")


def _new(new: New, m: Match, b: Builder) -> int:
    inputs: list[int] = []
    for i in new.inputs:
        if isinstance(i, InputsOf):
            given = m.op(i.name).inputs[i.start:][:i.count or None]
            inputs += [*given, *[NONE] * (i.count - len(given))]
        else:
            inputs.append(_value(i, m, b))
    attrs = _attrs(new.attrs, m)
    op, package = new.op, new.package
    if isinstance(op, OpOf):
        op, package = m.op(op.name).op, m.op(op.name).package
    root = m.type("*")
    try:
        types = None if new.size is not None else [
            b.type(inputs[0]).with_shape(s) for s in b.graph.dialect.shapes(
                op, [b.type(v).shape if v != NONE else None for v in inputs], attrs)]
    except ValueError:
        if new.size is None:
            raise RuleError(f"the replacement builds {op}, whose output size the "
                            f"{b.graph.dialect.name} dialect cannot infer: wrap it in "
                            "WithSize(...)") from None
        types = None
    ttype = types[0] if types else root
    if new.size is not None:
        ttype = ttype.with_shape(m.shape(new.size))
    if new.type is not None:
        source = m.type(new.type)
        ttype = TType(ttype.shape, source.dtype, source.enc)
    return b.op(op, inputs, [ttype], attrs, package=package).outputs[0]


def _attrs(spec: Any, m: Match) -> dict[str, Any]:
    if spec is None:
        return {}
    if isinstance(spec, CopyAttrs):
        out = dict(m.op(spec.name).kwargs)
        changes = spec.changes
    else:
        out, changes = {}, spec
    for key, value in changes.items():
        out[key] = value(m) if isinstance(value, Expr) else value
    return out
