"""Sampling ops: GridSample (nearest, linear, cubic; zeros, border, reflection padding; 2-D and
N-D), AffineGrid, RoiAlign and DeformConv.

They share one sampler: `sample(x, coords, mode, padding, borders)` reads x [N, C, *S] at
fractional pixel coordinates (one array [N, *P] per spatial axis) and interpolates the taps
around each point, a tap outside the image being zero, the border's value or its reflection.
Coordinates and weights are float64; the result has x's dtype. The geometry ops without
interpolation (Col2Im, CenterCropPad, MaxUnpool) are in `geometry`.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

from ._common import spatial, window_pads
from ._package import DEFAULT

MODES = {"nearest": "nearest", "linear": "linear", "bilinear": "linear", "cubic": "cubic",
         "bicubic": "cubic"}
PADDINGS = ("zeros", "border", "reflection")
CUBIC_ALPHA = -0.75


def reflect(v: np.ndarray, low: float, high: float) -> np.ndarray:
    """v folded back into [low, high] by reflecting at the nearer border, repeatedly."""
    span = high - low
    if span <= 0:
        return np.full_like(v, low)
    below, above = low - v, v - high
    out = v.copy()
    for dist, start, other in ((below, low, high), (above, high, low)):
        hit = dist > 0
        turns = np.floor(dist[hit] / span)
        rest = dist[hit] - turns * span
        sign = 1.0 if start == low else -1.0
        out[hit] = np.where(turns % 2 == 0, start + sign * rest, other - sign * rest)
    return out


def _taps(v: np.ndarray, mode: str) -> list[tuple[np.ndarray, np.ndarray | None]]:
    """(integer tap, weight) pairs along one axis (nearest: one tap, no weight)."""
    if mode == "nearest":
        return [(v.astype(np.int64), None)]
    base = np.floor(v)
    t = v - base
    i = base.astype(np.int64)
    if mode == "linear":
        return [(i, 1 - t), (i + 1, t)]
    a = CUBIC_ALPHA
    def far(d: np.ndarray) -> np.ndarray:
        return ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    def near(d: np.ndarray) -> np.ndarray:
        return ((a + 2) * d - (a + 3)) * d * d + 1
    return [(i - 1, far(t + 1)), (i, near(t)), (i + 1, near(1 - t)), (i + 2, far(2 - t))]


def _fetch(x: np.ndarray, index: Sequence[np.ndarray], padding: str,
           borders: Sequence[tuple[float, float]]) -> np.ndarray:
    """x [N, C, *S] at integer taps (one [N, *P] array per axis) -> [N, C, *P]."""
    sizes = x.shape[2:]
    valid = np.ones(index[0].shape, dtype=bool)
    fixed = []
    for i, size, (low, high) in zip(index, sizes, borders, strict=True):
        if padding == "zeros":
            valid &= (i >= 0) & (i < size)
        elif padding == "reflection":
            i = np.trunc(reflect(i.astype(np.float64), low, high)).astype(np.int64)
        fixed.append(np.clip(i, 0, size - 1))
    batch = np.arange(x.shape[0]).reshape((-1,) + (1,) * (index[0].ndim - 1))
    values = np.moveaxis(x[(batch, slice(None), *fixed)], -1, 1)  # [N, C, *P]
    if padding == "zeros":
        values = np.where(valid[:, None], values, 0)
    return values


def sample(x: np.ndarray, coords: Sequence[np.ndarray], mode: str, padding: str,
           borders: Sequence[tuple[float, float]]) -> np.ndarray:
    """x [N, C, *S] interpolated at pixel coordinates (one [N, *P] array per axis)."""
    per_axis = [_taps(v, mode) for v in coords]
    out = np.zeros(x.shape[:2] + coords[0].shape[1:], dtype=np.float64)
    for combo in itertools.product(*per_axis):
        values = _fetch(x, [i for i, _ in combo], padding, borders).astype(np.float64)
        for _, w in combo:
            if w is not None:
                values = values * w[:, None]
        out += values
    return out.astype(x.dtype)


@DEFAULT.op("GridSample")
def grid_sample(x: np.ndarray, grid: np.ndarray, *, align_corners: int = 0,
                mode: str = "bilinear", padding_mode: str = "zeros") -> np.ndarray:
    """x [N, C, *S] sampled at grid [N, *P, r] (normalized, the last spatial axis first)."""
    kind = MODES.get(mode)
    if kind is None or padding_mode not in PADDINGS:
        raise ValueError(f"GridSample mode {mode!r} / padding_mode {padding_mode!r}: modes "
                         f"{', '.join(MODES)}; paddings {', '.join(PADDINGS)}")
    rank = x.ndim - 2
    if grid.shape[-1] != rank or grid.ndim != x.ndim or grid.shape[0] != x.shape[0]:
        raise ValueError(f"GridSample grid {list(grid.shape)} does not fit X {list(x.shape)}")
    if kind == "cubic" and rank != 2:
        raise NotImplementedError(f"GridSample cubic of a {rank}-D image (2-D only)")
    coords, borders = [], []
    for axis, size in enumerate(x.shape[2:]):
        g = grid[..., rank - 1 - axis].astype(np.float64)
        v = (g + 1) / 2 * (size - 1) if align_corners else ((g + 1) * size - 1) / 2
        low, high = (0.0, size - 1.0) if align_corners else (-0.5, size - 0.5)
        if kind == "nearest":
            v = np.rint(v)
        outside = (v < low) | (v > high)
        if padding_mode == "border":
            v = np.where(outside, np.clip(v, 0, size - 1), v)
        elif padding_mode == "reflection":
            v = np.where(outside, reflect(v, low, high), v)
        coords.append(v)
        borders.append((low, high))
    return sample(x, coords, kind, padding_mode, borders)


@DEFAULT.op("AffineGrid")
def affine_grid(theta: np.ndarray, size: np.ndarray, *, align_corners: int = 0) -> np.ndarray:
    """The normalized sampling grid [N, *S, r] of the affine maps theta [N, r, r + 1]."""
    dims = [int(d) for d in np.asarray(size).reshape(-1)]
    n, spatial_sizes = dims[0], dims[2:]
    rank = len(spatial_sizes)
    if theta.shape != (n, rank, rank + 1):
        raise ValueError(f"AffineGrid theta {list(theta.shape)} for size {dims}: expected "
                         f"[{n}, {rank}, {rank + 1}]")
    axes = []
    for s in spatial_sizes:
        if align_corners:
            axes.append(np.linspace(-1, 1, s) if s > 1 else np.zeros(1))
        else:
            axes.append((2 * np.arange(s) + 1) / s - 1)
    mesh = np.meshgrid(*axes, indexing="ij")  # spatial order: D, H, W
    base = np.stack([*mesh[::-1], np.ones_like(mesh[0])], axis=-1)  # x, y[, z], 1
    grid = np.einsum("...k,nrk->n...r", base, theta.astype(np.float64))
    return grid.astype(theta.dtype)


@DEFAULT.op("RoiAlign")
def roi_align(x: np.ndarray, rois: np.ndarray, batch_indices: np.ndarray, *,
              coordinate_transformation_mode: str = "half_pixel", mode: str = "avg",
              output_height: int = 1, output_width: int = 1, sampling_ratio: int = 0,
              spatial_scale: float = 1.0) -> np.ndarray:
    """Per region, the average (or the maximum) of bilinear samples in each output bin."""
    if mode not in ("avg", "max"):
        raise ValueError(f"RoiAlign mode {mode!r} is not avg or max")
    if coordinate_transformation_mode not in ("half_pixel", "output_half_pixel"):
        raise ValueError(f"RoiAlign coordinate_transformation_mode "
                         f"{coordinate_transformation_mode!r}")
    half = coordinate_transformation_mode == "half_pixel"
    out = np.zeros((rois.shape[0], x.shape[1], output_height, output_width), dtype=x.dtype)
    for r, (roi, b) in enumerate(zip(rois.astype(np.float64), batch_indices, strict=True)):
        start = roi[[1, 0]] * spatial_scale - (0.5 if half else 0.0)  # y, x
        extent = roi[[3, 2]] * spatial_scale - (0.5 if half else 0.0) - start
        if not half:
            extent = np.maximum(extent, 1.0)
        bins = (output_height, output_width)
        grid = [sampling_ratio if sampling_ratio > 0 else math.ceil(e / n)
                for e, n in zip(extent, bins, strict=True)]
        per_axis = [_roi_axis(start[a], extent[a] / bins[a], bins[a], grid[a],
                              x.shape[2 + a]) for a in range(2)]
        out[r] = _roi_pool(x[int(b)], per_axis, mode, max(grid[0] * grid[1], 1))
    return out


def _roi_axis(start: float, bin_size: float, bins: int, grid: int, size: int
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(low tap, high tap, low weight, high weight), each [bins, grid], along one axis."""
    steps = (np.arange(grid) + 0.5) * bin_size / max(grid, 1)
    v = start + np.arange(bins)[:, None] * bin_size + steps[None, :]
    valid = (v >= -1.0) & (v <= size)
    v = np.maximum(v, 0.0)
    low = np.floor(v).astype(np.int64)
    edge = low >= size - 1
    low = np.where(edge, size - 1, low)
    high = np.where(edge, size - 1, low + 1)
    v = np.where(edge, low, v)
    frac = v - low
    return low, high, np.where(valid, 1 - frac, 0.0), np.where(valid, frac, 0.0)


