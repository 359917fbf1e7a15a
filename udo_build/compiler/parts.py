"""Model parts: a limit on record bytes cuts the graph's HTP subnets into sequential parts.

    sizes = constant_sizes(bundle, precision)             # weight -> bytes a record holds
    plan = plan_parts(model, runtime_partition, sizes, limit)
    part = partition(model, allowed, outputs, cuts=plan.cuts)   # parts as subnets
    check_records(plan, [(subnet index, record bytes), ...])    # after prepare

A part is an HTP subnet (udo_build.compiler.partition) that a cut starts: it prepares as its own
record (`<graph>:subnet<i>`) and the tensors a later part reads are its record's outputs and the
next part's inputs (the seed rule of subnets), so a run chains the parts as it chains subnets
(udo_build.compiler.subnet_run), with the same encodings at every boundary.

A part's bytes are estimated before prepare: the constants its nodes read as the record holds
them (`constant_sizes`: int8 records hold weights at their encodings' width, 4-bit ones packed
two per byte, fp16 records float32 constants as float16; others at their own width), each at a
64-byte aligned offset, plus `OVERHEAD` per record and `PER_NODE` per node (the header, the
graph's JSON). The cuts are chosen in the graph's topological order, deterministically: a part
takes nodes while its estimate stays within the limit; when the next node would pass it, the
part ends at the position of its nodes where the fewest tensors cross (made before, read after:
for a decoder stack, between layers, where only the hidden state does), the latest of those.
A single node whose estimate alone passes the limit cannot be placed: `PartTooLarge`. After
prepare, `check_records` compares every part's real record bytes with the limit.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import StepFailed
from ..ir.graph import Model, Node
from .partition import HTP, Partition

OVERHEAD = 2048  # a record's fixed bytes (prefix, header) the estimate counts
PER_NODE = 256  # a node's share of the graph's JSON (its ops, values, memory plan)
ALIGN = 64


class PartTooLarge(Exception):
    """One node needs more record bytes than the limit allows (the kind says where)."""

    def __init__(self, node: str, op: str, needed: int, limit: int) -> None:
        super().__init__(node, op, needed, limit)
        self.node, self.op, self.needed, self.limit = node, op, needed, limit

    def __str__(self) -> str:
        return (f"node {self.node} ({self.op}) alone needs about {self.needed:,} record bytes "
                f"(its constants and the record's overhead), over the limit of "
                f"{self.limit:,} bytes: no cut can make a part that small")


@dataclass(frozen=True)
class Part:
    """One part: its HTP subnet's nodes (first, last, count), estimated record bytes and the
    tensors that cross its boundaries."""

    index: int  # the subnet's index in the partition with the cuts
    first: str
    last: str
    nodes: int
    estimated_bytes: int
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "first": self.first, "last": self.last,
                "nodes": self.nodes, "estimated_bytes": self.estimated_bytes,
                "inputs": list(self.inputs), "outputs": list(self.outputs)}


@dataclass(frozen=True)
class PartsPlan:
    """The cuts of one bundle's graph under a limit (the `parts` step's output)."""

    max_record_bytes: int
    precision: str
    outputs: tuple[str, ...]  # the requested outputs the partition is for
    cuts: tuple[str, ...]  # nodes that start a part
    parts: tuple[Part, ...]

    def to_json(self) -> dict[str, Any]:
        return {"max_record_bytes": self.max_record_bytes, "precision": self.precision,
                "outputs": list(self.outputs), "cuts": list(self.cuts),
                "parts": [p.to_json() for p in self.parts]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PartsPlan:
        parts = tuple(Part(int(p["index"]), p["first"], p["last"], int(p["nodes"]),
                           int(p["estimated_bytes"]), tuple(p["inputs"]), tuple(p["outputs"]))
                      for p in data["parts"])
        return cls(int(data["max_record_bytes"]), str(data["precision"]),
                   tuple(data["outputs"]), tuple(data["cuts"]), parts)


def constant_sizes(bundle: Any, precision: str) -> dict[str, int]:
    """Each weight's bytes as a record of `precision` holds it (udo_build.compiler.record)."""
    params: Mapping[str, Any] = {}
    if precision == "int8":
        from ..ir.qmodel import from_bundle

        params = from_bundle(bundle).params
    out = {}
    for name, array in bundle.model.weights.items():
        a = np.asarray(array)
        encs = params.get(name)
        if encs and a.dtype.kind == "f":
            bits = encs[0].bitwidth
            width = 0.5 if bits == 4 else (1 if bits <= 8 else 2 if bits <= 16 else 4)
            out[name] = int(np.ceil(a.size * width))
        elif precision == "fp16" and a.dtype == np.float32:
            out[name] = a.size * 2
        else:
            out[name] = a.nbytes
    return out


def _aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def estimate(nodes: Sequence[Node], sizes: Mapping[str, int]) -> int:
    """The record bytes a part of these nodes is estimated at (its weights counted once)."""
    weights = {i for n in nodes for i in n.inputs if i in sizes}
    return OVERHEAD + PER_NODE * len(nodes) + sum(_aligned(sizes[w]) for w in sorted(weights))


