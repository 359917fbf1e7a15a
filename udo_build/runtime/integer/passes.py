"""The integer path's passes run compiled (`udo_build.kernels.compiled`), where the arrays' layout
lets them: each function returns the result, or None and the caller runs its numpy passes (the
library unavailable or switched off, a layout the C loop does not take). Both give the same
integers (the C loop's arithmetic is proved in that module and in `fixed.py`'s docstring).

The C loop reads an accumulator as (channels, rows, cols): one axis the multipliers and the
offset vary along (every axis before it of size 1), the axes after it merged into rows of
contiguous columns at a fixed stride, so a tap GEMM's output with its junk columns is read in
place. Below NATIVE_MIN elements the numpy passes run: a call through ctypes costs about 30 us
of Python (its pointers and arguments), which numpy's passes over a small tensor undercut.

A residual Add fused into its convolution (`fuse.py`) looks its 8-bit result up in the Add's
table of every pair; where the Add's arithmetic (`sum_form`) gives the table's bytes for all
65536 pairs, checked once by the same compiled code, the pass computes them instead: a few
vector operations per byte against a load from a 64 KiB table that the L1 cache does not hold.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ...kernels import compiled

NATIVE_MIN = 1 << 14  # elements from which the requantization and the lookup run compiled


@dataclass(frozen=True, eq=False)
class SumForm:
    """An 8-bit Add's pair table as arithmetic (`sum_form`): numbers = (f0, f1, c, lo, hi, zp)
    with table[a << 8 | b] = zp + rint(clip(f0 a + f1 b + c, lo, hi)) for the typed values a,
    b; kinds: bit 0 set when the first input is signed, bit 1 the second."""

    numbers: np.ndarray
    kinds: int


def sum_form(table: np.ndarray, requant: Any, zero_points: tuple[int, ...], q_dtype: np.dtype,
             q_first: bool) -> SumForm | None:
    """The arithmetic of a two-input 8-bit Add (eltwise.add: one shift, every term on one grid,
    exact in float64) that gives `table`'s bytes for every one of the 65536 pairs, checked by
    the compiled code that will compute it (udo_pair_sum); the fused convolution's output is
    the first input (`q_first`) or the second, of q_dtype; the other input's signedness is the
    one the check passes with. None: not the same bytes, a wide or 2-byte result, or no
    compiled library."""
    lib = compiled.library()
    if (lib is None or requant.wide or table.size != 1 << 16 or table.itemsize != 1
            or len(zero_points) != 2 or requant.factor.size != 2):
        return None
    f = requant.factor.reshape(-1).astype(np.float64)
    zp = requant.zero_point
    numbers = np.array([f[0], f[1], -float(np.dot(np.asarray(zero_points, np.float64), f)),
                        float(requant.lo - zp), float(requant.hi - zp), float(zp)], np.float64)
    every = np.arange(256, dtype=np.uint8)
    a, b = np.repeat(every, 256), np.tile(every, 256)
    q_signed = int(np.dtype(q_dtype).kind == "i")
    raw = table.view(np.uint8)
    for other_signed in (0, 1):
        kinds = q_signed | other_signed << 1 if q_first else other_signed | q_signed << 1
        out = np.empty(a.size, np.uint8)
        lib.pair_sum(a.ctypes.data, b.ctypes.data, a.size, numbers.ctypes.data, kinds,
                     out.ctypes.data)
        if np.array_equal(out, raw):
            return SumForm(numbers, kinds)
    return None


def requantized(acc: np.ndarray, factor: np.ndarray, offset: np.ndarray | float | None,
                clamp: tuple[int, int], zp: int, dtype: np.dtype,
                pair: tuple[np.ndarray, np.ndarray, bool] | None = None,
                sum: SumForm | None = None) -> np.ndarray | None:
    """zp + rint(clip((acc + offset) x factor, lo - zp, hi - zp)) as `dtype`, clamp = (lo, hi);
    with `pair` (table, other, q_first), that result looked up with the other input's bytes:
    table[q << 8 | other] (q_first) or table[other << 8 | q], or computed by `sum` (the same
    bytes). None: not run (see above)."""
    if (acc.size < NATIVE_MIN or acc.dtype not in compiled.ACC_KINDS
            or dtype not in compiled.OUT_KINDS):
        return None
    lib = compiled.library()
    offsets = None if offset is None else np.asarray(offset, np.float64)
    layout = None if lib is None else _channel_rows(acc, factor, offsets)
    if layout is None or (pair is not None and not _pairs_with(pair, acc.shape, dtype)):
        return None
    out = np.empty(acc.shape, dtype if pair is None else pair[0].dtype)
    per_channel = [None if v is None else np.ascontiguousarray(v.reshape(-1))
                   for v in (factor.astype(np.float64, copy=False), offsets)]
    compiled.requantize(lib, acc, layout, per_channel[0], per_channel[1],
                        (float(clamp[0] - zp), float(clamp[1] - zp)), zp, out, pair,
                        None if sum is None else (sum.numbers, sum.kinds))
    return out


def _pairs_with(pair: tuple[np.ndarray, np.ndarray, bool], shape: tuple[int, ...],
                dtype: np.dtype) -> bool:
    table, other, _ = pair
    return (dtype.itemsize == 1 and other.shape == shape and other.itemsize == 1
            and other.flags.c_contiguous and _table(table))


def pair_lookup(table: np.ndarray, a: np.ndarray, b: np.ndarray) -> np.ndarray | None:
    """table[a << 8 | b] over raw bytes of two contiguous inputs of one shape (None: not
    run)."""
    if (a.shape != b.shape or a.size < NATIVE_MIN or a.itemsize != 1 or b.itemsize != 1
            or not (a.flags.c_contiguous and b.flags.c_contiguous)
            or not _table(table)):
        return None
    lib = compiled.library()
    return None if lib is None else compiled.pair_lookup(lib, a, b, table)


def _table(table: np.ndarray) -> bool:
    """A pair table the C loop reads: 65536 contiguous entries of 1 or 2 bytes."""
    return table.size == 65536 and table.itemsize in (1, 2) and table.flags.c_contiguous


def im2col(x: np.ndarray, zp: int, dtype: np.dtype, kernel: tuple[int, ...],
           strides: tuple[int, ...], dilations: tuple[int, ...], begin: list[int],
           outs: list[int]) -> np.ndarray | None:
    """The im2col columns (N, C, *kernel, *outs) of x - zp in float32 for a 2-d convolution of
    1- or 2-byte integers, in one pass (None: not run)."""
    lib = compiled.library()
    if (lib is None or x.ndim != 4 or dtype != np.float32 or x.dtype not in compiled.OUT_KINDS
            or len(kernel) != 2 or not all(s >= 1 for s in strides)):
        return None
    return compiled.im2col(lib, np.ascontiguousarray(x), zp, kernel, strides, dilations, begin,
                           outs)


def _channel_rows(acc: np.ndarray, *per: np.ndarray | None) -> compiled.Layout | None:
    """acc read as (channels, rows, cols) with contiguous cols, channels along the one axis
    the values `per` (broadcast against acc) vary along, the columns as long as the layout
    allows (a contiguous channel: one row); None when it cannot be read so."""
    if not acc.flags.aligned or any(s % acc.itemsize for s in acc.strides):
        return None
    axes = set()
    for values in per:
        if values is None:
            continue
        if values.ndim > acc.ndim:
            return None
        aligned = (1,) * (acc.ndim - values.ndim) + values.shape
        for i, (n, size) in enumerate(zip(aligned, acc.shape, strict=True)):
            if n != 1 and n != size:
                return None
            if n != 1:
                axes.add(i)
    if len(axes) > 1:
        return None
    axis = axes.pop() if axes else -1
    if any(n != 1 for n in acc.shape[:max(axis, 0)]):
        return None
    channels = acc.shape[axis] if axis >= 0 else 1
    s_c = acc.strides[axis] if axis >= 0 and channels > 1 else 0
    rest = [(n, s // acc.itemsize) for n, s in zip(acc.shape[axis + 1:], acc.strides[axis + 1:],
                                                    strict=True) if n != 1]
    cols = 1  # the trailing axes that are one contiguous run: the columns
    while rest and rest[-1][1] == cols:
        cols *= rest.pop()[0]
    rows = _merged(rest)
    if rows is None:
        return None
    count, step = rows
    return compiled.Layout(channels, count, cols, s_c // acc.itemsize, step or cols)


def _merged(dims: list[tuple[int, int]]) -> tuple[int, int] | None:
    """(size, element stride) of axes merged into one (None: they do not merge)."""
    for (_, stride), (n, inner) in zip(dims[:-1], dims[1:], strict=True):
        if stride != inner * n:
            return None
    return math.prod(n for n, _ in dims), dims[-1][1] if dims else 0
