"""Implementation selection: for every op, the kernel that runs it.

Candidates are the implementations the op's package registers for its kernel op: the
cheapest one whose tensor types match the op's input types wins (`OpPackage.select`: typed
ones by cost, the generic float one as the fallback). On int8 graphs the integer package's
typed kernels come first, and a typed kernel also needs its preparer to accept the op (its
encodings, attributes): that is the integer path's own planner deciding, which the compiler
runs on the expanded graph, so the record names exactly what the runtime will run; an op no
integer kernel serves runs its float kernel between dequantize and quantize ("float
fallback"). Data moves of the HTP form (Reshape, Slice, ChannelShuffle) are FREE.

A custom op's kernels are not an input of prepare today: without its package the record says
that its implementation is selected when the runtime loads the kernels.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from ..ir.graph import DEFAULT_PACKAGE
from ..kernels.default import DEFAULT
from ..kernels.oppkg import OpPackage, OpPackageError
from ..rewrite.graph import NONE, Op, OpGraph
from .ops import ONNX_OF

MOVES = ("Reshape", "Slice", "ChannelShuffle")


@dataclass(frozen=True)
class Choice:
    impl: str
    cost: str
    kind: str  # "float", "integer", "float-fallback", "move", "at-load"

    def to_json(self) -> dict[str, str]:
        return {"impl": self.impl, "cost": self.cost, "kind": self.kind}


def kernel_name(op: Op) -> str:
    return ONNX_OF.get(op.op, op.op) if op.package == DEFAULT_PACKAGE else op.op


def float_choice(op: Op, graph: OpGraph, packages: Mapping[str, OpPackage]) -> Choice:
    if op.package == DEFAULT_PACKAGE and op.op in MOVES:
        return Choice(f"htp::{op.op}", "FREE", "move")
    package = DEFAULT if op.package == DEFAULT_PACKAGE else packages.get(op.package)
    if package is None:
        return Choice(f"{op.package}::{op.op} (selected when its kernels load)", "?", "at-load")
    types = ["float32" if graph.types[v].enc else graph.types[v].dtype
             for v in op.inputs if v != NONE]
    try:
        impl = package.select(kernel_name(op), types)
    except OpPackageError as exc:
        return Choice(f"none: {exc}", "?", "missing")
    kind = "float" if op.package == DEFAULT_PACKAGE else "user"
    return Choice(f"{package.name}::{impl.describe()}", impl.cost.name, kind)


def choose(graph: OpGraph, packages: Mapping[str, OpPackage],
           qplan: Any = None) -> dict[int, Choice]:
    """The implementation of every op (qplan: the integer path's plan of the expanded graph)."""
    integer: dict[int, str] = {}
    if qplan is not None:
        for step in qplan.steps:
            node = step.label.rpartition("(node ")[2].rstrip(")")
            if step.integer and node.startswith("op") and node[2:].isdigit():
                integer[int(node[2:])] = step.label.partition(" (")[0]
    out = {}
    for op in graph.order():
        if op.id in integer:
            out[op.id] = _integer_choice(op, graph, integer[op.id])
        elif qplan is not None and any(graph.types[v].enc for v in op.outputs) \
                and not (op.package == DEFAULT_PACKAGE and op.op in MOVES):
            base = float_choice(op, graph, packages)
            out[op.id] = Choice(f"{base.impl} between dequantize and quantize", base.cost,
                                "float-fallback")
        else:
            out[op.id] = float_choice(op, graph, packages)
    return out


def _integer_choice(op: Op, graph: OpGraph, label: str) -> Choice:
    from ..runtime.integer.registry import select

    types = [graph.types[v].dtype for v in op.inputs if v != NONE]
    impl = select(kernel_name(op), types)
    if impl is None:  # the expansion's kernel saw other types (a transposed input)
        return Choice(label, "FAST", "integer")
    return Choice(f"integer::{impl.describe()}", impl.cost.name, "integer")
