"""A model's node list as an `OpGraph` in the model's own layout and vocabulary, and back.

    nodes, constants, fired = rewrite_nodes(nodes, constants, keep, types, rules)

What the float runtime's load-time plan and quantization's folding rewrite with the one engine.
Every tensor is a value named as in the model (`MODEL_DIALECT` is `named`: constants are never
merged, and a value a rule makes takes the name of the tensor it replaces), every node an op whose
origin is the node's name; the requested tensors (`keep`) are the graph outputs, so no rule
removes them. Back, the ops come in the model's order: an op takes the place of the node it keeps
the name of (its origin), and the constants are those the nodes read. Both ways cost one pass
over the nodes (plus a heap of the ready ops).
"""

from __future__ import annotations

import heapq
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..ir.graph import Node
from .engine import Trace, rewrite
from .graph import MODEL_DIALECT, NONE, UNKNOWN, Op, OpGraph, TType
from .rules import Rule


def rewrite_nodes(nodes: Sequence[Node], constants: Mapping[str, np.ndarray],
                  keep: Sequence[str], types: Mapping[str, TType], rules: Sequence[Rule],
                  ctx: Any = None) -> tuple[list[Node], dict[str, np.ndarray], list[str]]:
    """The rules applied to a fixed point: (nodes, the constants they read, the rules fired in
    order). `types` gives the known tensors' types (others are of unknown shape and dtype)."""
    graph, omitted = to_graph(nodes, constants, keep, types)
    trace = Trace()
    rewrite(graph, rules, ctx, trace, "model")
    out, used = to_nodes(graph, {n.name: i for i, n in enumerate(nodes)}, omitted)
    return out, used, trace.firings


def to_graph(nodes: Sequence[Node], constants: Mapping[str, np.ndarray], keep: Sequence[str],
             types: Mapping[str, TType]) -> tuple[OpGraph, frozenset[int]]:
    """(the graph, the values standing for omitted outputs)."""
    graph = OpGraph("model", MODEL_DIALECT)
    values: dict[str, int] = {}
    omitted: set[int] = set()

    def value(name: str) -> int:
        vid = values.get(name)
        if vid is None:
            if name in constants:
                vid = graph.const(constants[name], name)
            else:
                vid = graph.value(types.get(name, TType(UNKNOWN, "")), name)
                graph.inputs.append(vid)
            values[name] = vid
        return vid

    for node in nodes:
        inputs = [value(n) if n else NONE for n in node.inputs]
        names = list(node.outputs)
        while names and not names[-1]:
            names.pop()
        outputs = [types.get(n, TType(UNKNOWN, "")) for n in names]
        op = graph.add(node.op, inputs, outputs, node.kwargs, package=node.package,
                       origin=node.name, names=[n or f"{node.name}:{i}"
                                                for i, n in enumerate(names)])
        for name, vid in zip(names, op.outputs, strict=True):
            if name:
                values[name] = vid
            else:
                omitted.add(vid)
    graph.outputs = [(name, value(name)) for name in keep]
    return graph, frozenset(omitted)


def to_nodes(graph: OpGraph, position: Mapping[str, int],
             omitted: frozenset[int]) -> tuple[list[Node], dict[str, np.ndarray]]:
    """The ops as nodes in the model's order (an op at the position of the node its origin
    names), and the constants they read by name."""
    names = {vid: "" if vid in omitted else graph.names[vid] for vid in graph.types}
    taken: set[str] = set()
    nodes, used = [], {}
    for op in _ordered(graph, position):
        name, n = op.origin, 1
        while name in taken:  # two ops from one node (none of today's rules makes them)
            n += 1
            name = f"{op.origin}~{n}"
        taken.add(name)
        inputs = ["" if v == NONE else names[v] for v in op.inputs]
        used.update((names[v], graph.consts[v]) for v in op.inputs if v in graph.consts)
        nodes.append(Node.make(name, op.op, inputs, [names[v] for v in op.outputs], op.kwargs,
                               op.package))
    used.update((n, graph.consts[v]) for n, v in graph.outputs if v in graph.consts)
    return nodes, used


def _ordered(graph: OpGraph, position: Mapping[str, int]) -> list[Op]:
    """A topological order that keeps the model's: ready ops by (position of their origin, id)."""
    pending: dict[int, int] = {}
    ready: list[tuple[int, int]] = []
    for op in graph.ops.values():
        n = sum(1 for v in set(op.inputs) if v in graph.producer)
        pending[op.id] = n
        if not n:
            ready.append((position.get(op.origin, len(position)), op.id))
    heapq.heapify(ready)
    out = []
    while ready:
        op = graph.ops[heapq.heappop(ready)[1]]
        out.append(op)
        for vid in op.outputs:
            for reader in graph.users[vid]:
                pending[reader] -= 1
                if not pending[reader]:
                    reader_op = graph.ops[reader]
                    heapq.heappush(ready, (position.get(reader_op.origin, len(position)), reader))
    return out
