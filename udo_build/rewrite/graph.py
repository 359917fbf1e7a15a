"""The rewrite IR: immutable op values in a graph of SSA tensor values.

A value is an int id with a `TType` (shape, dtype, encodings); it is produced by one op, or is a
graph input, or a constant (its array in `OpGraph.consts`). An `Op` is a frozen value: its op name
and package, input and output value ids, attributes (sorted, frozen), its layout class, the
model shapes of its tensors (for ops that run in the model's layout) and the model layer it comes
from. `Op.key` is its structure without its id and outputs: equal keys compute equal values,
which is what common sub-expression elimination merges.

An `OpGraph` speaks one op vocabulary, its `Dialect`: the layout class of each op and the output
shapes of the ops a replacement may build without stating a size. The compiler's HTP form has
one (`compiler/ops.py`); a graph in the model's own layout and vocabulary (`MODEL_DIALECT`, what
the float runtime and quantization fold) knows no shapes and runs every op as it is.

The `OpGraph` container is mutable (ops are added, uses replaced, dead ops removed) so that a rule
rewrite costs what it touches, not the size of the graph; passes return (graph, changed).
Every list the graph hands out is in a deterministic order (op ids are issued in creation order,
and creation order is deterministic), so equal inputs give equal records.
"""

from __future__ import annotations

import hashlib
import json
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..ir.encodings import Encoding, from_list, to_list
from ..ir.graph import DEFAULT_PACKAGE, freeze, thaw

NONE = -1  # an omitted optional input
BIG = 64 << 10  # constants above this size are interned by identity

UNKNOWN = (-1,)  # the shape of a value whose shape (or rank) is not known statically

# layout classes of an op (see compiler/ops.py)
BHWC = "bhwc"  # data input 0 and output 0 are channel-last 4-D tensors
ANY = "any"  # works on 4-D tensors whatever their axis order (elementwise, moves)
MODEL = "model"  # runs in the model's layout and ranks (custom ops, everything else)

Shapes = Sequence["tuple[int, ...] | None"]


def _no_shapes(op: str, shapes: Shapes, attrs: Mapping[str, Any]) -> list[tuple[int, ...]]:
    raise ValueError(f"the output shape of {op} cannot be inferred; give its size (WithSize)")


@dataclass(frozen=True)
class Dialect:
    """An op vocabulary: `layout(op, package)` is an op's layout class, `shapes(op, input
    shapes, attrs)` the output shapes of an op a replacement builds (a ValueError when unknown).
    In a `named` dialect values are the model's named tensors: constants are not merged by
    content, and a value a rewrite makes takes the name of the value whose place it takes."""

    name: str
    named: bool = False
    layout: Callable[[str, str], str] = lambda op, package: ANY
    shapes: Callable[[str, Shapes, Mapping[str, Any]], list[tuple[int, ...]]] = _no_shapes


MODEL_DIALECT = Dialect("model", named=True)


@dataclass(frozen=True, slots=True)
class TType:
    """A tensor's shape, numpy dtype, and quantization encodings (one for an activation, one or
    one per channel for a quantized constant; empty for float tensors)."""

    shape: tuple[int, ...]
    dtype: str
    enc: tuple[Encoding, ...] = ()

    @property
    def static(self) -> bool:
        """Whether every dim is known."""
        return all(d >= 0 for d in self.shape)

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    @property
    def nbytes(self) -> int:
        return self.size * np.dtype(self.dtype).itemsize

    def with_shape(self, shape: Sequence[int]) -> TType:
        return replace(self, shape=tuple(int(d) for d in shape))

    def permuted(self, perm: Sequence[int]) -> TType:
        return self.with_shape([self.shape[p] for p in perm])

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"shape": list(self.shape), "dtype": self.dtype}
        if self.enc:
            out["enc"] = [to_list(e) for e in self.enc]
        return out

    @staticmethod
    def from_json(data: Mapping[str, Any]) -> TType:
        enc = tuple(from_list(e) for e in data.get("enc", ()))
        return TType(tuple(int(d) for d in data["shape"]), str(data["dtype"]), enc)


@dataclass(frozen=True, slots=True)
class Op:
    id: int
    op: str
    package: str
    inputs: tuple[int, ...]
    outputs: tuple[int, ...]
    attrs: tuple[tuple[str, Any], ...] = ()
    layout: str = ANY
    model: tuple[tuple[int, ...], ...] = ()  # MODEL layout: model shapes of inputs, outputs
    origin: str = ""  # the model layer it comes from

    @property
    def qname(self) -> str:
        return self.op if self.package == DEFAULT_PACKAGE else f"{self.package}::{self.op}"

    @property
    def key(self) -> tuple[Any, ...]:
        return (self.op, self.package, self.inputs, self.attrs, self.layout, self.model,
                len(self.outputs))

    def attr(self, name: str, default: Any = None) -> Any:
        for k, v in self.attrs:
            if k == name:
                return thaw(v)
        return default

    @property
    def kwargs(self) -> dict[str, Any]:
        return {k: thaw(v) for k, v in self.attrs}

    def __str__(self) -> str:
        return f"{self.qname}#{self.id}"


