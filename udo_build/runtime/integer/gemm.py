"""Integer matrix products: Gemm and MatMul by quantized constant weights (int8/int16, per
output column or not, int32 bias), and MatMul of two quantized activations.

Weights are packed at load (`exact.pack`) as (N, K); a product computes W @ (A - zp)^T, exact,
requantizes per output column and transposes back (the result is small next to the product):
by the integer convolution kernel (a 1x1 convolution of K channels over M pixels, `_dot_rows`)
where it runs, 8-bit activations by int8 weights, else by exact float products.
Two activations are centered and multiplied in K chunks small enough to stay exact (batch
dimensions broadcast as numpy's matmul does); 16-bit operands, or a K no shape tells before the
run, take the wide (int64) requantization of `fixed.py`.
"""

from __future__ import annotations

import math

import numpy as np

from ...ir.encodings import Encoding
from .conv import _dot_products, add_bias, weighted
from .exact import Packed, chunk_size, pack, product, runtime_product
from .fixed import WIDE_LIMIT, Requant, centered, reach, zero_point
from .registry import (
    ACTIVATIONS,
    WEIGHTS,
    Bound,
    Context,
    Operand,
    binds,
    combos,
    register,
)


def gemm(a: np.ndarray, b: np.ndarray, c: np.ndarray | None = None, *, a_zero_point: int,
         requant: Requant, packed: Packed | None = None, alpha: float = 1.0, beta: float = 1.0,
         transA: int = 0, transB: int = 0) -> np.ndarray:  # noqa: N803 (ONNX names)
    """requantize(A' @ B' + C), C in accumulator units (alpha and beta are 1)."""
    if alpha != 1.0 or (c is not None and beta != 1.0):
        raise ValueError("the integer Gemm takes alpha = beta = 1")
    a = a.T if transA else a
    return _by_weights(a, b if transB else b.T, c, a_zero_point, requant, packed)


def matmul(a: np.ndarray, b: np.ndarray, *, a_zero_point: int, requant: Requant,
           packed: Packed | None = None) -> np.ndarray:
    """requantize(A @ B) for constant weights B (K, N)."""
    rows = a.reshape(-1, a.shape[-1])
    y = _by_weights(rows, b.T, None, a_zero_point, requant, packed)
    return y.reshape(*a.shape[:-1], b.shape[-1])


def _by_weights(a: np.ndarray, w: np.ndarray, c: np.ndarray | None, zp: int,
                requant: Requant, packed: Packed | None) -> np.ndarray:
    """requantize(a @ w.T + c) for a (M, K) and w (N, K): by the integer convolution kernel
    where it runs (`_dot_rows`), else exact float products."""
    if packed is None:
        span = int(np.iinfo(a.dtype).max) - int(np.iinfo(a.dtype).min)
        packed = pack(w[None], span)
    found = _dot_rows(a, w, c, zp, requant, packed)
    if found is not None:
        return found
    cols = centered(a.T, zp, packed.dtype)  # (K, M)
    y = product(packed, cols)  # (N, M)
    offset = None if c is None else add_bias(y, c.reshape(-1, 1), packed)
    return np.ascontiguousarray(requant.apply(y, offset, owned=True).T)


def _dot_rows(a: np.ndarray, w: np.ndarray, c: np.ndarray | None, zp: int, requant: Requant,
              packed: Packed) -> np.ndarray | None:
    """requantize(a @ w.T + c) as the 1x1 convolution it is, by the integer kernel
    (`conv._dot_products`: 8-bit a, int8 w): K input channels, the M rows of a its pixels (one
    column of M), N output channels; None where that kernel does not run it."""
    if a.ndim != 2 or w.ndim != 2 or w.dtype != np.int8 or a.shape[0] == 0:
        return None
    m, k = a.shape
    x = np.ascontiguousarray(a.T).reshape(1, k, m, 1)
    found = _dot_products(x, zp, w[:, :, None, None], c, packed, 1, [0, 0], [m, 1], (1, 1),
                          (1, 1), requant)
    if found is None:
        return None
    y, done = found
    y = y.reshape(w.shape[0], m)
    return np.ascontiguousarray((y if done else requant.apply(y, None, owned=True)).T)


