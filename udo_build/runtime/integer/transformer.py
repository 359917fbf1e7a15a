"""Integer Softmax, LayerNormalization and RMSNormalization: deterministic integer algorithms in
int64 (`intmath.py`), with float64 only in the tables and constants computed at load.

Softmax of codes q along an axis (input scale s_x, output encoding y):

    d = max(q) - q                                  (0 .. 2^bits - 1: an index)
    e = EXP[d], EXP[d] = round(exp(-s_x d) x 2^24)   (the 256- or 65536-entry table, at load)
    p = round(e x 2^22 / sum(e))                    (exact rounding division: 22 fraction bits)
    y = requantize(p) with the multiplier 2^-22 / s_y

LayerNormalization (RMSNormalization) of codes q over the axes from `axis` on (N values per
row), c = q - z_x, with gamma quantized (g = q_gamma - z_gamma, scale s_g) and beta in the
accumulator's units (round(beta / (s_g 2^-24)), at load, as a convolution's bias):

    D = N c - sum(c)                (RMS: N c)             = N (c - mean) exactly
    R = N sum(c^2) - sum(c)^2       (RMS: N sum(c^2))      = N^2 var exactly
        + round(N^2 epsilon / s_x^2)
    L = max(0, (60 - bitlen(R)) // 2)           (R << 2L: about 59-60 bits)
    r = round(2^59 / isqrt(R << 2L))            (1 / sqrt(R) ~ r 2^(L - 59))
    n = round(D r / 2^(59 - L - 24))            (the normalized value, 24 fraction bits)
    y = requantize(n g + beta) with the multiplier s_g 2^-24 / s_y (wide: exact in int64)

Every rounding is half to even. The binders decline (float fallback) where a bound could
overflow int64: N x max|c| must stay below 2^30 (16-bit activations: N < 16384).
"""

from __future__ import annotations

import math

import numpy as np

from ...kernels.default._common import axis_of
from .fixed import Requant, reach, zero_point
from .intmath import bit_length, divide_round, isqrt, shift_round
from .registry import ACTIVATIONS, QUANTIZED, Bound, Context, binds, combos, register

EXP_BITS = 24
RATIO_BITS = 22
NORM_BITS = 24
RSQRT_BITS = 59
RADICAND_BITS = 60
ROW_LIMIT = 2 ** 30  # N x max|c|


def softmax(x: np.ndarray, *, axis: int, table: np.ndarray, requant: Requant) -> np.ndarray:
    """Softmax of codes by the exp table (see the module docstring)."""
    axis = axis_of(axis, x.ndim)
    d = x.max(axis=axis, keepdims=True).astype(np.int64) - x
    e = np.take(table, d)
    p = divide_round(e << RATIO_BITS, e.sum(axis=axis, keepdims=True))
    return requant.apply(p)


def exp_table(scale: float, size: int) -> np.ndarray:
    """round(exp(-scale x d) x 2^EXP_BITS) for d in [0, size)."""
    d = np.arange(size, dtype=np.float64)
    return np.rint(np.ldexp(np.exp(-scale * d), EXP_BITS)).astype(np.int64)


register("Softmax", softmax, [(t,) for t in ACTIVATIONS])


@binds("Softmax")
def bind_softmax(ctx: Context) -> Bound | None:
    x = ctx.input(0)
    if x is None or x.encoding is None:
        return None
    enc = x.encoding
    table = exp_table(enc.scale, enc.qmax - enc.qmin + 1)
    requant = Requant.make(2.0 ** -RATIO_BITS / ctx.out.scale, 2 ** RATIO_BITS, ctx.out,
                           ctx.output.clamp)
    if requant is None:  # pragma: no cover (2^22 leaves 29 bits)
        return None
    return Bound({"axis": ctx.node.attr("axis", -1), "table": table, "requant": requant})


# -- normalizations -------------------------------------------------------------------------------


