"""Integer pooling: MaxPool (the float kernel on the raw values: max commutes with the monotonic
map to the output encoding, which is applied after if it differs), AveragePool and
GlobalAveragePool (exact window sums of x - zp, requantized with s_x / (s_y x count), one
multiplier per distinct count when padding does not count).

The window geometry (padding, ceil_mode, counts) is the float kernels' own.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ...kernels.default import pool as float_pool
from .fixed import Requant, Rescale, centered, rescale, zero_point
from .registry import QUANTIZED, Bound, Context, binds, per_tensor, register


def max_pool(x: np.ndarray, *, rescale: Rescale | None = None, **attrs: object) -> np.ndarray:
    y = float_pool.max_pool(x, **attrs)  # type: ignore[arg-type]
    return y if rescale is None else rescale(y)


def average_pool(x: np.ndarray, *, x_zero_point: int, ratio: float, requant: Requant,
                 auto_pad: str = "NOTSET", ceil_mode: int = 0, count_include_pad: int = 0,
                 dilations: Sequence[int] | None = None, kernel_shape: Sequence[int],
                 pads: Sequence[int] | None = None,
                 strides: Sequence[int] | None = None) -> np.ndarray:
    """requantize(window sum of x - zp) with multiplier ratio / count (ratio = s_x / s_y)."""
    sums, geometry = float_pool._pool(centered(x, x_zero_point, np.float64), np.add, 0,
                                      auto_pad, ceil_mode, dilations, kernel_shape, pads,
                                      strides)
    counts = float_pool._counts(x.shape[2:], geometry, bool(count_include_pad))
    count = math.prod(geometry[0]) if counts is None else counts.astype(np.float64)
    return requant.with_real(ratio / count).apply(sums, owned=True)


def global_average_pool(x: np.ndarray, *, x_zero_point: int, ratio: float,
                        requant: Requant) -> np.ndarray:
    """requantize(sum over the spatial axes of x - zp) with multiplier ratio / count."""
    count = math.prod(x.shape[2:])
    sums = x.sum(axis=tuple(range(2, x.ndim)), keepdims=True, dtype=np.float64)
    return requant.with_real(ratio / count).apply(sums, -count * x_zero_point, owned=True)


register("MaxPool", max_pool, [(t,) for t in QUANTIZED])
register("AveragePool", average_pool, [(t,) for t in QUANTIZED])
register("GlobalAveragePool", global_average_pool, [(t,) for t in QUANTIZED])


@binds("MaxPool")
def bind_max_pool(ctx: Context) -> Bound | None:
    encs = per_tensor(ctx.input(0))
    if encs is None or len(ctx.outputs) != 1:
        return None
    step = rescale(encs[0], ctx.out)
    return Bound({**ctx.node.kwargs, "rescale": step})


def _averaging(ctx: Context, count: int) -> Bound | None:
    encs = per_tensor(ctx.input(0))
    if encs is None:
        return None
    out = ctx.out
    ratio = encs[0].scale / out.scale
    raw = 2 * count * max(abs(encs[0].qmin), encs[0].qmax)  # bounds the sums and the offset
    requant = Requant.make(ratio, raw, out, ctx.output.clamp)
    if requant is None:
        return None
    return Bound({"x_zero_point": zero_point(encs[0]), "ratio": ratio, "requant": requant})


@binds("AveragePool")
def bind_average_pool(ctx: Context) -> Bound | None:
    bound = _averaging(ctx, math.prod(ctx.node.attr("kernel_shape", [1])))
    if bound is not None:
        bound.kwargs.update(ctx.node.kwargs)
    return bound


@binds("GlobalAveragePool")
def bind_global_average_pool(ctx: Context) -> Bound | None:
    x = ctx.input(0)
    sizes = [d for d in (x.shape or ())[2:]] if x is not None else []
    if x is None or x.shape is None or not all(isinstance(d, int) for d in sizes):
        return None
    return _averaging(ctx, math.prod(int(d) for d in sizes))
