"""Exact integer matrix products through BLAS.

numpy has no fast integer matmul, but float BLAS is exact on integers as long as every partial
sum it forms is: each value BLAS forms (a product, an FMA's result, a sum of two values it
formed, the output plus what it adds into it) is the sum of the products x_k * w_k over some
subset S of K, so when every such sum stays below 2^24 (float32) or 2^53 (float64) in
magnitude, sgemm or dgemm compute the integer result exactly, in any order and grouping. The
operands are centered (x - zero point, as the uint8 -> float conversion BLAS needs anyway goes),
so no zero-point correction term is needed and convolution padding is the real zero.

The bound: with x_k - zp in [lo, hi] (lo <= 0 <= hi: an encoding's [qmin - zp, qmax - zp]) and
P, N the sums of a row's positive weights and of its negative ones' magnitudes over a range of
K, a subset sum lies in [-(P |lo| + N hi), P hi + N |lo|], since each term x_k w_k with w_k > 0
lies in [w_k lo, w_k hi] and with w_k < 0 in [|w_k| (-hi), |w_k| |lo|]: the bound is
max(P hi + N |lo|, P |lo| + N hi). For activations after a Relu (zp 0: lo = 0, hi = 255) it is
255 x max(P, N), about half of max|x - zp| x sum |w| (the bound for lo = -hi, which the
requantization's multiplier width is defined by, `acc_bound`).

`pack` prepares a weight matrix once, at load (like onnxruntime's prepacked weights): it splits
the reduction axis K into the fewest equal chunks whose bound, with the weights' own sums per
output channel and the input's range, stays below 2^24, for float32 operands; a product then
takes one sgemm per chunk and adds the chunks' exact results in float64.
The chunks stay integers at the weights' own width (int8 is a quarter of float32 and an eighth
of float64: a model's weights are held once, narrow) and become BLAS operands one at a time,
when a product takes them (exact: every integer of 32 bits or less is a float64, and the
operand's bound keeps it exact in float32 too). When that would take more than MAX_F32_CHUNKS
chunks (16-bit activations), it uses float64 operands instead (chunked the same way below
2^53). With 8-bit activations and weights most layers need a single float32 chunk.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from ...kernels.blas import gemm

F32_LIMIT = 2 ** 24
F64_LIMIT = 2 ** 53
MAX_F32_CHUNKS = 4
OPERAND_ROWS = 1 << 22  # elements of a weight made BLAS operands at a time (_by_rows)
SUM_ROWS = 1 << 20  # elements of a weight whose |w| are summed at a time (_largest_sum)
_WIDER = {1: np.int16, 2: np.int32}  # holds |w| of an integer this wide (|-128| is 128)


@dataclass(frozen=True, eq=False)
class Packed:
    """Integer weights (G, M, K) as BLAS operands, split along K into exact chunks."""

    operands: tuple[np.ndarray, ...]  # (G, M, k1 - k0) views, integers (`dtype` per use)
    bounds: tuple[tuple[int, int], ...]  # the K range of each chunk
    dtype: np.dtype
    acc_bound: float  # max |sum_k x_k w_k| over outputs, for |x| <= the x_reach packed for
    partial_bound: float  # the largest |subset sum| of a row over all of K (<= acc_bound)
    span: tuple[int, int] = (0, 0)  # the inputs' (lo, hi) the bounds hold for (lo <= 0 <= hi)

    @property
    def shape(self) -> tuple[int, int, int]:
        g, m, _ = self.operands[0].shape
        return g, m, self.bounds[-1][1]


def pack(w: np.ndarray, x_reach: int, x_span: tuple[int, int] | None = None) -> Packed:
    """Pack integer weights (G, M, K) for products with inputs of |x| <= x_reach, whose values
    lie in x_span = (lo, hi) when it is known (an encoding's [qmin - zp, qmax - zp])."""
    w = np.asarray(w)
    rows = w[0] if w.shape[0] == 1 else w.reshape(-1, w.shape[-1])  # a view, even transposed
    acc_bound = float(_largest_sum(rows, [0])) * x_reach
    lo, hi = x_span if x_span is not None else (-x_reach, x_reach)
    span = (min(int(lo), 0), max(int(hi), 0))  # the padding's 0 is a value too
    dtype: type = np.float32
    bounds = _chunks(rows, span, F32_LIMIT, MAX_F32_CHUNKS)
    if bounds is None:
        dtype, bounds = np.float64, _chunks(rows, span, F64_LIMIT, w.shape[-1])
    if bounds is None:  # pragma: no cover (one column is always exact in float64)
        raise ValueError("weights too large for an exact product")
    operands = tuple(w[..., k0:k1] for k0, k1 in bounds)  # views: the weights held once
    return Packed(operands, tuple(bounds), np.dtype(dtype), acc_bound,
                  float(_largest_partial(rows, [0], span)), span)


def _chunks(rows: np.ndarray, span: tuple[int, int], limit: int,
            most: int) -> list[tuple[int, int]] | None:
    """The fewest (at most `most`) equal K chunks in which every row's bound (the module
    docstring's, for x in span) stays below `limit` (None: more would be needed)."""
    k = rows.shape[-1]
    total = float(_largest_partial(rows, [0], span))
    for n in range(max(1, math.ceil(total / (limit - 1))), min(most, max(k, 1)) + 1):
        edges = np.linspace(0, k, n + 1).round().astype(int)
        if float(_largest_partial(rows, edges[:-1], span)) < limit:
            return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True)]
    return None


