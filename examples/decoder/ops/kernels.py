"""Numpy kernels of the decoder example's custom op, for the udo-build emulator (float runtime
and calibration). Inputs positionally, parameters keyword-only."""

import numpy as np

from udo_build.kernels import Cost, OpPackage

package = OpPackage("TransformerPackage")


@package.op("Rope", cost=Cost.FAST)
def rope(x: np.ndarray, position: np.ndarray, *, theta: float = 10000.0) -> np.ndarray:
    """Rotate-half rotary embedding of heads x [B, H, S, Dh] at positions [B, S]."""
    half = x.shape[-1] // 2
    inv_freq = np.float64(theta) ** (-np.arange(0, 2 * half, 2, dtype=np.float64) / (2 * half))
    angles = position.astype(np.float64)[:, None, :, None] * inv_freq  # [B, 1, S, Dh/2]
    cos, sin = np.cos(angles).astype(x.dtype), np.sin(angles).astype(x.dtype)
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], axis=-1)