def frozen_attrs(attrs: Mapping[str, Any] | None) -> tuple[tuple[str, Any], ...]:
    if not attrs:
        return ()
    return tuple(sorted((k, freeze(v)) for k, v in attrs.items()))


def array_key(array: np.ndarray) -> str:
    a = np.asarray(array, order="C")  # keeps 0-d apart from [1]
    h = hashlib.sha256(f"{a.dtype.str}|{a.shape}|".encode())
    h.update(a.tobytes())
    return h.hexdigest()


@dataclass
class OpGraph:
    """Values, ops and the use lists that let a rewrite touch only its neighbourhood."""

    name: str
    dialect: Dialect = MODEL_DIALECT
    types: dict[int, TType] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)
    consts: dict[int, np.ndarray] = field(default_factory=dict)
    ops: dict[int, Op] = field(default_factory=dict)
    producer: dict[int, int] = field(default_factory=dict)  # value -> op id
    users: dict[int, dict[int, None]] = field(default_factory=dict)  # value -> op ids
    inputs: list[int] = field(default_factory=list)
    outputs: list[tuple[str, int]] = field(default_factory=list)  # (tensor name, value)
    _next: int = 0
    _const_index: dict[tuple[str, tuple[Encoding, ...]], int] = field(default_factory=dict)
    _taken: set[str] = field(default_factory=set)
    _version: int = 0
    _order: tuple[int, list[Op]] | None = None

    # -- values ---------------------------------------------------------------------------------

    def value(self, ttype: TType, name: str) -> int:
        vid = self._issue()
        self.types[vid] = ttype
        self.names[vid] = self._unique(name or f"t{vid}")
        self.users[vid] = {}
        return vid

    def const(self, array: np.ndarray, name: str = "", enc: tuple[Encoding, ...] = (),
              dtype: str | None = None) -> int:
        """A constant value; equal arrays (and encodings) share one value (unless the dialect is
        `named`). Arrays over 64 KiB (weights) are keyed by identity, not hashed: the same array
        is one value."""
        if self.dialect.named:  # the model's own array, as it is (a 0-d one stays 0-d)
            return self._const_value(np.asarray(array), name, enc, dtype)
        array = np.asarray(array, order="C")
        content = array_key(array) if array.nbytes <= BIG else f"id:{id(array)}"
        key = (content, tuple(enc))
        found = self._const_index.get(key)
        if found is not None and found in self.types:
            return found
        vid = self._const_value(array, name, enc, dtype)
        self._const_index[key] = vid
        return vid

    def _const_value(self, array: np.ndarray, name: str, enc: tuple[Encoding, ...],
                     dtype: str | None) -> int:
        vid = self.value(TType(tuple(array.shape), dtype or array.dtype.name, tuple(enc)),
                         name or "const")
        view = array.view()  # holds the array (and so its id) while the value lives
        view.flags.writeable = False
        self.consts[vid] = view
        return vid

    def rename(self, vid: int, name: str) -> None:
        """The value takes the name of a value that was dropped (the caller makes sure)."""
        self._taken.discard(self.names[vid])
        self._taken.add(name)
        self.names[vid] = name

    def _unique(self, name: str) -> str:
        """The name, or the first free `name~2`, `name~3`... (in a named dialect, where a name
        is never reused within a rewrite, the model's `name.1`, `name.2`...)."""
        candidate, n = name, 1
        while candidate in self._taken:
            n += 1
            candidate = f"{name}.{n - 1}" if self.dialect.named else f"{name}~{n}"
        self._taken.add(candidate)
        return candidate

    def _issue(self) -> int:
        self._next += 1
        return self._next

    def is_const(self, vid: int) -> bool:
        return vid in self.consts

    # -- ops ------------------------------------------------------------------------------------

    def add(self, op: str, inputs: Sequence[int], outputs: Sequence[TType | int],
            attrs: Mapping[str, Any] | None = None, *, package: str = DEFAULT_PACKAGE,
            layout: str = ANY, model: tuple[tuple[int, ...], ...] = (), origin: str = "",
            names: Sequence[str] = ()) -> Op:
        """A new op; outputs are new values of these types (or existing unproduced values)."""
        outs = []
        for i, out in enumerate(outputs):
            if isinstance(out, TType):
                base = names[i] if i < len(names) else f"{origin or op}:{i}"
                out = self.value(out, base)
            outs.append(out)
        node = Op(self._issue(), op, package, tuple(inputs), tuple(outs), frozen_attrs(attrs),
                  layout, model, origin)
        self._insert(node)
        return node

    def _insert(self, node: Op) -> None:
        self._version += 1
        self.ops[node.id] = node
        for vid in node.inputs:
            if vid != NONE:
                self.users[vid][node.id] = None
        for vid in node.outputs:
            if vid in self.producer:
                raise ValueError(f"value {vid} already has a producer")
            self.producer[vid] = node.id

    def remove(self, op_id: int) -> Op:
        self._version += 1
        node = self.ops.pop(op_id)
        for vid in node.inputs:
            if vid != NONE:
                self.users[vid].pop(op_id, None)
        for vid in node.outputs:
            self.producer.pop(vid, None)
        return node

    def rewire(self, op_id: int, inputs: Sequence[int]) -> Op:
        """The op with new inputs (same id and outputs)."""
        old = self.remove(op_id)
        node = Op(old.id, old.op, old.package, tuple(inputs), old.outputs, old.attrs, old.layout,
                  old.model, old.origin)
        self._insert(node)
        return node

    def replace_uses(self, old: int, new: int) -> list[int]:
        """Every reader of `old` (and the graph outputs) reads `new`; the readers' op ids."""
        readers = list(self.users.get(old, {}))
        for op_id in readers:
            node = self.ops[op_id]
            self.rewire(op_id, [new if v == old else v for v in node.inputs])
        self.outputs = [(n, new if v == old else v) for n, v in self.outputs]
        return readers

    def drop_value(self, vid: int) -> None:
        for table in (self.types, self.consts, self.users):
            table.pop(vid, None)  # type: ignore[attr-defined]
        name = self.names.pop(vid, None)
        if name is not None and not self.dialect.named:
            self._taken.discard(name)

    # -- queries --------------------------------------------------------------------------------

    def producer_of(self, vid: int) -> Op | None:
        op_id = self.producer.get(vid)
        return None if op_id is None else self.ops[op_id]

    def readers(self, vid: int) -> list[Op]:
        return [self.ops[i] for i in self.users.get(vid, {})]

    def uses(self, vid: int) -> int:
        """Readers plus graph outputs naming the value."""
        return len(self.users.get(vid, {})) + sum(1 for _, v in self.outputs if v == vid)

    def is_output(self, vid: int) -> bool:
        return any(v == vid for _, v in self.outputs)

    def order(self) -> list[Op]:
        """The ops in a deterministic topological order (Kahn's, ready ops in id order, first
        ready first out); cached until the graph changes."""
        if self._order is not None and self._order[0] == self._version:
            return list(self._order[1])
        ops, producer, users = self.ops, self.producer, self.users
        pending: dict[int, int] = {}
        ready = deque()
        for i in sorted(ops):
            op = ops[i]
            n = sum(1 for v in set(op.inputs) if v in producer)
            pending[i] = n
            if not n:
                ready.append(i)
        out = []
        while ready:
            op = ops[ready.popleft()]
            out.append(op)
            for vid in op.outputs:
                for reader in users[vid]:
                    left = pending[reader] - 1
                    pending[reader] = left
                    if not left:
                        ready.append(reader)
        if len(out) != len(ops):
            raise ValueError("the graph has a cycle")
        self._order = (self._version, out)
        return list(out)

    def text(self) -> str:
        """One line per op, in topological order (for tests and traces)."""
        lines = [f"graph {self.name}(" + ", ".join(self._vtext(v) for v in self.inputs) + ")"]
        for op in self.order():
            attrs = " ".join(f"{k}={json.dumps(thaw(v), separators=(',', ':'))}"
                             for k, v in op.attrs)
            ins = ", ".join("-" if v == NONE else self.names[v] for v in op.inputs)
            outs = ", ".join(self._vtext(v) for v in op.outputs)
            tag = "" if op.layout == ANY else f" <{op.layout}>"
            lines.append(f"  {outs} = {op.qname}({ins}){tag}" + (f" [{attrs}]" if attrs else ""))
        lines.append("  return " + ", ".join(f"{n}={self.names[v]}" for n, v in self.outputs))
        return "\n".join(lines) + "\n"

    def _vtext(self, vid: int) -> str:
        t = self.types[vid]
        return f"{self.names[vid]}: {t.dtype}[{'x'.join(map(str, t.shape))}]"

    def op_counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for op in self.ops.values():
            counts[op.qname] = counts.get(op.qname, 0) + 1
        return dict(sorted(counts.items()))
