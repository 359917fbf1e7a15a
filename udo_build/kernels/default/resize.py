"""Resize (opset 17 attributes, and half_pixel_symmetric of opset 19): modes nearest, linear and
cubic, one axis after the other; every coordinate transformation, tf_crop_and_resize with its
roi and extrapolation value. An output position samples the input at a coordinate computed from
the scale as given (`n_in * scale`, not the rounded output size), as ONNX defines."""

from __future__ import annotations

import numpy as np

from ._package import DEFAULT

ROUNDING = {
    "round_prefer_floor": lambda x: np.ceil(x - 0.5),
    "round_prefer_ceil": lambda x: np.floor(x + 0.5),
    "floor": np.floor,
    "ceil": np.ceil,
}


def _source(mode: str, n_in: int, n_out: int, scale: float,
            roi: tuple[float, float]) -> np.ndarray:
    """The input coordinate each output position samples, along one axis."""
    out = np.arange(n_out, dtype=np.float64)
    length = n_in * scale  # the resized length before rounding
    if mode == "half_pixel":
        return (out + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        offset = n_in / 2 * (1 - n_out / length)
        return offset + (out + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (out + 0.5) / scale - 0.5 if n_out > 1 else np.zeros(n_out)
    if mode == "align_corners":
        return out * (n_in - 1) / (length - 1) if length > 1 else np.zeros(n_out)
    if mode == "asymmetric":
        return out / scale
    if mode == "tf_crop_and_resize":
        start, end = roi
        if n_out > 1:
            return start * (n_in - 1) + out * (end - start) * (n_in - 1) / (n_out - 1)
        return np.full(n_out, 0.5 * (start + end) * (n_in - 1))
    raise NotImplementedError(f"Resize coordinate_transformation_mode {mode!r}")


def _cubic(where: np.ndarray, n_in: int, a: float, exclude_outside: int
           ) -> tuple[np.ndarray, np.ndarray]:
    """(indices, weights), each (n_out, 4): the four taps around each coordinate."""
    base = np.floor(where)
    t = (where - base)[:, None]
    d = np.concatenate([t + 1, t, 1 - t, 2 - t], axis=1)  # distances to the taps
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    weights = np.where(d <= 1, near, far)
    taps = base[:, None].astype(np.intp) + np.arange(-1, 3)
    if exclude_outside:
        weights = np.where((taps < 0) | (taps >= n_in), 0.0, weights)
        weights /= weights.sum(axis=1, keepdims=True)
    return np.clip(taps, 0, n_in - 1), weights


def _axis(y: np.ndarray, axis: int, where: np.ndarray, n_in: int, mode: str,
          attrs: dict) -> np.ndarray:
    """y resampled along `axis` at the coordinates `where`."""
    shape = [1] * y.ndim
    shape[axis] = len(where)
    if mode == "nearest":
        index = np.clip(ROUNDING[attrs["nearest_mode"]](where), 0, n_in - 1).astype(np.intp)
        return np.take(y, index, axis=axis)
    if mode == "linear":
        clipped = np.clip(where, 0, n_in - 1)
        low = np.floor(clipped).astype(np.intp)
        high = np.minimum(low + 1, n_in - 1)
        weight = (clipped - low).astype(y.dtype).reshape(shape)
        below = np.take(y, low, axis=axis)
        return below + (np.take(y, high, axis=axis) - below) * weight
    if mode == "cubic":
        taps, weights = _cubic(where, n_in, attrs["cubic_coeff_a"], attrs["exclude_outside"])
        out = np.zeros(y.shape[:axis] + (len(where),) + y.shape[axis + 1:], dtype=np.float64)
        for t in range(4):
            out += np.take(y, taps[:, t], axis=axis) * weights[:, t].reshape(shape)
        return out.astype(y.dtype)
    raise NotImplementedError(f"Resize mode {mode!r} (nearest, linear and cubic are)")


@DEFAULT.op("Resize")
def resize(x: np.ndarray, roi: np.ndarray | None = None, scales: np.ndarray | None = None,
           sizes: np.ndarray | None = None, *, coordinate_transformation_mode: str = "half_pixel",
           cubic_coeff_a: float = -0.75, exclude_outside: int = 0,
           extrapolation_value: float = 0.0, mode: str = "nearest",
           nearest_mode: str = "round_prefer_floor") -> np.ndarray:
    if sizes is not None and np.size(sizes):
        outs = [int(s) for s in np.asarray(sizes).reshape(-1)]
        factors = [o / n for o, n in zip(outs, x.shape, strict=True)]
    elif scales is not None and np.size(scales):
        factors = [float(s) for s in np.asarray(scales).reshape(-1)]
        outs = [int(np.floor(n * f)) for n, f in zip(x.shape, factors, strict=True)]
    else:
        raise ValueError("Resize needs scales or sizes")
    crop = coordinate_transformation_mode == "tf_crop_and_resize"
    bounds = np.asarray(roi if roi is not None and crop else [], dtype=np.float64).reshape(-1)
    attrs = {"nearest_mode": nearest_mode, "cubic_coeff_a": cubic_coeff_a,
             "exclude_outside": exclude_outside}
    y = x
    for axis, (n_in, n_out, factor) in enumerate(zip(x.shape, outs, factors, strict=True)):
        if n_in == n_out and factor == 1.0 and not crop:
            continue
        span = (bounds[axis], bounds[axis + x.ndim]) if bounds.size else (0.0, 1.0)
        where = _source(coordinate_transformation_mode, n_in, n_out, factor, span)
        y = _axis(y, axis, where, n_in, mode, attrs)
        if crop:
            outside = ((where < 0) | (where > n_in - 1)).reshape(
                [-1 if a == axis else 1 for a in range(x.ndim)])
            y = np.where(outside, np.asarray(extrapolation_value, dtype=y.dtype), y)
    return y if y is not x else x.copy()