def _roi_pool(image: np.ndarray, per_axis: list, mode: str, count: int) -> np.ndarray:
    (ylo, yhi, wy0, wy1), (xlo, xhi, wx0, wx1) = per_axis
    image = image.astype(np.float64)
    terms = []
    for yi, wy in ((ylo, wy0), (yhi, wy1)):
        for xi, wx in ((xlo, wx0), (xhi, wx1)):
            v = image[:, yi[:, :, None, None], xi[None, None, :, :]]  # [C, ph, gh, pw, gw]
            terms.append(v * (wy[:, :, None, None] * wx[None, None, :, :]))
    if mode == "avg":
        return np.sum(sum(terms), axis=(2, 4)) / count
    return np.max(np.maximum.reduce(terms), axis=(2, 4))


@DEFAULT.op("DeformConv")
def deform_conv(x: np.ndarray, w: np.ndarray, offset: np.ndarray, b: np.ndarray | None = None,
                mask: np.ndarray | None = None, *, dilations: Sequence[int] | None = None,
                group: int = 1, kernel_shape: Sequence[int] | None = None, offset_group: int = 1,
                pads: Sequence[int] | None = None,
                strides: Sequence[int] | None = None) -> np.ndarray:
    """A convolution whose taps read x at offset positions (bilinear, zero outside), each tap
    scaled by its mask; offsets [N, G * taps * r, *out] hold (dy, dx...) per group and tap."""
    rank = x.ndim - 2
    kernel = tuple(w.shape[2:])
    if kernel_shape and tuple(kernel_shape) != kernel:
        raise ValueError(f"DeformConv kernel_shape {list(kernel_shape)} differs from the "
                         f"weights' {list(kernel)}")
    strides_ = spatial(strides, rank, 1)
    dilations_ = spatial(dilations, rank, 1)
    begin, _, outs = window_pads("NOTSET", pads, x.shape[2:], kernel, strides_, dilations_)
    n, channels = x.shape[:2]
    taps = math.prod(kernel)
    offset = offset.reshape(n, offset_group, taps, rank, *outs).astype(np.float64)
    mask = np.ones((n, offset_group, taps, *outs)) if mask is None else \
        mask.reshape(n, offset_group, taps, *outs).astype(np.float64)
    cols = _deform_columns(x, offset, mask, kernel, strides_, dilations_, begin, outs)
    per_group = cols.reshape(n, group, (channels // group) * taps, -1)
    weights = w.reshape(group, w.shape[0] // group, -1).astype(np.float64)
    y = np.matmul(weights[None], per_group).reshape(n, w.shape[0], *outs)
    if b is not None:
        y += b.reshape((-1,) + (1,) * rank)
    return y.astype(x.dtype)


def _deform_columns(x: np.ndarray, offset: np.ndarray, mask: np.ndarray,
                    kernel: tuple[int, ...], strides: tuple[int, ...],
                    dilations: tuple[int, ...], begin: list[int], outs: list[int]
                    ) -> np.ndarray:
    """The sampled columns [N, C, taps, *out]."""
    n, channels = x.shape[:2]
    groups = offset.shape[1]
    per = channels // groups
    borders = [(0.0, s - 1.0) for s in x.shape[2:]]
    grids = np.meshgrid(*[np.arange(o) * s - p for o, s, p in zip(outs, strides, begin,
                                                                   strict=True)],
                        indexing="ij")
    cols = np.zeros((n, channels, len(offset[0, 0]), *outs))
    for tap, position in enumerate(itertools.product(*[range(k) for k in kernel])):
        for g in range(groups):
            coords = [grids[a][None] + position[a] * dilations[a] + offset[:, g, tap, a]
                      for a in range(len(kernel))]
            xs = x[:, g * per:(g + 1) * per].astype(np.float64)
            values = sample(xs, coords, "linear", "zeros", borders)
            cols[:, g * per:(g + 1) * per, tap] = values * mask[:, g, tap][:, None]
    return cols