def matmul_activations(a: np.ndarray, b: np.ndarray, *, a_zero_point: int, b_zero_point: int,
                       requant: Requant, max_k: int | None = None) -> np.ndarray:
    """requantize((A - za) @ (B - zb)) for two quantized activations (numpy's matmul: batch
    dimensions broadcast, a vector operand gains and loses an axis)."""
    if max_k is not None and a.shape[-1] > max_k:
        raise ValueError(f"a reduction over {a.shape[-1]} values; the requantization was made "
                         f"for at most {max_k}")
    reach_a = max(abs(int(np.iinfo(a.dtype).min) - a_zero_point),
                  int(np.iinfo(a.dtype).max) - a_zero_point)
    reach_b = max(abs(int(np.iinfo(b.dtype).min) - b_zero_point),
                  int(np.iinfo(b.dtype).max) - b_zero_point)
    dtype, chunk = chunk_size(reach_a, reach_b, a.shape[-1])
    left, right = centered(a, a_zero_point, dtype), centered(b, b_zero_point, dtype)
    y = runtime_product(left[None] if a.ndim == 1 else left,
                        right[:, None] if b.ndim == 1 else right, chunk)
    if b.ndim == 1:
        y = y[..., 0]
    if a.ndim == 1:
        y = y[..., 0, :] if b.ndim > 1 else y[..., 0]
    return requant.apply(y, owned=True)


register("Gemm", gemm, combos(ACTIVATIONS, WEIGHTS))
register("MatMul", matmul, combos(ACTIVATIONS, WEIGHTS))
register("MatMul", matmul_activations, combos(ACTIVATIONS, ACTIVATIONS))


def _by_constant(ctx: Context, w_nk: np.ndarray, encs: tuple[Encoding, ...],
                 bias: Operand | None) -> Bound | None:
    """Gemm and MatMul by weights: w_nk is the quantized (N, K) weight matrix (a transposed
    view of the weight as it is held: packed as it is, not copied)."""
    a = ctx.input(0)
    if a is None or a.encoding is None:
        return None
    made = weighted(ctx, a.encoding, w_nk[None], encs, bias, 1)
    if made is None:
        return None
    kwargs, replace = made
    return Bound({**ctx.node.kwargs, **kwargs, "a_zero_point": zero_point(a.encoding)},
                    replace)


@binds("Gemm")
def bind_gemm(ctx: Context) -> Bound | None:
    node, b, c = ctx.node, ctx.input(1), ctx.input(2)
    if b is None or not b.constant or not b.encodings or b.array.ndim != 2:
        return None
    if node.attr("alpha", 1.0) != 1.0 or (c is not None and node.attr("beta", 1.0) != 1.0):
        return None
    w = b.array if node.attr("transB", 0) else b.array.T
    return _by_constant(ctx, w, b.encodings, c)


@binds("MatMul")
def bind_matmul(ctx: Context) -> Bound | None:
    a, b = ctx.input(0), ctx.input(1)
    if a is None or b is None or a.encoding is None or not b.encodings:
        return None
    if b.constant:
        if b.array.ndim != 2:
            return None
        return _by_constant(ctx, b.array.T, b.encodings, None)
    if b.encoding is None:
        return None
    k = _reduction(a, b)
    per_k = reach(a.encoding) * reach(b.encoding)
    real = a.encoding.scale * b.encoding.scale / ctx.out.scale
    max_k = None
    if k is None:  # unknown until run time: wide, for the longest K int64 holds
        max_k = (WIDE_LIMIT // 4) // max(1, per_k, math.ceil(per_k * real))
        k = max_k
    requant = Requant.make(real, k * per_k, ctx.out, ctx.output.clamp)
    if requant is None:
        return None
    return Bound({"a_zero_point": zero_point(a.encoding),
                  "b_zero_point": zero_point(b.encoding), "requant": requant, "max_k": max_k})


def _reduction(a: Operand, b: Operand) -> int | None:
    """The reduction length K of a @ b, when a shape tells it."""
    if a.shape and isinstance(a.shape[-1], int):
        return a.shape[-1]
    if b.shape and isinstance(b.shape[-2 if len(b.shape) > 1 else -1], int):
        return int(b.shape[-2 if len(b.shape) > 1 else -1])
    return None
