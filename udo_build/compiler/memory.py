"""Memory planning against the SoC's VTCM.

The ops run in the graph's topological order. Every activation (not a constant) lives from the
step that makes it (graph inputs: from the start) to its last reader (graph outputs: to the
end). It may be placed in TCM when the op that makes it and every op that reads it allow TCM
(ops.props: MODEL ops, custom ops among them, work in main memory), and it is not a graph
input or output (those are the caller's buffers, in main memory). A tensor that BHWC ops make
or read is stored in crouton layout (h, w padded to 8, channels to 32), others flat.

Placement is linear-scan first fit: at each step the tensors it makes take the lowest free
VTCM range that holds them (2 KiB aligned), tensors whose last reader ran give their range
back; a tensor that does not fit goes to main memory (DDR). The plan states where each tensor
lives, and the peak: the highest VTCM byte in use at any step.

An op whose working set (its activations) exceeds the VTCM was tiled before (the LATE rules,
fusion_rules.py); the plan lists the compute ops that still exceed it (`over_budget`), which
run from DDR. Data moves (Slice, Concat, Reshape, Transpose, ChannelShuffle) are DMA streams
between DDR and TCM and need no whole tensor in VTCM: they are never over budget.
"""

from __future__ import annotations

from bisect import insort
from dataclasses import dataclass, field
from typing import Any

from ..rewrite.graph import BHWC, NONE, OpGraph
from .ops import crouton_bytes, props

ALIGN = 2048
STREAMED = ("Slice", "Concat", "Reshape", "Transpose", "ChannelShuffle", "Identity")


@dataclass
class Placement:
    where: str  # "tcm" | "ddr"
    offset: int  # in VTCM, -1 for DDR
    bytes: int
    layout: str  # "crouton" | "flat"


@dataclass
class MemoryPlan:
    vtcm_bytes: int
    peak: int = 0
    tensors: dict[int, Placement] = field(default_factory=dict)
    over_budget: list[int] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        tcm = [p for p in self.tensors.values() if p.where == "tcm"]
        ddr = [p for p in self.tensors.values() if p.where == "ddr"]
        return {"vtcm_bytes": self.vtcm_bytes, "peak_vtcm_bytes": self.peak,
                "tcm_tensors": len(tcm), "ddr_tensors": len(ddr),
                "ddr_bytes": sum(p.bytes for p in ddr), "over_budget_ops": len(self.over_budget)}


class _Arena:
    """Free VTCM ranges, first fit."""

    def __init__(self, size: int) -> None:
        self.size = size
        self.free: list[tuple[int, int]] = [(0, size)]  # (offset, length), sorted

    def take(self, length: int) -> int:
        length = -(-length // ALIGN) * ALIGN
        for i, (offset, room) in enumerate(self.free):
            if room >= length:
                if room == length:
                    del self.free[i]
                else:
                    self.free[i] = (offset + length, room - length)
                return offset
        return -1

    def give(self, offset: int, length: int) -> None:
        length = -(-length // ALIGN) * ALIGN
        insort(self.free, (offset, length))
        merged: list[tuple[int, int]] = []
        for start, room in self.free:
            if merged and merged[-1][0] + merged[-1][1] == start:
                merged[-1] = (merged[-1][0], merged[-1][1] + room)
            else:
                merged.append((start, room))
        self.free = merged


def plan_memory(graph: OpGraph, vtcm_bytes: int) -> MemoryPlan:
    order = graph.order()
    plan = MemoryPlan(vtcm_bytes)
    last: dict[int, int] = {}
    tcm_ok: dict[int, bool] = {v: False for v in graph.inputs}
    crouton: dict[int, bool] = {}
    for step, op in enumerate(order):
        p = props(op)
        for k, vid in enumerate(op.inputs):
            if vid == NONE or vid in graph.consts:
                continue
            last[vid] = step
            tcm_ok[vid] = tcm_ok.get(vid, True) and p.tcm
            crouton[vid] = crouton.get(vid, False) or (op.layout == BHWC and k == 0)
        for vid in op.outputs:
            tcm_ok[vid] = tcm_ok.get(vid, True) and p.tcm
            crouton[vid] = crouton.get(vid, False) or op.layout == BHWC
    outputs = {v for _, v in graph.outputs}
    arena = _Arena(vtcm_bytes)
    for vid in graph.inputs:
        plan.tensors[vid] = Placement("ddr", -1, graph.types[vid].nbytes, "flat")
    ending: dict[int, list[int]] = {}
    for step, op in enumerate(order):
        for vid in op.outputs:
            _place(graph, plan, arena, vid, tcm_ok[vid] and vid not in outputs,
                   crouton.get(vid, False))
            end = last.get(vid, step) if vid not in outputs else len(order)
            ending.setdefault(end, []).append(vid)
        if op.op not in STREAMED and sum(
                plan.tensors[v].bytes for v in _activations(graph, op)) > vtcm_bytes:
            plan.over_budget.append(op.id)
        for vid in ending.pop(step, []):
            placed = plan.tensors[vid]
            if placed.where == "tcm":
                arena.give(placed.offset, placed.bytes)
    return plan


def _activations(graph: OpGraph, op: Any) -> list[int]:
    return [v for v in (*op.inputs, *op.outputs)
            if v != NONE and v not in graph.consts and v in graph.types]


def _place(graph: OpGraph, plan: MemoryPlan, arena: _Arena, vid: int, tcm: bool,
           crouton: bool) -> None:
    t = graph.types[vid]
    size = crouton_bytes(t) if crouton else t.nbytes
    offset = arena.take(size) if tcm else -1
    layout = "crouton" if crouton else "flat"
    if offset < 0:
        plan.tensors[vid] = Placement("ddr", -1, size, layout)
        return
    plan.tensors[vid] = Placement("tcm", offset, size, layout)
    plan.peak = max(plan.peak, offset + -(-size // ALIGN) * ALIGN)
