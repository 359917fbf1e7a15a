"""Reductions (Reduce*) and ArgMax/ArgMin, in the semantics of every opset from 13 on.

A reduction's axes come as an attribute up to opset 17 (ReduceSum: 12) and as an optional input
from opset 18 (ReduceSum: 13): the kernels take `axes` as a parameter that binds either, the
input positionally or the attribute by keyword. No axes reduce everything, unless
`noop_with_empty_axes` (opset 18) says to reduce nothing: then the reductions that map their
elements first (ReduceL1, ReduceSumSquare, ReduceLogSum...) still do, as ONNX's function
definitions of them compute (ReduceL1 is ReduceSum(Abs(x))). Reducing an axis of length 0 gives the
reduction's identity: 0 for sums, 1 for products, -inf (max), +inf (min), NaN for a mean.
ReduceMax and ReduceMin take booleans (opset 20).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ._common import axis_of
from ._package import DEFAULT

Axes = Sequence[int] | np.ndarray | None
Reduction = Callable[[np.ndarray, tuple[int, ...], bool], np.ndarray]


def _axes(axes: Axes, ndim: int, noop_with_empty_axes: int) -> tuple[int, ...]:
    """The axes to reduce: all of them when none are given (or nothing, when asked)."""
    if axes is None or len(axes) == 0:
        return () if noop_with_empty_axes else tuple(range(ndim))
    return tuple(sorted({axis_of(int(a), ndim) for a in np.asarray(axes).reshape(-1)}))


def _extreme(x: np.ndarray, largest: bool) -> object:
    """The identity of max (largest=False gives min's) in x's type: -inf/+inf, or the type's
    bounds for integers and booleans."""
    if x.dtype == np.bool_:
        return not largest
    if x.dtype.kind in "iu":
        info = np.iinfo(x.dtype)
        return info.min if largest else info.max
    return -np.inf if largest else np.inf


def _max(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    return np.max(x, axis=axes, keepdims=keep, initial=_extreme(x, True))


def _min(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    return np.min(x, axis=axes, keepdims=keep, initial=_extreme(x, False))


def _mean(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    count = int(np.prod([x.shape[a] for a in axes]))
    total = np.sum(x, axis=axes, keepdims=keep)
    return total / count if count else np.full_like(total, np.nan, dtype=np.float64)


def _log_sum_exp(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    peak = np.max(x, axis=axes, keepdims=True, initial=-np.inf)
    peak = np.where(np.isfinite(peak), peak, 0).astype(x.dtype)
    with np.errstate(divide="ignore"):
        y = np.log(np.sum(np.exp(x - peak), axis=axes, keepdims=True)) + peak
    return y if keep else np.squeeze(y, axis=axes)


def _log_sum(x: np.ndarray, axes: tuple[int, ...], keep: bool) -> np.ndarray:
    with np.errstate(divide="ignore"):
        return np.log(np.sum(x, axis=axes, keepdims=keep))


REDUCTIONS: dict[str, Reduction] = {
    "ReduceSum": lambda x, a, k: np.sum(x, axis=a, keepdims=k),
    "ReduceMean": _mean,
    "ReduceMax": _max,
    "ReduceMin": _min,
    "ReduceProd": lambda x, a, k: np.prod(x, axis=a, keepdims=k),
    "ReduceL1": lambda x, a, k: np.sum(np.abs(x), axis=a, keepdims=k),
    "ReduceL2": lambda x, a, k: np.sqrt(np.sum(np.square(x), axis=a, keepdims=k)),
    "ReduceSumSquare": lambda x, a, k: np.sum(np.square(x), axis=a, keepdims=k),
    "ReduceLogSum": _log_sum,
    "ReduceLogSumExp": _log_sum_exp,
}


def _reduction(name: str, fn: Reduction) -> None:
    def kernel(data: np.ndarray, axes: Axes = None, *, keepdims: int = 1,
               noop_with_empty_axes: int = 0) -> np.ndarray:
        chosen = _axes(axes, data.ndim, noop_with_empty_axes)
        return np.asarray(fn(data, chosen, bool(keepdims))).astype(data.dtype, copy=False)
    kernel.__name__ = kernel.__qualname__ = name.lower()
    kernel.__doc__ = f"{name} over `axes` (an input from opset 18, an attribute before)."
    DEFAULT.op(name)(kernel)


for _name, _fn in REDUCTIONS.items():
    _reduction(_name, _fn)


def _arg(fn: Callable[..., np.ndarray], data: np.ndarray, axis: int, keepdims: int,
         select_last_index: int) -> np.ndarray:
    axis = axis_of(axis, data.ndim)
    if select_last_index:
        flipped = np.flip(data, axis=axis)
        index = data.shape[axis] - 1 - fn(flipped, axis=axis)
    else:
        index = fn(data, axis=axis)
    index = np.asarray(index, dtype=np.int64)
    return np.expand_dims(index, axis) if keepdims else index


@DEFAULT.op("ArgMax")
def arg_max(data: np.ndarray, *, axis: int = 0, keepdims: int = 1,
            select_last_index: int = 0) -> np.ndarray:
    return _arg(np.argmax, data, axis, keepdims, select_last_index)


@DEFAULT.op("ArgMin")
def arg_min(data: np.ndarray, *, axis: int = 0, keepdims: int = 1,
            select_last_index: int = 0) -> np.ndarray:
    return _arg(np.argmin, data, axis, keepdims, select_last_index)
