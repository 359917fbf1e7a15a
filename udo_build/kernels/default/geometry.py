"""Geometry ops that move values without interpolating: Col2Im, CenterCropPad and MaxUnpool."""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from ._common import axis_of, spatial
from ._package import DEFAULT


@DEFAULT.op("Col2Im")
def col2im(x: np.ndarray, image_shape: np.ndarray, block_shape: np.ndarray, *,
           dilations: Sequence[int] | None = None, pads: Sequence[int] | None = None,
           strides: Sequence[int] | None = None) -> np.ndarray:
    """The image [N, C, *image_shape] whose sliding blocks are x [N, C * prod(block), L]
    (overlapping blocks add up), the inverse layout of im2col."""
    image = [int(v) for v in np.asarray(image_shape).reshape(-1)]
    block = [int(v) for v in np.asarray(block_shape).reshape(-1)]
    rank = len(image)
    dilations_ = spatial(dilations, rank, 1)
    strides_ = spatial(strides, rank, 1)
    pads_ = [int(p) for p in pads] if pads else [0] * (2 * rank)
    padded = [n + pads_[i] + pads_[rank + i] for i, n in enumerate(image)]
    outs = [(p - (k - 1) * d - 1) // s + 1
            for p, k, d, s in zip(padded, block, dilations_, strides_, strict=True)]
    n = x.shape[0]
    taps = math.prod(block)
    if x.shape[1] % taps or x.shape[2] != math.prod(outs):
        raise ValueError(f"Col2Im input {list(x.shape)} does not hold blocks {block} over "
                         f"{outs} positions of the padded image {padded}")
    channels = x.shape[1] // taps
    cols = x.reshape(n, channels, taps, *outs)
    y = np.zeros((n, channels, *padded), dtype=x.dtype)
    for tap, position in enumerate(itertools.product(*[range(k) for k in block])):
        where = tuple(slice(p * d, p * d + (o - 1) * s + 1, s)
                      for p, d, o, s in zip(position, dilations_, outs, strides_, strict=True))
        y[(slice(None), slice(None), *where)] += cols[:, :, tap]
    crop = tuple(slice(pads_[i], pads_[i] + image[i]) for i in range(rank))
    return np.ascontiguousarray(y[(slice(None), slice(None), *crop)])


@DEFAULT.op("CenterCropPad")
def center_crop_pad(x: np.ndarray, shape: np.ndarray, *,
                    axes: Sequence[int] | None = None) -> np.ndarray:
    """x cropped or zero-padded to `shape` on `axes`, centered (the odd element at the end)."""
    targets = [int(v) for v in np.asarray(shape).reshape(-1)]
    picked = [axis_of(a, x.ndim) for a in axes] if axes else list(range(x.ndim))
    if len(targets) != len(picked):
        raise ValueError(f"CenterCropPad shape {targets} for axes {picked}")
    src = [slice(None)] * x.ndim
    dst = [slice(None)] * x.ndim
    out_shape = list(x.shape)
    for axis, target in zip(picked, targets, strict=True):
        size = x.shape[axis]
        out_shape[axis] = target
        start = abs(size - target) // 2
        if target < size:
            src[axis] = slice(start, start + target)
        elif target > size:
            dst[axis] = slice(start, start + size)
    out = np.zeros(out_shape, dtype=x.dtype)
    out[tuple(dst)] = x[tuple(src)]
    return out


@DEFAULT.op("MaxUnpool")
def max_unpool(x: np.ndarray, indices: np.ndarray, output_shape: np.ndarray | None = None, *,
               kernel_shape: Sequence[int], pads: Sequence[int] | None = None,
               strides: Sequence[int] | None = None) -> np.ndarray:
    """Zeros with x's values placed at their MaxPool indices (flat in the unpooled shape that
    kernel, strides and pads give); a larger `output_shape` adds zeros at the end of each axis."""
    rank = x.ndim - 2
    strides_ = spatial(strides, rank, 1)
    pads_ = [int(p) for p in pads] if pads else [0] * (2 * rank)
    inferred = list(x.shape[:2]) + [
        (n - 1) * s + k - pads_[i] - pads_[rank + i]
        for i, (n, s, k) in enumerate(zip(x.shape[2:], strides_, kernel_shape, strict=True))]
    flat = np.zeros(math.prod(inferred), dtype=x.dtype)
    where = indices.reshape(-1).astype(np.int64)
    if where.size and (where.min() < 0 or where.max() >= flat.size):
        raise ValueError(f"MaxUnpool index out of range for the unpooled shape {inferred}")
    flat[where] = x.reshape(-1)
    if output_shape is None:
        return flat.reshape(inferred)
    shape = [int(v) for v in np.asarray(output_shape).reshape(-1)]
    if len(shape) != x.ndim or any(s < i for s, i in zip(shape, inferred, strict=True)):
        raise ValueError(f"MaxUnpool output_shape {shape} is smaller than {inferred}")
    out = np.zeros(shape, dtype=x.dtype)
    out[tuple(slice(0, i) for i in inferred)] = flat.reshape(inferred)
    return out