def plan_parts(model: Model, part: Partition, sizes: Mapping[str, int], limit: int,
               precision: str, outputs: Sequence[str]) -> PartsPlan:
    """The cuts of every HTP subnet of `part` (the partition by runtimes alone)."""
    by_name = {n.name: n for n in model.graph.nodes}
    order = [by_name[name] for s in part.subnets for name in s.nodes]
    crossing = _crossing(order, set(outputs))
    cuts: list[str] = []
    start = 0
    for subnet in part.subnets:
        end = start + len(subnet.nodes)
        if subnet.runtime == HTP:
            cuts += _cut(order, start, end, crossing, sizes, limit)
        start = end
    return _plan(model, part, cuts, sizes, limit, precision, outputs)


def _cut(order: Sequence[Node], start: int, end: int, crossing: Sequence[int],
         sizes: Mapping[str, int], limit: int) -> list[str]:
    """The nodes of order[start:end] that start a part (greedy, see the module docstring)."""
    cuts: list[str] = []
    begin = start
    while True:
        stop = _fits(order, begin, end, sizes, limit)
        if stop == end:
            return cuts
        if stop == begin:
            node = order[begin]
            raise PartTooLarge(node.name, node.op, estimate([node], sizes), limit)
        at = min(range(begin + 1, stop + 1), key=lambda p: (crossing[p], -p))
        cuts.append(order[at].name)
        begin = at


def _fits(order: Sequence[Node], begin: int, end: int, sizes: Mapping[str, int],
          limit: int) -> int:
    """The largest stop <= end such that order[begin:stop] is estimated within the limit."""
    seen: set[str] = set()
    total = OVERHEAD
    for p in range(begin, end):
        node = order[p]
        new = {i for i in node.inputs if i in sizes and i not in seen}
        total += PER_NODE + sum(_aligned(sizes[w]) for w in new)
        if total > limit:
            return p
        seen |= new
    return end


def _crossing(order: Sequence[Node], requested: set[str]) -> list[int]:
    """For each position p (a cut before order[p]), how many tensors made before p are read at
    or after it (or are requested outputs made before it, which cost nothing: not counted)."""
    made = {o: i for i, n in enumerate(order) for o in n.outputs if o}
    last = {}
    for i, node in enumerate(order):
        for name in node.inputs:
            if name in made:
                last[name] = i
    delta = [0] * (len(order) + 2)
    for name, i in made.items():
        if name in last and last[name] > i and name not in requested:
            delta[i + 1] += 1
            delta[last[name] + 1] -= 1
    out, running = [], 0
    for p in range(len(order) + 1):
        running += delta[p]
        out.append(running)
    return out


def _plan(model: Model, part: Partition, cuts: Sequence[str], sizes: Mapping[str, int],
          limit: int, precision: str, outputs: Sequence[str]) -> PartsPlan:
    from .partition import partition

    allowed = {n: (s.runtime,) for s in part.subnets for n in s.nodes}
    cut = partition(model, allowed, outputs, cuts)
    by_name = {n.name: n for n in model.graph.nodes}
    parts = tuple(Part(s.index, s.nodes[0], s.nodes[-1], len(s.nodes),
                       estimate([by_name[n] for n in s.nodes], sizes), s.inputs, s.outputs)
                  for s in cut.htp())
    return PartsPlan(limit, precision, tuple(outputs), cut.cuts, parts)


def check_records(plan: PartsPlan, records: Sequence[tuple[int, int]]) -> None:
    """A StepFailed when a prepared part's record (subnet index, bytes) passes the limit."""
    over = [(i, size) for i, size in records if size > plan.max_record_bytes]
    if not over:
        return
    known = {p.index: p for p in plan.parts}
    shown = "; ".join(
        f"part {i} ({known[i].first} .. {known[i].last}, {known[i].nodes} nodes): "
        f"{size:,} bytes, estimated {known[i].estimated_bytes:,}" if i in known
        else f"subnet {i}: {size:,} bytes" for i, size in over)
    raise StepFailed("prepare", f"{len(over)} part record(s) over the limit of "
                     f"{plan.max_record_bytes:,} bytes (prepare.max_record_bytes): {shown}; "
                     "lower the limit so that the cuts make smaller parts, or raise it")


def cuts_for(meta: Mapping[str, Any], precision: str, outputs: Sequence[str]
             ) -> tuple[str, ...]:
    """The cuts a bundle's records were prepared with (its meta `parts`, written by assemble)
    for a run of this precision and these outputs: those prepared for the same outputs, else
    the first of the same precision (a run of other outputs prepares its parts online), else
    none."""
    rows = [r for r in meta.get("parts") or () if r.get("precision") == precision]
    same = [r for r in rows if sorted(r.get("outputs") or ()) == sorted(outputs)]
    chosen = (same or rows or [{}])[0]
    return tuple(chosen.get("cuts") or ())
