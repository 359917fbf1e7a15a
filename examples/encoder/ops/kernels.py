"""Numpy kernels of the encoder example's custom op, for the udo-build emulator (float runtime
and calibration). Inputs positionally, parameters keyword-only."""

import numpy as np

from udo_build.kernels import Cost, OpPackage

package = OpPackage("TransformerPackage")


@package.op("RmsNorm", cost=Cost.FAST)
def rms_norm(x: np.ndarray, gamma: np.ndarray, *, epsilon: float = 1e-6) -> np.ndarray:
    """x / sqrt(mean(x^2 over the last axis) + epsilon) * gamma."""
    mean_square = np.mean(np.square(x), axis=-1, keepdims=True)
    return (x / np.sqrt(mean_square + np.float32(epsilon)) * gamma).astype(x.dtype)