def float32_parts(w: np.ndarray, packed: Packed, parts: int) -> list[tuple[int, int]] | None:
    """For a float32 product of several chunks whose weights w are (M, C, *taps): the fewest
    (from `parts` on, at most MAX_F32_CHUNKS) equal ranges of input channels [c0, c1) over each
    of which the bound (the module docstring's, for the inputs' span) stays below 2^24, so that
    each is an exact float32 product of its own; None where no such split exists."""
    channels, taps = w.shape[1], math.prod(w.shape[2:])
    rows = w.reshape(w.shape[0], -1)
    for n in range(parts, min(MAX_F32_CHUNKS, channels) + 1):
        edges = np.linspace(0, channels, n + 1).round().astype(int)
        if float(_largest_partial(rows, edges[:-1] * taps, packed.span)) < F32_LIMIT:
            return [(int(a), int(b)) for a, b in zip(edges[:-1], edges[1:], strict=True)]
    return None


def _largest_partial(rows: np.ndarray, edges: Sequence[int], span: tuple[int, int]) -> int:
    """The largest bound max(P hi + N |lo|, P |lo| + N hi) of a row (M, K) over a K range,
    from each edge to the next (the last to K), for x in span = (lo, hi), lo <= 0 <= hi: P and
    N from the sums of |w| and of w (P = (|w| + w) / 2 summed, N = (|w| - w) / 2), integers,
    summed by slices of rows as `_largest_sum` does."""
    if rows.size == 0:
        return 0
    lo, hi = -span[0], span[1]  # both >= 0
    step = max(1, SUM_ROWS // rows.shape[1])
    largest = 0
    for r0 in range(0, rows.shape[0], step):
        signed = rows[r0:r0 + step].astype(np.int64)
        total = np.add.reduceat(signed, edges, axis=1)
        np.abs(signed, out=signed)
        magnitude = np.add.reduceat(signed, edges, axis=1)
        positive, negative = (magnitude + total) // 2, (magnitude - total) // 2
        bound = np.maximum(positive * hi + negative * lo, positive * lo + negative * hi)
        largest = max(largest, int(bound.max()))
    return largest


def _largest_sum(rows: np.ndarray, edges: Sequence[int]) -> int:
    """The largest sum of |w| of a row (M, K) over a K range, from each edge to the next (the
    last to K): integers, summed by slices of rows, so that no wide copy of a large weight is
    held (the sums are exact whatever the slices)."""
    if rows.size == 0:
        return 0
    step = max(1, SUM_ROWS // rows.shape[1])
    largest = 0
    for r0 in range(0, rows.shape[0], step):
        magnitude = rows[r0:r0 + step].astype(_WIDER.get(rows.dtype.itemsize, np.int64))
        np.abs(magnitude, out=magnitude)
        sums = np.add.reduceat(magnitude, edges, axis=1, dtype=np.int64)
        largest = max(largest, int(sums.max()))
    return largest


def product(packed: Packed, cols: np.ndarray) -> np.ndarray:
    """packed @ cols for cols (..., G, K, P) (or (K, P) when G == 1): exact integers, float32
    (one chunk) or float64."""
    if cols.dtype != packed.dtype:
        raise TypeError(f"columns are {cols.dtype}, the packed weights {packed.dtype}")
    acc = None
    for (k0, k1), operand in zip(packed.bounds, packed.operands, strict=True):
        part = _by_rows(operand[0] if cols.ndim == 2 else operand, cols[..., k0:k1, :],
                        packed.dtype)
        if len(packed.bounds) == 1:
            return part
        if acc is None:
            acc = part.astype(np.float64)
        else:
            acc += part
    assert acc is not None
    return acc


def biased_product(packed: Packed, cols: np.ndarray, bias: np.ndarray) -> np.ndarray | None:
    """packed @ cols + bias for one group's columns (K, P), in float32, when exact: the product
    is one float32 chunk and the bias (M, 1), float32 integers, keeps every partial sum below
    2^24 (`packed.partial_bound` + max |bias| < F32_LIMIT). The output is pre-filled with the
    bias and sgemm adds the products into it (beta 1, `udo_build.kernels.blas.gemm`): each value it
    forms is the bias plus a partial sum of products, an integer below 2^24 in magnitude, so
    exact; the same numbers as the product plus the bias after it, without that pass. None
    when it does not apply (the caller adds the bias itself)."""
    w = packed.operands[0]
    if (packed.dtype != np.float32 or len(packed.bounds) != 1 or w.shape[0] != 1
            or cols.ndim != 2 or bias.dtype != np.float32 or w[0].size > OPERAND_ROWS
            or packed.partial_bound + float(np.abs(bias).max(initial=0)) >= F32_LIMIT):
        return None
    out = np.empty((w.shape[1], cols.shape[1]), np.float32)
    np.copyto(out, bias.reshape(-1, 1))
    return gemm(w[0].astype(np.float32), cols, out, 1.0)


def _by_rows(w: np.ndarray, cols: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """w @ cols with the integers w made BLAS operands of `dtype` OPERAND_ROWS elements or so
    at a time (slices of its rows): a large weight is never whole as floats. Exact whatever
    the slices, so the same bits."""
    m = w.shape[-2]
    step = max(1, OPERAND_ROWS // max(1, w.shape[-1]))
    if step >= m:
        return np.matmul(w.astype(dtype), cols)
    out = None
    for m0 in range(0, m, step):
        part = np.matmul(w[..., m0:m0 + step, :].astype(dtype), cols)
        if out is None:
            out = np.empty((*part.shape[:-2], m, part.shape[-1]), part.dtype)
        out[..., m0:m0 + step, :] = part
    assert out is not None
    return out


def chunk_size(reach_a: int, reach_b: int, k: int) -> tuple[np.dtype, int]:
    """For a product of two runtime operands (|a| <= reach_a, |b| <= reach_b) over K: the type
    and the K chunk size that keep it exact."""
    per_term = max(1, reach_a * reach_b)
    f32 = max(1, (F32_LIMIT - 1) // per_term)
    if math.ceil(k / f32) <= MAX_F32_CHUNKS:
        return np.dtype(np.float32), f32
    return np.dtype(np.float64), max(1, (F64_LIMIT - 1) // per_term)


def runtime_product(a: np.ndarray, b: np.ndarray, chunk: int) -> np.ndarray:
    """a @ b (centered integers in float32/float64) in K chunks of `chunk`, exact."""
    k = a.shape[-1]
    if k <= chunk:
        return np.matmul(a, b)
    acc = None
    for k0 in range(0, k, chunk):
        part = np.matmul(a[..., k0:k0 + chunk], b[..., k0:k0 + chunk, :])
        acc = part.astype(np.float64) if acc is None else acc.__iadd__(part)
    assert acc is not None
    return acc
