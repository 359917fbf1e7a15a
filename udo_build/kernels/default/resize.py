"""Resize at opset 17, modes nearest and linear (multilinear: one axis after the other), with
the coordinate transformations half_pixel, pytorch_half_pixel, align_corners and asymmetric."""

from __future__ import annotations

import numpy as np

from ._package import DEFAULT

ROUNDING = {
    "round_prefer_floor": lambda x: np.ceil(x - 0.5),
    "round_prefer_ceil": lambda x: np.floor(x + 0.5),
    "floor": np.floor,
    "ceil": np.ceil,
}


def _source(mode: str, n_in: int, n_out: int, scale: float) -> np.ndarray:
    """The input coordinate each output position samples, along one axis."""
    out = np.arange(n_out, dtype=np.float64)
    if mode == "half_pixel":
        return (out + 0.5) / scale - 0.5
    if mode == "pytorch_half_pixel":
        return (out + 0.5) / scale - 0.5 if n_out > 1 else np.zeros(n_out)
    if mode == "align_corners":
        return out * (n_in - 1) / (n_out - 1) if n_out > 1 else np.zeros(n_out)
    if mode == "asymmetric":
        return out / scale
    raise NotImplementedError(f"Resize coordinate_transformation_mode {mode!r} is not emulated; "
                              "emulated: half_pixel, pytorch_half_pixel, align_corners, "
                              "asymmetric")


@DEFAULT.op("Resize")
def resize(x: np.ndarray, roi: np.ndarray | None = None, scales: np.ndarray | None = None,
           sizes: np.ndarray | None = None, *, coordinate_transformation_mode: str = "half_pixel",
           cubic_coeff_a: float = -0.75, exclude_outside: int = 0,
           extrapolation_value: float = 0.0, mode: str = "nearest",
           nearest_mode: str = "round_prefer_floor") -> np.ndarray:
    if mode not in ("nearest", "linear"):
        raise NotImplementedError(f"Resize mode {mode!r} is not emulated (nearest, linear are)")
    if sizes is not None and np.size(sizes):
        outs = [int(s) for s in np.asarray(sizes).reshape(-1)]
        factors = [o / n for o, n in zip(outs, x.shape, strict=True)]
    elif scales is not None and np.size(scales):
        factors = [float(s) for s in np.asarray(scales).reshape(-1)]
        outs = [int(np.floor(n * f)) for n, f in zip(x.shape, factors, strict=True)]
    else:
        raise ValueError("Resize needs scales or sizes")
    y = x
    for axis, (n_in, n_out, factor) in enumerate(zip(x.shape, outs, factors, strict=True)):
        if n_in == n_out and factor == 1.0:
            continue
        where = _source(coordinate_transformation_mode, n_in, n_out, factor)
        if mode == "nearest":
            index = np.clip(ROUNDING[nearest_mode](where), 0, n_in - 1).astype(np.intp)
            y = np.take(y, index, axis=axis)
            continue
        where = np.clip(where, 0, n_in - 1)
        low = np.floor(where).astype(np.intp)
        high = np.minimum(low + 1, n_in - 1)
        shape = [1] * x.ndim
        shape[axis] = n_out
        weight = (where - low).astype(x.dtype).reshape(shape)
        below = np.take(y, low, axis=axis)
        y = below + (np.take(y, high, axis=axis) - below) * weight
    return y if y is not x else x.copy()
