"""The normalizations of transformers and diffusion models: GroupNormalization (opsets 18 and
21), RMSNormalization (opset 23) and MeanVarianceNormalization. The statistics are computed in
float32 or wider (`stash_type` 1, the only one ONNX's reference has) and the result cast back to
the input's type."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ...errors import UserError
from ._common import axis_of
from ._package import DEFAULT


def _wide(x: np.ndarray) -> np.ndarray:
    return x if x.dtype == np.float64 else x.astype(np.float32)


def _stash(stash_type: int, op: str) -> None:
    if stash_type != 1:
        raise UserError(f"{op}: not supported: stash_type={stash_type}",
                        hint="stash_type 1 (float32 statistics) is the one supported")


def _per_channel(values: np.ndarray, channels: int, groups: int, op: str) -> np.ndarray:
    """Scale or bias per channel (opset 21); per group (opset 18) repeated over its channels."""
    flat = values.reshape(-1)
    if flat.size == channels:
        return flat
    if flat.size == groups:
        return np.repeat(flat, channels // groups)
    raise UserError(f"{op}: a scale or bias of {flat.size} values, where the input has "
                    f"{channels} channels in {groups} groups",
                    hint="give one value per channel (opset 21) or per group (opset 18)")


@DEFAULT.op("GroupNormalization")
def group_normalization(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, *,
                        epsilon: float = 1e-5, num_groups: int,
                        stash_type: int = 1) -> np.ndarray:
    """Each group of channels normalized over its channels and spatial positions, then an
    affine map per channel."""
    _stash(stash_type, "GroupNormalization")
    n, c = x.shape[:2]
    if num_groups <= 0 or c % num_groups:
        raise UserError(f"GroupNormalization: num_groups={num_groups} does not divide the "
                        f"{c} channels")
    w = _wide(x).reshape(n, num_groups, -1)
    mean = w.mean(axis=2, keepdims=True)
    var = np.square(w - mean).mean(axis=2, keepdims=True)
    y = ((w - mean) / np.sqrt(var + epsilon)).reshape(x.shape)
    shape = (1, c) + (1,) * (x.ndim - 2)
    gamma = _per_channel(_wide(scale), c, num_groups, "GroupNormalization").reshape(shape)
    beta = _per_channel(_wide(bias), c, num_groups, "GroupNormalization").reshape(shape)
    return (y * gamma + beta).astype(x.dtype, copy=False)


@DEFAULT.op("RMSNormalization")
def rms_normalization(x: np.ndarray, scale: np.ndarray, *, axis: int = -1,
                      epsilon: float = 1e-5, stash_type: int = 1) -> np.ndarray:
    """x / sqrt(mean(x^2) + epsilon) over the axes from `axis` to the last, times scale."""
    _stash(stash_type, "RMSNormalization")
    first = axis_of(axis, x.ndim)
    w = _wide(x)
    axes = tuple(range(first, x.ndim))
    rms = np.sqrt(np.square(w).mean(axis=axes, keepdims=True) + epsilon)
    return (w / rms * _wide(scale)).astype(x.dtype, copy=False)


@DEFAULT.op("MeanVarianceNormalization")
def mean_variance_normalization(x: np.ndarray, *,
                                axes: Sequence[int] = (0, 2, 3)) -> np.ndarray:
    """(x - mean) / (std + 1e-9) over `axes`, as ONNX's function body computes it."""
    chosen = tuple(sorted({axis_of(int(a), x.ndim) for a in axes}))
    w = _wide(x)
    mean = w.mean(axis=chosen, keepdims=True)
    var = np.square(w).mean(axis=chosen, keepdims=True) - np.square(mean)
    return ((w - mean) / (np.sqrt(var) + 1e-9)).astype(x.dtype, copy=False)
