"""A small, immutable graph IR: named tensors, nodes in topological order, and weights.

Nodes are values: an op, the package that implements it ("default" for standard ops, else the
UDO package), input and output tensor names, and attributes (plain JSON values, sorted). Equal
structure compares and hashes equal. A `Model` pairs a `Graph` with its weights (numpy arrays by
name). `Model.digest()` is a structural digest over the canonical text of the graph and the
digest of every weight, so it is stable across processes and independent of dict order.
"""

from __future__ import annotations

import gc
import hashlib
import json
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ..canonical import canonical_json, sha256_hex

DEFAULT_PACKAGE = "default"
# The ONNX opset of a graph that names none: bundles written before graphs recorded theirs were
# all converted to it (the importer's target opset)
LEGACY_OPSET = 17
Attr = Any  # int | float | str | bool | tuple of those (nested)


def freeze(value: Any) -> Attr:
    """A JSON-like value as a hashable one (lists become tuples, numpy scalars become Python)."""
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, dict):
        return tuple(sorted((str(k), freeze(v)) for k, v in value.items()))
    return value


def thaw(value: Attr) -> Any:
    return [thaw(v) for v in value] if isinstance(value, tuple) else value


@dataclass(frozen=True)
class TensorInfo:
    """A tensor's name, shape (None when unknown; a str for a symbolic dim) and numpy dtype."""

    name: str
    dtype: str
    shape: tuple[int | str, ...] | None = None

    @property
    def static_shape(self) -> tuple[int, ...] | None:
        if self.shape is None or any(not isinstance(d, int) for d in self.shape):
            return None
        return tuple(int(d) for d in self.shape)  # type: ignore[arg-type]

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "dtype": self.dtype,
                "shape": None if self.shape is None else list(self.shape)}

    @staticmethod
    def from_json(data: dict[str, Any]) -> TensorInfo:
        shape = data.get("shape")
        return TensorInfo(data["name"], data["dtype"], None if shape is None else tuple(shape))


@dataclass(frozen=True)
class Node:
    name: str
    op: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    attrs: tuple[tuple[str, Attr], ...] = ()
    package: str = DEFAULT_PACKAGE

    @staticmethod
    def make(name: str, op: str, inputs: Iterable[str], outputs: Iterable[str],
             attrs: Mapping[str, Any] | None = None, package: str = DEFAULT_PACKAGE) -> Node:
        return Node(name, op, tuple(inputs), tuple(outputs),
                    tuple(sorted((k, freeze(v)) for k, v in (attrs or {}).items())), package)

    def attr(self, name: str, default: Any = None) -> Any:
        for key, value in self.attrs:
            if key == name:
                return thaw(value)
        return default

    @property
    def kwargs(self) -> dict[str, Any]:
        return {k: thaw(v) for k, v in self.attrs}

    def with_attrs(self, **changes: Any) -> Node:
        attrs = {**self.kwargs, **changes}
        return replace(self, attrs=tuple(sorted((k, freeze(v)) for k, v in attrs.items())))

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "op": self.op, "package": self.package,
                "inputs": list(self.inputs), "outputs": list(self.outputs),
                "attrs": {k: thaw(v) for k, v in self.attrs}}

    @staticmethod
    def from_json(data: dict[str, Any]) -> Node:
        return Node.make(data["name"], data["op"], data["inputs"], data["outputs"],
                         data.get("attrs") or {}, data.get("package", DEFAULT_PACKAGE))