def normalized(c: np.ndarray, eps_q: float, rms: bool) -> np.ndarray:
    """n = (c - mean) / sqrt(var + eps) (RMS: c / sqrt(mean(c^2) + eps)) per row of c (rows, N),
    NORM_BITS fraction bits (see the module docstring)."""
    n = c.shape[-1]
    s2 = (c * c).sum(axis=-1, keepdims=True)
    if rms:
        d, r = n * c, n * s2
    else:
        s1 = c.sum(axis=-1, keepdims=True)
        d, r = n * c - s1, n * s2 - s1 * s1
    r = np.maximum(r + int(np.rint(n * n * eps_q)), 1)  # 0 only where d is 0
    lift = np.maximum((RADICAND_BITS - bit_length(r)) // 2, 0)
    rho = divide_round(np.int64(1) << RSQRT_BITS, isqrt(r << (2 * lift)))
    return shift_round(d * rho, RSQRT_BITS - lift - NORM_BITS)


def layer_normalization(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray | None = None, *,
                        axis: int, x_zero_point: int, eps_q: float, requant: Requant,
                        rms: bool = False) -> np.ndarray:
    """requantize(normalized(x) x gamma + beta): gamma centered (int64), beta in accumulator
    units (int64), both as the binder replaced them."""
    axis = axis_of(axis, x.ndim)
    n = math.prod(x.shape[axis:])
    if n * max(x_zero_point, int(np.iinfo(x.dtype).max) - x_zero_point) >= ROW_LIMIT \
            or n * n * eps_q >= 2.0 ** RADICAND_BITS:
        raise ValueError(f"rows of {n} values overflow the integer normalization")
    c = x.reshape(-1, n).astype(np.int64) - x_zero_point
    acc = normalized(c, eps_q, rms).reshape(x.shape) * gamma
    if beta is not None:
        acc += beta
    return requant.apply(acc)


def rms_normalization(x: np.ndarray, gamma: np.ndarray, *, axis: int, x_zero_point: int,
                      eps_q: float, requant: Requant) -> np.ndarray:
    return layer_normalization(x, gamma, None, axis=axis, x_zero_point=x_zero_point,
                               eps_q=eps_q, requant=requant, rms=True)


_BIAS = (*QUANTIZED, "float32", "int32")
register("LayerNormalization", layer_normalization,
         combos(ACTIVATIONS, QUANTIZED) + combos(ACTIVATIONS, QUANTIZED, _BIAS))
register("RMSNormalization", rms_normalization, combos(ACTIVATIONS, QUANTIZED))


def _bind_norm(ctx: Context) -> Bound | None:
    x, gamma, beta = ctx.input(0), ctx.input(1), ctx.input(2)
    if x is None or x.encoding is None or gamma is None or gamma.encoding is None:
        return None
    if not gamma.constant or (beta is not None and beta.real is None):
        return None
    if len([o for o in ctx.outputs if o.name]) != 1:
        return None  # Mean / InvStdDev requested: float fallback
    axis = ctx.node.attr("axis", -1)
    longest = ROW_LIMIT // reach(x.encoding)  # the longest row the kernel takes
    if x.shape is not None:
        rows = x.shape[axis_of(axis, len(x.shape)):]
        if all(isinstance(s, int) for s in rows):
            longest = math.prod(rows)  # type: ignore[arg-type]
    if longest * reach(x.encoding) >= ROW_LIMIT:
        return None
    g_enc = gamma.encoding
    unit = g_enc.scale * 2.0 ** -NORM_BITS  # the accumulator's scale
    replace = {1: gamma.array.astype(np.int64) - zero_point(g_enc)}
    bound = (math.sqrt(longest) + 1) * 2.0 ** NORM_BITS * reach(g_enc)  # |n| <= sqrt(N)
    if beta is not None:
        replace[2] = np.rint(np.asarray(beta.real, np.float64) / unit).astype(np.int64)
        bound += float(np.abs(replace[2]).max(initial=0))
    requant = Requant.make(unit / ctx.out.scale, bound, ctx.out, ctx.output.clamp)
    if requant is None:
        return None
    eps_q = float(ctx.node.attr("epsilon", 1e-5)) / x.encoding.scale ** 2
    return Bound({"axis": axis, "x_zero_point": zero_point(x.encoding), "eps_q": eps_q,
                  "requant": requant}, replace)


binds("LayerNormalization")(_bind_norm)
binds("RMSNormalization")(_bind_norm)
