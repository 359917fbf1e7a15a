"""Scans and tensor algebra: CumSum, CumProd, Trilu, Einsum and Det (Range is in
shape.py)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ...errors import UserError
from ._common import axis_of
from ._package import DEFAULT
from .elementwise import ieee


def _scan(fn: Callable[..., np.ndarray], identity: int, x: np.ndarray, axis: np.ndarray,
          exclusive: int, reverse: int) -> np.ndarray:
    """A running sum or product along `axis` (a 0-d or 1-element tensor); `exclusive` leaves
    the element itself out (the first result is the identity), `reverse` runs from the end."""
    a = axis_of(int(np.asarray(axis).reshape(-1)[0]), x.ndim)
    y = np.flip(x, a) if reverse else x
    y = fn(y, axis=a, dtype=x.dtype)
    if exclusive:
        head = np.full_like(np.take(y, [0], axis=a), identity)
        y = np.concatenate([head, np.delete(y, -1, axis=a)], axis=a)
    return np.ascontiguousarray(np.flip(y, a) if reverse else y)


@DEFAULT.op("CumSum")
@ieee
def cum_sum(x: np.ndarray, axis: np.ndarray, *, exclusive: int = 0,
            reverse: int = 0) -> np.ndarray:
    return _scan(np.cumsum, 0, x, axis, exclusive, reverse)


@DEFAULT.op("CumProd")
@ieee
def cum_prod(x: np.ndarray, axis: np.ndarray, *, exclusive: int = 0,
             reverse: int = 0) -> np.ndarray:
    return _scan(np.cumprod, 1, x, axis, exclusive, reverse)


@DEFAULT.op("Trilu")
def trilu(x: np.ndarray, k: np.ndarray | None = None, *, upper: int = 1) -> np.ndarray:
    """The upper (or lower) triangle of the last two axes, from diagonal k on; zeros elsewhere."""
    diagonal = 0 if k is None else int(np.asarray(k).reshape(()))
    return np.triu(x, diagonal) if upper else np.tril(x, diagonal)


@DEFAULT.op("Einsum")
@ieee
def einsum(*inputs: np.ndarray, equation: str) -> np.ndarray:
    """numpy's einsum, which reads ONNX's equations (explicit or implicit, with '...');
    narrow floats (bfloat16), which it does not take, are computed in float32."""
    narrow = [x.astype(np.float32) if x.dtype.kind == "V" else x for x in inputs]
    try:
        y = np.einsum(equation.replace(" ", ""), *narrow)
    except ValueError as error:
        raise UserError(f"Einsum: equation {equation!r} does not fit inputs of shapes "
                        f"{[x.shape for x in inputs]}: {error}") from None
    return np.asarray(y, dtype=np.result_type(*inputs))


@DEFAULT.op("Det")
@ieee
def det(x: np.ndarray) -> np.ndarray:
    """The determinant of the trailing square matrices, in x's type."""
    wide = x if x.dtype == np.float64 else x.astype(np.float32)
    return np.asarray(np.linalg.det(wide)).astype(x.dtype)