@dataclass(frozen=True)
class Graph:
    name: str
    inputs: tuple[TensorInfo, ...]
    outputs: tuple[TensorInfo, ...]
    nodes: tuple[Node, ...]
    values: tuple[TensorInfo, ...] = ()  # known shapes and dtypes of other tensors
    opset: int = LEGACY_OPSET  # the ONNX opset whose semantics its default-package nodes have

    def info(self, name: str) -> TensorInfo | None:
        for group in (self.inputs, self.outputs, self.values):
            for t in group:
                if t.name == name:
                    return t
        return None

    def infos(self) -> dict[str, TensorInfo]:
        out = {t.name: t for t in self.values}
        out.update({t.name: t for t in self.inputs})
        out.update({t.name: t for t in self.outputs})
        return out

    def producers(self) -> dict[str, Node]:
        return {o: n for n in self.nodes for o in n.outputs if o}

    def consumers(self) -> dict[str, list[Node]]:
        out: dict[str, list[Node]] = {}
        for n in self.nodes:
            for i in n.inputs:
                if i:
                    out.setdefault(i, []).append(n)
        return out

    def to_json(self) -> dict[str, Any]:
        with bulk_building():
            return {"name": self.name, "inputs": [t.to_json() for t in self.inputs],
                    "outputs": [t.to_json() for t in self.outputs],
                    "nodes": [n.to_json() for n in self.nodes],
                    "values": [t.to_json() for t in sorted(self.values, key=lambda t: t.name)],
                    "opset": self.opset}

    @staticmethod
    def from_json(data: dict[str, Any]) -> Graph:
        with bulk_building():
            return Graph(data["name"], tuple(TensorInfo.from_json(t) for t in data["inputs"]),
                         tuple(TensorInfo.from_json(t) for t in data["outputs"]),
                         tuple(Node.from_json(n) for n in data["nodes"]),
                         tuple(TensorInfo.from_json(t) for t in data.get("values", [])),
                         data.get("opset", LEGACY_OPSET))

    def text(self) -> str:
        """A stable, readable text form (one line per node)."""
        lines = [f"graph {self.name}("
                 + ", ".join(_tensor_text(t) for t in self.inputs) + ")"]
        for n in self.nodes:
            attrs = " ".join(f"{k}={json.dumps(thaw(v), separators=(',', ':'))}"
                             for k, v in n.attrs)
            op = n.op if n.package == DEFAULT_PACKAGE else f"{n.package}::{n.op}"
            lines.append(f"  {', '.join(n.outputs)} = {op}({', '.join(n.inputs)})"
                         + (f" [{attrs}]" if attrs else "") + f"  # {n.name}")
        lines.append("  return " + ", ".join(_tensor_text(t) for t in self.outputs))
        return "\n".join(lines) + "\n"


@contextmanager
def bulk_building() -> Iterator[None]:
    """Build or read a large graph without the cyclic garbage collector's passes.

    A graph is a tree of tuples, strings and frozen values: the collector never finds a cycle
    in it, but while one is built every pass re-walks the objects made so far, so that converting
    a model costs time growing faster than its node count. Reference counting still frees
    everything; the collector runs again afterwards (as before, if it was on)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def needed_nodes(nodes: Iterable[Node], outputs: Iterable[str]) -> list[Node]:
    """The nodes the outputs depend on, in their order (nodes is topological)."""
    needed = set(outputs)
    kept = []
    for node in reversed(list(nodes)):
        if any(o in needed for o in node.outputs):
            kept.append(node)
            needed.update(i for i in node.inputs if i)
    return kept[::-1]


def _tensor_text(t: TensorInfo) -> str:
    shape = "?" if t.shape is None else "x".join(str(d) for d in t.shape)
    return f"{t.name}: {t.dtype}[{shape}]"


def array_digest(array: np.ndarray) -> str:
    """sha256 over dtype, shape and the C-ordered little-endian bytes of an array."""
    a = np.asarray(array, order="C")  # keeps 0-d apart from [1]
    if a.dtype.byteorder == ">":
        a = a.astype(a.dtype.newbyteorder("<"))
    h = hashlib.sha256(f"{a.dtype.str}|{a.shape}|".encode())
    h.update(a.tobytes())
    return h.hexdigest()


@dataclass(frozen=True)
class Model:
    """A graph and its weights (constant tensors by name)."""

    graph: Graph
    weights: Mapping[str, np.ndarray] = field(default_factory=dict, compare=False)

    def weight_digests(self) -> dict[str, str]:
        return {name: array_digest(a) for name, a in sorted(self.weights.items())}

    def digest(self) -> str:
        return sha256_hex(canonical_json({"schema": "udo-build/model", "version": 1,
                                          "graph": self.graph.to_json(),
                                          "weights": self.weight_digests()}))

    def iter_weights(self) -> Iterator[tuple[str, np.ndarray]]:
        yield from sorted(self.weights.items())
