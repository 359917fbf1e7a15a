"""Pooling: MaxPool, AveragePool, GlobalAveragePool, GlobalMaxPool, LpPool, and LRN.

Windows are strided views of the padded input, reduced with in-place maximum or sum one spatial
axis at a time: no Python loop over pixels. A 2-d float32 MaxPool (without Indices) runs
compiled (`c/pool.c`, the same values: a maximum is exact), where the library is there. With
`ceil_mode` the end padding grows so that the last window fits; such extra padding never
counts in an average, and neither does the declared padding unless `count_include_pad`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ._common import pad_spatial, spatial, window_pads
from ._package import DEFAULT


def _pool(x: np.ndarray, reduce: np.ufunc, fill: float, auto_pad: str, ceil_mode: int,
          dilations: Sequence[int] | None, kernel_shape: Sequence[int],
          pads: Sequence[int] | None, strides: Sequence[int] | None):
    """Windows reduced with `reduce` (maximum or add), one spatial axis after the other: a
    window's max (or sum) is that of its rows' maxima (or sums), so a k x k window costs 2k
    strided ufunc calls, not k^2, the first of each axis writing a fresh array (no copy); a
    single window over the whole unpadded input is one reduction over the spatial axes.
    Maxima reduce the leading spatial axis first (its windows' rows are contiguous runs, and
    a maximum is exact in any order); sums the trailing one first, as they always have."""
    rank = x.ndim - 2
    kernel = tuple(int(k) for k in kernel_shape)
    strides_ = spatial(strides, rank, 1)
    dilations_ = spatial(dilations, rank, 1)
    begin, end, outs = window_pads(auto_pad, pads, x.shape[2:], kernel, strides_, dilations_,
                                   ceil_mode)
    extra = [max((o - 1) * s + (k - 1) * d + 1 - (n + b + e), 0) for o, s, k, d, n, b, e in
             zip(outs, strides_, kernel, dilations_, x.shape[2:], begin, end, strict=True)]
    geometry = (kernel, strides_, dilations_, begin, end, outs)
    if (all(o == 1 for o in outs) and kernel == tuple(x.shape[2:]) and x.size
            and not any((*begin, *end, *extra)) and all(d == 1 for d in dilations_)):
        # one window, the whole input (ResNet's last AveragePool): one reduction over it
        return reduce.reduce(x, axis=tuple(range(2, x.ndim)), keepdims=True), geometry
    y = pad_spatial(x, begin, [e + x_ for e, x_ in zip(end, extra, strict=True)], fill)
    for axis in range(rank) if reduce is np.maximum else reversed(range(rank)):
        k, s, d, o = kernel[axis], strides_[axis], dilations_[axis], outs[axis]
        lead = (slice(None),) * (2 + axis)
        views = [y[lead + (slice(t * d, t * d + (o - 1) * s + 1, s),)] for t in range(k)]
        if k == 1:
            y = views[0]
            continue
        y = reduce(views[0], views[1])
        for view in views[2:]:
            reduce(y, view, out=y)
    if y.base is not None:  # a 1-wide window everywhere: still a view of the input
        y = y.copy()
    return y, geometry


@DEFAULT.op("MaxPool")
def max_pool(x: np.ndarray, *, auto_pad: str = "NOTSET", ceil_mode: int = 0,
             dilations: Sequence[int] | None = None, kernel_shape: Sequence[int],
             pads: Sequence[int] | None = None, storage_order: int = 0,
             strides: Sequence[int] | None = None,
             num_outputs: int = 1) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """The maximum of each window; with a second output, also where it is (Indices). A 2-d
    float32 one without Indices runs compiled (c/pool.c) where the library is there."""
    return lent_max_pool(x, None, auto_pad=auto_pad, ceil_mode=ceil_mode, dilations=dilations,
                         kernel_shape=kernel_shape, pads=pads, storage_order=storage_order,
                         strides=strides, num_outputs=num_outputs)


def lent_max_pool(x: np.ndarray, buffers: Any, *, auto_pad: str = "NOTSET", ceil_mode: int = 0,
                  dilations: Sequence[int] | None = None, kernel_shape: Sequence[int],
                  pads: Sequence[int] | None = None, storage_order: int = 0,
                  strides: Sequence[int] | None = None,
                  num_outputs: int = 1) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """MaxPool, its compiled output lent by `buffers` where given (`take(shape, dtype)`: the
    float session's dead tensors, udo_build.runtime.buffers)."""
    if num_outputs < 2 and x.dtype == np.float32 and x.ndim == 4 and x.size:
        y = _compiled_max(x, auto_pad, ceil_mode, dilations, kernel_shape, pads, strides,
                          buffers)
        if y is not None:
            return y
    lowest = -np.inf if x.dtype.kind == "f" else np.iinfo(x.dtype).min
    y, geometry = _pool(x, np.maximum, lowest, auto_pad, ceil_mode, dilations, kernel_shape,
                        pads, strides)
    if num_outputs < 2:
        return y
    return y, _argmax(x, lowest, geometry, storage_order)


def _compiled_max(x: np.ndarray, auto_pad: str, ceil_mode: int,
                  dilations: Sequence[int] | None, kernel_shape: Sequence[int],
                  pads: Sequence[int] | None, strides: Sequence[int] | None,
                  buffers: Any = None) -> np.ndarray | None:
    """MaxPool by the compiled library (None where it is not there): positions outside the
    input, its padding and ceil_mode's, are -inf, as the numpy path pads them."""
    from ..compiled import library

    lib = library()
    if lib is None:
        return None
    kernel = tuple(int(k) for k in kernel_shape)
    strides_, dilations_ = spatial(strides, 2, 1), spatial(dilations, 2, 1)
    begin, _, outs = window_pads(auto_pad, pads, x.shape[2:], kernel, strides_, dilations_,
                                 ceil_mode)
    x = np.ascontiguousarray(x)
    shape = (*x.shape[:2], *outs)
    y = buffers.take(shape, np.float32) if buffers is not None else None
    if y is None:
        y = np.empty(shape, np.float32)
    if y.size and lib.maxpool(x.ctypes.data, x.shape[0] * x.shape[1], *x.shape[2:], *kernel,
                              *strides_, *dilations_, *begin, *outs, y.ctypes.data) != 0:
        raise MemoryError("the compiled MaxPool could not allocate its row")
    return y


def _argmax(x: np.ndarray, lowest: float, geometry, storage_order: int) -> np.ndarray:
    """The flat index into x of each window's first maximum (row-major order of the window):
    the windows reduced one spatial axis after the other, carrying the index with the value;
    spatial axes flattened column-major when `storage_order` is 1."""
    kernel, strides, dilations, begin, end, outs = geometry
    rank = x.ndim - 2
    position = np.indices(x.shape, dtype=np.int64)
    spatial_order = range(2, x.ndim) if not storage_order else reversed(range(2, x.ndim))
    index = position[0] * x.shape[1] + position[1]
    for axis in spatial_order:
        index = index * x.shape[axis] + position[axis]
    extra = [max((o - 1) * s + (k - 1) * d + 1 - (n + b + e), 0) for o, s, k, d, n, b, e in
             zip(outs, strides, kernel, dilations, x.shape[2:], begin, end, strict=True)]
    ends = [e + x_ for e, x_ in zip(end, extra, strict=True)]
    y, idx = pad_spatial(x, begin, ends, lowest), pad_spatial(index, begin, ends, -1)
    for axis in reversed(range(rank)):
        k, s, d, o = kernel[axis], strides[axis], dilations[axis], outs[axis]
        lead = (slice(None),) * (2 + axis)
        cut = [lead + (slice(t * d, t * d + (o - 1) * s + 1, s),) for t in range(k)]
        best, where = y[cut[0]].copy(), idx[cut[0]].copy()
        for view in cut[1:]:
            better = y[view] > best
            best[better], where[better] = y[view][better], idx[view][better]
        y, idx = best, where
    return idx


@DEFAULT.op("AveragePool")
def average_pool(x: np.ndarray, *, auto_pad: str = "NOTSET", ceil_mode: int = 0,
                 count_include_pad: int = 0, dilations: Sequence[int] | None = None,
                 kernel_shape: Sequence[int], pads: Sequence[int] | None = None,
                 strides: Sequence[int] | None = None) -> np.ndarray:
    y, geometry = _pool(x, np.add, 0, auto_pad, ceil_mode, dilations, kernel_shape, pads,
                        strides)
    counts = _counts(x.shape[2:], geometry, bool(count_include_pad))
    if counts is None:
        y *= np.asarray(1.0 / math.prod(geometry[0]), dtype=y.dtype)
    else:
        y /= counts
    return y


def _counts(size: Sequence[int], geometry, include_pad: bool) -> np.ndarray | None:
    """How many positions of each window count (None when all count: a plain mean)."""
    kernel, strides, dilations, begin, end, outs = geometry
    per_axis = []
    for n, k, s, d, b, e, o in zip(size, kernel, strides, dilations, begin, end, outs,
                                   strict=True):
        lo, hi = (0, n + b + e) if include_pad else (b, b + n)
        starts = np.arange(o)[:, None] * s + np.arange(k)[None, :] * d
        per_axis.append(((starts >= lo) & (starts < hi)).sum(axis=1))
    counts = per_axis[0]
    for axis in per_axis[1:]:
        counts = np.multiply.outer(counts, axis)
    if np.all(counts == math.prod(kernel)):
        return None
    return counts.astype(np.float32)


@DEFAULT.op("LpPool")
def lp_pool(x: np.ndarray, *, auto_pad: str = "NOTSET", ceil_mode: int = 0,
            dilations: Sequence[int] | None = None, kernel_shape: Sequence[int],
            p: int = 2, pads: Sequence[int] | None = None,
            strides: Sequence[int] | None = None) -> np.ndarray:
    y, _ = _pool(np.abs(x) ** p, np.add, 0, auto_pad, ceil_mode, dilations, kernel_shape, pads,
                 strides)
    return y ** (1.0 / p)


@DEFAULT.op("GlobalAveragePool")
def global_average_pool(x: np.ndarray) -> np.ndarray:
    return x.mean(axis=tuple(range(2, x.ndim)), keepdims=True, dtype=x.dtype)


@DEFAULT.op("GlobalMaxPool")
def global_max_pool(x: np.ndarray) -> np.ndarray:
    return x.max(axis=tuple(range(2, x.ndim)), keepdims=True)


@DEFAULT.op("LRN")
def lrn(x: np.ndarray, *, alpha: float = 0.0001, beta: float = 0.75, bias: float = 1.0,
        size: int) -> np.ndarray:
    """x / (bias + alpha / size * sum of x^2 over the `size` neighbouring channels) ^ beta."""
    before, after = (size - 1) // 2, size - 1 - (size - 1) // 2
    channels = x.shape[1]
    squares = pad_spatial(np.square(x).swapaxes(1, -1), [before], [after]).swapaxes(1, -1)
    total = squares[:, :channels].copy()
    for offset in range(1, size):
        total += squares[:, offset:offset + channels]
    total *= np.asarray(alpha / size, dtype=x.dtype)
    total += np.asarray(bias, dtype=x.dtype)
    return x / total ** np.asarray(beta, dtype=x.dtype)
