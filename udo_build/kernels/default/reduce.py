"""Reductions at opset 17: ReduceSum takes its axes as an input, the others as an attribute;
ArgMax and ArgMin."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ._common import axis_of
from ._package import DEFAULT


def _axes(axes: Sequence[int] | np.ndarray | None, ndim: int,
          noop_with_empty_axes: int) -> tuple[int, ...]:
    """The axes to reduce: all of them when none are given (or nothing, when asked)."""
    if axes is None or len(axes) == 0:
        return () if noop_with_empty_axes else tuple(range(ndim))
    return tuple(sorted({axis_of(int(a), ndim) for a in np.asarray(axes).reshape(-1)}))


Reduction = Callable[[np.ndarray, tuple[int, ...], bool], np.ndarray]


def _reduce(fn: Reduction, x: np.ndarray, axes: tuple[int, ...], keepdims: int) -> np.ndarray:
    if axes == ():
        return x.copy()
    return np.asarray(fn(x, axes, bool(keepdims))).astype(x.dtype, copy=False)


@DEFAULT.op("ReduceSum")
def reduce_sum(data: np.ndarray, axes: np.ndarray | None = None, *, keepdims: int = 1,
               noop_with_empty_axes: int = 0) -> np.ndarray:
    return _reduce(lambda x, a, k: np.sum(x, axis=a, keepdims=k), data,
                   _axes(axes, data.ndim, noop_with_empty_axes), keepdims)


def _attribute_reduction(name: str, fn: Reduction) -> None:
    def kernel(data: np.ndarray, *, axes: Sequence[int] | None = None,
               keepdims: int = 1) -> np.ndarray:
        return _reduce(fn, data, _axes(axes, data.ndim, 0), keepdims)
    kernel.__name__ = kernel.__qualname__ = name.lower()
    DEFAULT.op(name)(kernel)


REDUCTIONS: dict[str, Reduction] = {
    "ReduceMean": lambda x, a, k: np.mean(x, axis=a, keepdims=k),
    "ReduceMax": lambda x, a, k: np.max(x, axis=a, keepdims=k),
    "ReduceMin": lambda x, a, k: np.min(x, axis=a, keepdims=k),
    "ReduceProd": lambda x, a, k: np.prod(x, axis=a, keepdims=k),
    "ReduceL1": lambda x, a, k: np.sum(np.abs(x), axis=a, keepdims=k),
    "ReduceL2": lambda x, a, k: np.sqrt(np.sum(np.square(x), axis=a, keepdims=k)),
    "ReduceSumSquare": lambda x, a, k: np.sum(np.square(x), axis=a, keepdims=k),
    "ReduceLogSum": lambda x, a, k: np.log(np.sum(x, axis=a, keepdims=k)),
    "ReduceLogSumExp": lambda x, a, k: _log_sum_exp(x, a, k),
}


def _log_sum_exp(x: np.ndarray, axes: tuple[int, ...], keepdims: bool) -> np.ndarray:
    peak = np.max(x, axis=axes, keepdims=True)
    peak = np.where(np.isfinite(peak), peak, 0)
    y = np.log(np.sum(np.exp(x - peak), axis=axes, keepdims=True)) + peak
    return y if keepdims else np.squeeze(y, axis=axes)


for _name, _fn in REDUCTIONS.items():
    _attribute_reduction(_name, _fn)


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
