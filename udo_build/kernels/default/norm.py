"""Normalizations: BatchNormalization (inference and training mode), InstanceNormalization,
LayerNormalization, and LpNormalization. Statistics are kept in the input's float type."""

from __future__ import annotations

import numpy as np

from ._common import axis_of
from ._package import DEFAULT


def _per_channel(v: np.ndarray, ndim: int) -> np.ndarray:
    return v.reshape((1, -1) + (1,) * (ndim - 2))


def batch_norm_affine(scale: np.ndarray, bias: np.ndarray, mean: np.ndarray,
                      var: np.ndarray, epsilon: float) -> tuple[np.ndarray, np.ndarray]:
    """The per-channel (multiplier, addend) that inference-mode batch norm applies."""
    dtype = np.result_type(scale.dtype, var.dtype)
    multiplier = scale / np.sqrt(var + np.asarray(epsilon, dtype=dtype))
    return multiplier, bias - mean * multiplier


@DEFAULT.op("BatchNormalization")
def batch_normalization(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, mean: np.ndarray,
                        var: np.ndarray, *, epsilon: float = 1e-5, momentum: float = 0.9,
                        training_mode: int = 0):
    """Inference: (x - mean) / sqrt(var + eps) * scale + bias. Training mode normalizes with the
    batch statistics and also returns the updated running mean and variance."""
    if not training_mode:
        multiplier, addend = batch_norm_affine(scale, bias, mean, var, epsilon)
        y = x * _per_channel(multiplier, x.ndim)
        y += _per_channel(addend, x.ndim)
        return y
    axes = (0,) + tuple(range(2, x.ndim))
    batch_mean = x.mean(axis=axes)
    batch_var = x.var(axis=axes)
    multiplier, addend = batch_norm_affine(scale, bias, batch_mean, batch_var, epsilon)
    y = x * _per_channel(multiplier, x.ndim) + _per_channel(addend, x.ndim)
    m = np.asarray(momentum, dtype=x.dtype)
    return y, mean * m + batch_mean * (1 - m), var * m + batch_var * (1 - m)


@DEFAULT.op("InstanceNormalization")
def instance_normalization(x: np.ndarray, scale: np.ndarray, bias: np.ndarray, *,
                           epsilon: float = 1e-5) -> np.ndarray:
    axes = tuple(range(2, x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    centered = x - mean
    var = np.square(centered).mean(axis=axes, keepdims=True)
    centered /= np.sqrt(var + np.asarray(epsilon, dtype=x.dtype))
    return centered * _per_channel(scale, x.ndim) + _per_channel(bias, x.ndim)


@DEFAULT.op("LayerNormalization")
def layer_normalization(x: np.ndarray, scale: np.ndarray, bias: np.ndarray | None = None, *,
                        axis: int = -1, epsilon: float = 1e-5, stash_type: int = 1):
    """Normalizes over the axes from `axis` on; returns (Y, Mean, InvStdDev)."""
    axes = tuple(range(axis_of(axis, x.ndim), x.ndim))
    mean = x.mean(axis=axes, keepdims=True)
    centered = x - mean
    inv_std = 1 / np.sqrt(np.square(centered).mean(axis=axes, keepdims=True)
                          + np.asarray(epsilon, dtype=x.dtype))
    y = centered * inv_std * scale
    if bias is not None:
        y += bias
    return y, mean, inv_std


@DEFAULT.op("LpNormalization")
def lp_normalization(x: np.ndarray, *, axis: int = -1, p: int = 2) -> np.ndarray:
    """x divided by its L1 or L2 norm along `axis` (0 where that norm is 0, as onnx does)."""
    if p not in (1, 2):
        raise NotImplementedError(f"LpNormalization p={p} (ONNX defines p 1 and 2)")
    norm = (np.abs(x).sum(axis=axis, keepdims=True) if p == 1
            else np.sqrt(np.square(x).sum(axis=axis, keepdims=True)))
    safe = np.where(norm == 0, np.ones_like(norm), norm)
    return np.where(norm == 0, np.zeros_like(x), x / safe)
