"""Numpy kernels of the example's custom ops, used by the emulator and for calibration.

Each kernel is a pure function of its inputs and parameters (as keyword arguments).
"""

import numpy as np


def softplus(x: np.ndarray, *, beta: float = 1.0) -> np.ndarray:
    """log(1 + exp(beta * x)) / beta, computed without overflow for large beta * x."""
    bx = beta * x
    return (np.maximum(bx, 0) + np.log1p(np.exp(-np.abs(bx)))) / beta


def swish(x: np.ndarray, *, beta: float = 1.0) -> np.ndarray:
    """x * sigmoid(beta * x)."""
    return x / (1.0 + np.exp(-beta * x))
