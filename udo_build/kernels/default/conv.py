"""Convolutions: Conv, and FusedConv (Conv + residual addend + activation, made by the runtime).

A convolution is one BLAS matmul of the weights, seen as (groups, M/groups, C/groups * taps), by
the im2col columns (groups, C/groups * taps, output pixels): a 1x1 convolution without padding
multiplies the input itself (strided first if it has strides); a larger kernel copies, per
kernel tap, the strided region of the input it reads into the columns, and zeroes the strips
that fall into the padding (the input itself is never padded). Grouped and depthwise
convolutions are the same single matmul, batched over the groups (for depthwise ones numpy's
batched small products beat a multiply-accumulate per tap by about 2x). 1-d, 2-d and 3-d
convolutions take the same path.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from ._common import relu_into, spatial, window_pads
from ._package import DEFAULT

ACTIVATIONS = ("", "Relu")


@DEFAULT.op("Conv")
def conv(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, *, auto_pad: str = "NOTSET",
         dilations: Sequence[int] | None = None, group: int = 1,
         kernel_shape: Sequence[int] | None = None, pads: Sequence[int] | None = None,
         strides: Sequence[int] | None = None) -> np.ndarray:
    return fused_conv(x, w, b, None, auto_pad=auto_pad, dilations=dilations, group=group,
                      kernel_shape=kernel_shape, pads=pads, strides=strides)


@DEFAULT.op("FusedConv")
def fused_conv(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None,
               z: np.ndarray | None = None, *, activation: str = "", auto_pad: str = "NOTSET",
               dilations: Sequence[int] | None = None, group: int = 1,
               kernel_shape: Sequence[int] | None = None, pads: Sequence[int] | None = None,
               strides: Sequence[int] | None = None) -> np.ndarray:
    """activation(conv(x, w) + b + z): the epilogue works in place on the fresh output."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"FusedConv activation {activation!r} is not one of {ACTIVATIONS}")
    rank = x.ndim - 2
    kernel = tuple(w.shape[2:])
    if kernel_shape and tuple(kernel_shape) != kernel:
        raise ValueError(f"Conv kernel_shape {list(kernel_shape)} differs from the weights' "
                         f"{list(kernel)}")
    if x.shape[1] != w.shape[1] * group or w.shape[0] % group:
        raise ValueError(f"Conv input channels {x.shape[1]}, weights {list(w.shape)} and "
                         f"group {group} do not agree")
    strides_ = spatial(strides, rank, 1)
    dilations_ = spatial(dilations, rank, 1)
    begin, end, outs = window_pads(auto_pad, pads, x.shape[2:], kernel, strides_, dilations_)
    y = _im2col_matmul(x, w, group, kernel, strides_, dilations_, begin, outs)
    if b is not None:
        y += b.reshape((-1,) + (1,) * rank)
    if z is not None:
        y += z
    if activation == "Relu":
        relu_into(y, y)
    return y


