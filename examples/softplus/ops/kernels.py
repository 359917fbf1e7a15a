"""Numpy kernels of the example's custom ops, for the udo-build emulator (float runtime and
calibration). Each kernel is a pure function: inputs positionally, parameters keyword-only."""

import numpy as np

from udo_build.kernels import Cost, OpPackage

package = OpPackage("SoftplusPackage")


@package.op("Softplus", cost=Cost.FAST)
def softplus(x: np.ndarray, *, beta: float = 1.0) -> np.ndarray:
    """log(1 + exp(beta * x)) / beta, computed without overflow for large beta * x."""
    bx = beta * x
    return ((np.maximum(bx, 0) + np.log1p(np.exp(-np.abs(bx)))) / beta).astype(x.dtype)


@package.op("Swish", cost=Cost.FAST)
def swish(x: np.ndarray, *, beta: float = 1.0) -> np.ndarray:
    """x * sigmoid(beta * x)."""
    return (x / (1.0 + np.exp(-beta * x))).astype(x.dtype)
