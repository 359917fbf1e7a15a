"""AUTOSPLIT: an op split along a bhwc axis into pieces that each read slices of their inputs,
concatenated back along that axis.

Along the batch axis every per-sample op splits (BHWC ops and elementwise ones). Along the rows
(axis 1) elementwise ops slice each input that has those rows (a broadcast input of one row is
read whole), per-pixel BHWC ops (BatchNorm, LRN) slice their data input, and windows (Conv2d,
MaxPool2d, AvgPool2d without ceil_mode) read the input rows their output rows need: the halo
above and below, with the padding of the first and last piece only. Pieces compute exactly what
the whole op computes for their rows: integer results are bit-identical, float ones equal up to
the order of BLAS sums.

`typical_rows(op, graph, budget)` is the typical slice: the largest multiple of 8 rows (the
crouton height; 4, 2, 1 when 8 rows do not fit) whose working set fits the budget.

`AutoSplit(axis, rows)` is the replacement value (the vendor's AUTOSPLIT): the root op split along
a bhwc axis into pieces of `rows` (an int or an `Expr`, e.g. the typical slice).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..rewrite.graph import BHWC, Op, OpGraph, TType
from ..rewrite.replace import Builder
from ..rewrite.rules import Expr, Match
from .ops import BINARY, UNARY, crouton_bytes

PER_PIXEL = ("BatchNorm", "LRN")


@dataclass(frozen=True)
class AutoSplit:
    axis: int
    rows: Any  # int or Expr

    def build(self, m: Match, b: Builder) -> int | None:
        rows = self.rows(m) if isinstance(self.rows, Expr) else self.rows
        return None if not rows else split(b, m.op("*"), self.axis, int(rows))


def splittable(op: Op, axis: int, graph: OpGraph) -> bool:
    if op.layout == BHWC:
        if axis == 0:
            return op.op not in ("InstanceNorm",)
        if op.op in PER_PIXEL:
            return True
        return _window(op, graph) is not None and axis == 1
    return op.layout == "any" and (op.op in UNARY or op.op in BINARY)


def _window(op: Op, graph: OpGraph) -> tuple[int, int, int] | None:
    """(kernel rows, stride, dilation) of a window op, None when it cannot split by rows."""
    if op.op == "Conv2d":
        kernel = graph.types[op.inputs[1]].shape[2:]
    elif op.op in ("MaxPool2d", "AvgPool2d") and not op.attr("ceil_mode", 0):
        kernel = op.attr("kernel_shape")
    else:
        return None
    strides = op.attr("strides") or [1, 1]
    dilations = op.attr("dilations") or [1, 1]
    if op.attr("auto_pad", "NOTSET") not in ("NOTSET", ""):
        return None
    return int(kernel[0]), int(strides[0]), int(dilations[0])


def input_rows(op: Op, graph: OpGraph, lo: int, hi: int) -> tuple[int, int, int, int]:
    """(first row, end row, pad above, pad below) of the data input that output rows
    [lo, hi) of a window op read."""
    k, s, d = _window(op, graph)  # type: ignore[misc]
    pads = op.attr("pads") or [0, 0, 0, 0]
    height = graph.types[op.inputs[0]].shape[1]
    start = lo * s - int(pads[0])
    end = (hi - 1) * s - int(pads[0]) + (k - 1) * d + 1
    return max(start, 0), min(end, height), max(-start, 0), max(end - height, 0)


def piece_bytes(op: Op, graph: OpGraph, axis: int, rows: int) -> int:
    """The working set of one piece of `rows` output rows (the first, the largest)."""
    out = graph.types[op.outputs[0]]
    total = crouton_bytes(out.with_shape(_sized(out.shape, axis, rows)))
    for i, vid in enumerate(op.inputs):
        if vid < 0 or vid in graph.consts:
            continue
        t = graph.types[vid]
        if i == 0 and axis == 1 and _window(op, graph) is not None:
            first, end, _, _ = input_rows(op, graph, 0, min(rows, out.shape[1]))
            n = end - first
        else:
            n = rows if t.shape[axis] == out.shape[axis] else t.shape[axis]
        total += crouton_bytes(t.with_shape(_sized(t.shape, axis, n)))
    return total


def typical_rows(op: Op, graph: OpGraph, budget: int, axis: int = 1) -> int:
    """The largest multiple of 8 rows (else 4, 2, 1) whose piece fits the budget; when none
    does, the candidate with the smallest working set, if that is smaller than the whole op's
    (best effort); 0: splitting does not help."""
    total = graph.types[op.outputs[0]].shape[axis]
    candidates = [r for r in [*range(total // 8 * 8, 0, -8), 4, 2, 1] if r < total]
    sizes = {r: piece_bytes(op, graph, axis, r) for r in candidates}
    for rows in candidates:
        if sizes[rows] <= budget:
            return rows
    if not sizes:
        return 0
    best = min(candidates, key=lambda r: (sizes[r], -r))
    return best if sizes[best] < piece_bytes(op, graph, axis, total) else 0


def _sized(shape: tuple[int, ...], axis: int, n: int) -> tuple[int, ...]:
    return shape[:axis] + (n,) + shape[axis + 1:]


def split(b: Builder, op: Op, axis: int, rows: int) -> int | None:
    """The op as pieces of `rows` along `axis`, concatenated; None when it does not split."""
    graph = b.graph
    out = graph.types[op.outputs[0]]
    total = out.shape[axis]
    if len(op.outputs) != 1 or rows >= total or not splittable(op, axis, graph):
        return None
    pieces = []
    for lo in range(0, total, rows):
        hi = min(lo + rows, total)
        pieces.append(_piece(b, op, axis, lo, hi, out))
    concat = b.op("Concat", pieces, [out], {"axis": axis})
    return concat.outputs[0]


def _piece(b: Builder, op: Op, axis: int, lo: int, hi: int, out: TType) -> int:
    graph = b.graph
    attrs = op.kwargs
    inputs = []
    for i, vid in enumerate(op.inputs):
        if vid < 0 or (i > 0 and op.layout == BHWC):
            inputs.append(vid)
            continue
        t = graph.types[vid]
        if vid in graph.consts:
            inputs.append(_const_slice(b, vid, t, axis, lo, hi, out))
        elif i == 0 and axis == 1 and _window(op, graph) is not None:
            first, end, above, below = input_rows(op, graph, lo, hi)
            pads = list(attrs.get("pads") or [0, 0, 0, 0])
            attrs["pads"] = [above, pads[1], below, pads[3]]
            inputs.append(_slice(b, vid, t, axis, first, end))
        elif t.shape[axis] == out.shape[axis]:
            inputs.append(_slice(b, vid, t, axis, lo, hi))
        else:
            inputs.append(vid)  # broadcast along the axis
    piece = b.op(op.op, inputs, [out.with_shape(_sized(out.shape, axis, hi - lo))], attrs,
                 package=op.package, layout=op.layout)
    return piece.outputs[0]


def _slice(b: Builder, vid: int, t: TType, axis: int, lo: int, hi: int) -> int:
    starts = [0] * len(t.shape)
    ends = list(t.shape)
    starts[axis], ends[axis] = lo, hi
    if (lo, hi) == (0, t.shape[axis]):
        return vid
    return b.op("Slice", [vid], [t.with_shape(_sized(t.shape, axis, hi - lo))],
                {"starts": starts, "ends": ends}).outputs[0]


def _const_slice(b: Builder, vid: int, t: TType, axis: int, lo: int, hi: int,
                 out: TType) -> int:
    if t.shape[axis] != out.shape[axis] or out.shape[axis] == 1:
        return vid
    index = tuple(slice(lo, hi) if a == axis else slice(None) for a in range(len(t.shape)))
    return b.const(b.graph.consts[vid][index], t.enc, t.dtype)
