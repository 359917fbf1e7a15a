"""Matrix products: Gemm and MatMul, one BLAS call each."""

from __future__ import annotations

import numpy as np

from ._package import DEFAULT


@DEFAULT.op("Gemm")
def gemm(a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None, *, alpha: float = 1.0,
         beta: float = 1.0, transA: int = 0, transB: int = 0) -> np.ndarray:
    """alpha * A' @ B' + beta * C, C broadcast to the result (unidirectionally)."""
    y = np.matmul(a.T if transA else a, b.T if transB else b)
    if alpha != 1.0:
        y *= np.asarray(alpha, dtype=y.dtype)
    if c is not None and beta != 0.0:
        y += c if beta == 1.0 else c * np.asarray(beta, dtype=y.dtype)
    return y


@DEFAULT.op("MatMul")
def matmul(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.matmul(a, b)