def _im2col_matmul(x: np.ndarray, w: np.ndarray, group: int, kernel: tuple[int, ...],
                   strides: tuple[int, ...], dilations: tuple[int, ...], begin: list[int],
                   outs: list[int]) -> np.ndarray:
    n = x.shape[0]
    m = w.shape[0]
    pixels = math.prod(outs)
    depth = w[0].size  # C/groups * taps
    reach = [(o - 1) * s + 1 for o, s in zip(outs, strides, strict=True)]
    if all(k == 1 for k in kernel) and not any(begin) and all(
            r <= size for r, size in zip(reach, x.shape[2:], strict=True)):
        if any(s != 1 for s in strides):
            x = x[(Ellipsis,) + tuple(slice(None, r, s)
                                      for r, s in zip(reach, strides, strict=True))]
        cols = x.reshape(n, group, depth, pixels)
    else:
        cols = im2col(x, kernel, strides, dilations, begin, outs).reshape(n, group, depth, pixels)
    weights = w.reshape(group, m // group, depth)
    y = np.empty((n, m, *outs), dtype=np.result_type(w, x))  # owns its data: no copy later
    if n == 1 and group == 1:
        np.matmul(weights[0], cols[0, 0], out=y.reshape(m, pixels))
    else:
        np.matmul(weights, cols, out=y.reshape(n, group, m // group, pixels))
    return y


def im2col(x: np.ndarray, kernel: tuple[int, ...], strides: tuple[int, ...],
           dilations: tuple[int, ...], begin: list[int], outs: list[int]) -> np.ndarray:
    """The columns (N, C, *kernel, *outs): for every tap, the input pixels it multiplies.

    The input is not padded: each tap copies the region it reads inside the input and zeroes
    the border strips that fall into the padding."""
    cols = np.empty((*x.shape[:2], *kernel, *outs), dtype=x.dtype)
    for tap in np.ndindex(*kernel):
        dst = cols[(slice(None), slice(None)) + tap]
        src_index, dst_index, borders = [], [], []
        for axis, (t, d, s, b, o, size) in enumerate(
                zip(tap, dilations, strides, begin, outs, x.shape[2:], strict=True)):
            offset = t * d - b  # the input position output 0 reads
            lo = min(max(0, -(offset // s)), o)
            hi = max(lo, min(o, (size - 1 - offset) // s + 1))
            start = offset + lo * s
            src_index.append(slice(start, start + (hi - lo - 1) * s + 1, s) if hi > lo
                             else slice(0, 0))
            dst_index.append(slice(lo, hi))
            borders += [(axis, slice(0, lo))] if lo else []
            borders += [(axis, slice(hi, o))] if hi < o else []
        dst[(Ellipsis, *dst_index)] = x[(Ellipsis, *src_index)]
        for axis, strip in borders:
            dst[(Ellipsis, *[strip if a == axis else slice(None) for a in range(len(outs))])] = 0
    return cols


@DEFAULT.op("ConvTranspose")
def conv_transpose(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, *,
                   auto_pad: str = "NOTSET", dilations: Sequence[int] | None = None,
                   group: int = 1, kernel_shape: Sequence[int] | None = None,
                   output_padding: Sequence[int] | None = None,
                   output_shape: Sequence[int] | None = None, pads: Sequence[int] | None = None,
                   strides: Sequence[int] | None = None) -> np.ndarray:
    """The gradient of Conv: one matmul (weights transposed, per group) gives every tap's
    contribution of every input pixel; col2im adds them, tap by tap, into the output."""
    n, c = x.shape[:2]
    rank, kernel, sizes = x.ndim - 2, tuple(w.shape[2:]), x.shape[2:]
    mg = w.shape[1]
    strides_, dilations_ = spatial(strides, rank, 1), spatial(dilations, rank, 1)
    extra = spatial(output_padding, rank, 0)
    full = [(i - 1) * s + (k - 1) * d + 1 + e for i, s, k, d, e in
            zip(sizes, strides_, kernel, dilations_, extra, strict=True)]
    if output_shape is None and auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        output_shape = [i * s for i, s in zip(sizes, strides_, strict=True)]
    begin, end = _transpose_pads(auto_pad, pads, output_shape, full, rank)
    weights = w.reshape(group, c // group, mg * math.prod(kernel)).transpose(0, 2, 1)
    taps = np.matmul(weights, x.reshape(n, group, c // group, -1))
    taps = taps.reshape(n, group * mg, *kernel, *sizes)
    y = np.zeros((n, group * mg, *full), dtype=taps.dtype)
    for tap in np.ndindex(*kernel):
        index = tuple(slice(t * d, t * d + (i - 1) * s + 1, s) for t, d, i, s in
                      zip(tap, dilations_, sizes, strides_, strict=True))
        y[(slice(None), slice(None)) + index] += taps[(slice(None), slice(None)) + tap]
    y = _crop(y, begin, end)
    if b is not None:
        y = y + b.reshape((-1,) + (1,) * rank)
    return np.ascontiguousarray(y)


def _crop(y: np.ndarray, begin: list[int], end: list[int]) -> np.ndarray:
    """y without `begin`/`end` pixels per spatial axis; negative ones add zeros instead."""
    if min(begin + end, default=0) >= 0:
        return y[(Ellipsis,) + tuple(slice(b, n - e) for b, e, n in
                                     zip(begin, end, y.shape[2:], strict=True))]
    sizes = [n - b - e for b, e, n in zip(begin, end, y.shape[2:], strict=True)]
    out = np.zeros((*y.shape[:2], *sizes), dtype=y.dtype)
    src = tuple(slice(max(b, 0), n - max(e, 0)) for b, e, n in
                zip(begin, end, y.shape[2:], strict=True))
    dst = tuple(slice(max(-b, 0), s - max(-e, 0)) for b, e, s in
                zip(begin, end, sizes, strict=True))
    out[(Ellipsis,) + dst] = y[(Ellipsis,) + src]
    return out


def _transpose_pads(auto_pad: str, pads: Sequence[int] | None,
                    output_shape: Sequence[int] | None, full: list[int],
                    rank: int) -> tuple[list[int], list[int]]:
    """ConvTranspose's (start, end) pads: given, or set by output_shape (auto_pad SAME_*: the
    input's size times the stride, unless output_shape says otherwise)."""
    if output_shape is not None:
        target = list(output_shape)[-rank:]
        total = [f - t for f, t in zip(full, target, strict=True)]
        small, big = [t // 2 for t in total], [t - t // 2 for t in total]
        return (small, big) if auto_pad == "SAME_UPPER" else (big, small)
    given = list(pads) if pads and auto_pad != "VALID" else [0] * (2 * rank)
    return [int(p) for p in given[:rank]], [int(p) for p in given[rank:]]
