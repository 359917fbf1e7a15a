"""Helpers shared by the kernel families: attribute normalization and window geometry."""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np


def spatial(values: Sequence[int] | None, rank: int, default: int) -> tuple[int, ...]:
    """A per-spatial-axis attribute (strides, dilations) with its default filled in."""
    return tuple(int(v) for v in values) if values else (default,) * rank


def axis_of(axis: int, ndim: int) -> int:
    """A possibly negative axis as a positive one, checked."""
    if not -ndim <= axis < max(ndim, 1):
        raise ValueError(f"axis {axis} is out of range for a tensor of rank {ndim}")
    return axis % ndim if ndim else 0


def window_pads(auto_pad: str, pads: Sequence[int] | None, size: Sequence[int],
                kernel: Sequence[int], strides: Sequence[int], dilations: Sequence[int],
                ceil_mode: int = 0) -> tuple[list[int], list[int], list[int]]:
    """(pads at the start, pads at the end, output sizes) of a sliding window, as ONNX defines.

    With `ceil_mode`, the last window must start inside the input or its start padding; the
    end pads grow by whatever the last window needs beyond the declared padding.
    """
    rank = len(size)
    extent = [(k - 1) * d + 1 for k, d in zip(kernel, dilations, strict=True)]
    if auto_pad in ("SAME_UPPER", "SAME_LOWER", "VALID"):
        if auto_pad == "VALID":
            begin, end = [0] * rank, [0] * rank
        else:
            out = [math.ceil(n / s) for n, s in zip(size, strides, strict=True)]
            total = [max((o - 1) * s + e - n, 0)
                     for o, s, e, n in zip(out, strides, extent, size, strict=True)]
            small = [t // 2 for t in total]
            big = [t - t // 2 for t in total]
            begin, end = (small, big) if auto_pad == "SAME_UPPER" else (big, small)
    elif auto_pad in ("NOTSET", ""):
        given = list(pads) if pads else [0] * (2 * rank)
        begin, end = [int(p) for p in given[:rank]], [int(p) for p in given[rank:]]
    else:
        raise ValueError(f"auto_pad {auto_pad!r} is not one of NOTSET, SAME_UPPER, SAME_LOWER, "
                         "VALID")
    outs = []
    for i in range(rank):
        span = size[i] + begin[i] + end[i] - extent[i]
        if span < 0:
            raise ValueError(f"the window ({extent[i]}) is larger than the padded input "
                             f"({size[i] + begin[i] + end[i]}) on spatial axis {i}")
        n = (-(-span // strides[i]) if ceil_mode else span // strides[i]) + 1
        if ceil_mode and (n - 1) * strides[i] >= size[i] + begin[i]:
            n -= 1
        outs.append(n)
    return begin, end, outs


def pad_spatial(x: np.ndarray, begin: Sequence[int], end: Sequence[int],
                value: float = 0.0) -> np.ndarray:
    """x with its trailing len(begin) axes padded by a constant (x itself when no padding)."""
    if not any(begin) and not any(end):
        return x
    lead = x.ndim - len(begin)
    sizes = x.shape[lead:]
    shape = x.shape[:lead] + tuple(n + b + e for n, b, e in zip(sizes, begin, end, strict=True))
    out = np.full(shape, value, dtype=x.dtype)
    out[(Ellipsis,) + tuple(slice(b, b + n) for b, n in zip(begin, sizes, strict=True))] = x
    return out


_ZERO_ROWS: dict[np.dtype, np.ndarray] = {}
ROW = 1024


def relu_into(x: np.ndarray, out: np.ndarray) -> np.ndarray:
    """out = max(x, 0). numpy's maximum against a scalar takes a slow path; against a row of
    zeros broadcast over a (-1, 1024) view of contiguous data it is about twice as fast, so
    contiguous data goes that way, its last size % 1024 elements (most convolution outputs are
    not a multiple of 1024: SqueezeNet's 55 x 55) against the scalar."""
    zeros = _ZERO_ROWS.get(x.dtype)
    if zeros is None:
        zeros = _ZERO_ROWS.setdefault(x.dtype, np.zeros(ROW, dtype=x.dtype))
    if not (x.flags.c_contiguous and out.flags.c_contiguous and out.dtype == x.dtype
            and out.shape == x.shape):
        np.maximum(x, 0, out=out)
        return out
    head = x.size - x.size % ROW
    src, dst = x.reshape(-1), out.reshape(-1)
    np.maximum(src[:head].reshape(-1, ROW), zeros, out=dst[:head].reshape(-1, ROW))
    if head < x.size:
        np.maximum(src[head:], 0, out=dst[head:])
    return out


# ONNX element types (TensorProto values) the kernels create as outputs, as numpy dtypes
ELEMENT_TYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32",
                 7: "int64", 9: "bool", 10: "float16", 11: "float64", 12: "uint32",
                 13: "uint64"}


def element_type(code: int) -> np.dtype:
    """The numpy dtype of an ONNX element type; NotImplementedError for one numpy lacks."""
    if code not in ELEMENT_TYPES:
        raise NotImplementedError(f"element type {code} (supported: "
                                  + ", ".join(f"{k} {v}" for k, v in ELEMENT_TYPES.items())
                                  + ")")
    return np.dtype(ELEMENT_TYPES[code])
