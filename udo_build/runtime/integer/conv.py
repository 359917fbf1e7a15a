"""Integer convolution: uint8/uint16 input, int8/int16 weights (per output channel or not),
int32 bias, exact accumulation, fixed-point requantization (an absorbed Relu/Clip clamps).

A 2-d convolution of one group whose product is one float32 chunk (`exact.pack`: most of them
at 8 bits) runs the float path's compiled convolution on x - zero point (`_compiled`): every
partial sum below 2^24, its chains of fused multiply-adds form the exact integers, the same bits
as the products below; its weights are packed once, as float32 (four times the int8 weights).
One of several float32 chunks runs it once per range of input channels whose bound stays below
2^24 (`exact.float32_parts`), the parts' exact results summed in float64.

Otherwise (or without the compiled library): the float convolution's im2col
(`udo_build.kernels.default.conv.im2col`) on the centered input (x - zero point, converted to
the BLAS type of the packed weights in the same pass), then one exact product per K chunk
(`exact.product`), batched over groups as in the float kernel; a stride-1 2-d convolution of 64
channels or more with wide enough rows takes one GEMM per tap from its padded input instead
(`taps.py`, the float kernel's wide rows: no im2col copy).
"""

from __future__ import annotations

import math
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from ...ir.encodings import Encoding
from ...kernels.default._common import spatial, window_pads
from ...kernels.default.conv import ConvWeights, im2col, pack_for, run_compiled
from . import passes, taps
from .exact import F32_LIMIT, Packed, biased_product, float32_parts, pack, product
from .fixed import Requant, centered, reach, zero_point
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


def conv(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, *, x_zero_point: int,
         requant: Requant, packed: Packed | None = None, auto_pad: str = "NOTSET",
         dilations: Sequence[int] | None = None, group: int = 1,
         kernel_shape: Sequence[int] | None = None, pads: Sequence[int] | None = None,
         strides: Sequence[int] | None = None) -> np.ndarray:
    """requantize(conv(x - x_zero_point, w) + b); b is in accumulator units (s_x * s_w[c]),
    integers, or float32 integers whose sum with the product stays below 2^24."""
    n, m, rank = x.shape[0], w.shape[0], x.ndim - 2
    kernel = tuple(w.shape[2:])
    if x.shape[1] != w.shape[1] * group or m % group:
        raise ValueError(f"Conv input channels {x.shape[1]}, weights {list(w.shape)} and "
                         f"group {group} do not agree")
    if packed is None:
        span = int(np.iinfo(x.dtype).max) - int(np.iinfo(x.dtype).min)
        packed = pack(w.reshape(group, m // group, -1), span)
    strides_, dilations_ = spatial(strides, rank, 1), spatial(dilations, rank, 1)
    begin, _, outs = window_pads(auto_pad, pads, x.shape[2:], kernel, strides_, dilations_)
    found = _compiled(x, x_zero_point, w, b, packed, group, auto_pad, pads, strides_,
                      dilations_)
    if found is not None:
        y, offset = found
        return requant.apply(y, offset, owned=True)
    if taps.fits(packed, b, x.shape, kernel, strides_, dilations_, begin, outs, group):
        y = taps.tap_product(x, x_zero_point, packed, b, kernel, dilations_, begin, outs)
        return requant.apply(y, None, owned=True)  # the bias is in the product (exact)
    cols = _columns(x, x_zero_point, packed.dtype, kernel, strides_, dilations_, begin, outs)
    cols = cols.reshape(n, group, -1, math.prod(outs))
    single = n == 1 and group == 1
    if single and b is not None and b.dtype == np.float32:
        y = biased_product(packed, cols[0, 0], b)
        if y is not None:  # the bias is in the product (exact: see biased_product)
            return requant.apply(y.reshape(n, m, *outs), None, owned=True)
    y = product(packed, cols[0, 0] if single else cols).reshape(n, m, *outs)
    offset = None if b is None else add_bias(y, b.reshape((-1,) + (1,) * rank), packed)
    return requant.apply(y, offset, owned=True)


_FLOAT_WEIGHTS: weakref.WeakKeyDictionary[Packed, Any] = weakref.WeakKeyDictionary()


def _compiled(x: np.ndarray, zp: int, w: np.ndarray, b: np.ndarray | None, packed: Packed,
              group: int, auto_pad: str, pads: Sequence[int] | None, strides: tuple[int, ...],
              dilations: tuple[int, ...]) -> tuple[np.ndarray, np.ndarray | None] | None:
    """(the accumulator, the offset the requantization adds) by the float path's compiled
    convolution, or None where it does not run: a 2-d convolution of one group whose product is
    one float32 chunk (`exact.pack`: every partial sum below 2^24, so its chain of fused
    multiply-adds, in whatever order, forms the exact integers BLAS forms), or several that
    split by input channels (`_float_parts`), the compiled library there. Its input is x - zp,
    centered by the kernel as it reads the integers (`run_compiled(zp=)`: exact in float32, the
    padding the real 0); its weights are packed once from the integers (a float32 copy, four
    times the int8 weights)."""
    if (group != 1 or w.ndim != 4 or packed.dtype != np.float32 or x.ndim != 4
            or x.dtype.kind not in "ui" or x.dtype.itemsize > 2):
        return None
    from ...kernels.compiled import library

    lib = library()
    if lib is None or x.shape[1] == 0:
        return None
    parts = _float_parts(packed, w)
    if parts is None:
        return None
    bias = None  # added after the chain, exact where every sum with it stays below 2^24
    if len(parts) == 1 and b is not None and b.dtype == np.float32 and packed.partial_bound + \
            float(np.abs(b).max(initial=0)) < F32_LIMIT:
        bias = b
    offset = None if b is None or bias is not None else \
        b.reshape((-1, 1, 1)).astype(np.float64)  # added by the requantization
    attrs = {"auto_pad": auto_pad, "dilations": dilations, "pads": pads, "strides": strides}
    y = None
    for c0, c1, weights in parts:  # each exact in float32; their sum (of a few) in float64
        part = run_compiled(lib, x if len(parts) == 1 else x[:, c0:c1], weights, bias, **attrs,
                            zp=zp, out=lambda shape: _scratch("y", shape))
        if len(parts) == 1:
            return part, offset
        if y is None:
            y = part.astype(np.float64)
        else:
            y += part
    return y, offset


_SCRATCH = threading.local()


def _scratch(use: str, shape: tuple[int, ...]) -> np.ndarray:
    """The calling thread's float32 array of this shape for `use` (the accumulator), kept from
    one convolution to the next: the accumulator is requantized into a new array (or summed
    into a float64 one) before the next convolution of the thread runs, so fresh pages (page
    faults, zeroing) are not paid at every product."""
    kept = getattr(_SCRATCH, use, None)
    if kept is None or kept.size < math.prod(shape):
        kept = np.empty(max(math.prod(shape), 1), np.float32)
        setattr(_SCRATCH, use, kept)
    return kept[:math.prod(shape)].reshape(shape)


def _float_parts(packed: Packed, w: np.ndarray) -> list[tuple[int, int, ConvWeights]] | None:
    """The compiled kernel's weights of this float32 product, by ranges of input channels
    [c0, c1) each an exact float32 product (one range where the product is one chunk, else
    `exact.float32_parts`), one list per `Packed`, kept as long as it; None where the product
    cannot be split so (it takes the BLAS chunks)."""
    found = _FLOAT_WEIGHTS.get(packed, _NONE)
    if found is _NONE:
        ranges = [(0, w.shape[1])] if len(packed.bounds) == 1 else \
            float32_parts(w, packed, len(packed.bounds))
        found = None if ranges is None else [
            (c0, c1, ConvWeights(w if (c0, c1) == (0, w.shape[1]) else w[:, c0:c1]))
            for c0, c1 in ranges]
        found = _FLOAT_WEIGHTS.setdefault(packed, found)
    return found


_NONE: Any = object()


def prepare(packed: Packed, w: np.ndarray, image: tuple[int, ...],
            attrs: dict[str, Any]) -> None:
    """Pack a convolution's weights for the compiled kernel now, for input images of this
    shape (C, H, W), where `_compiled` will run it: a plan built before its session's workers
    fork is packed once, in the parent, and its pages shared."""
    if int(attrs.get("group", 1)) != 1 or w.ndim != 4 or packed.dtype != np.float32:
        return
    geometry = {k: v for k, v in attrs.items() if k in _GEOMETRY}
    for c0, c1, weights in _float_parts(packed, w) or ():
        pack_for(weights, (c1 - c0, *image[1:]), **geometry)


_GEOMETRY = ("auto_pad", "dilations", "group", "kernel_shape", "pads", "strides")


def add_bias(y: np.ndarray, b: np.ndarray, packed: Packed) -> np.ndarray | None:
    """Add the bias into a float32 product in place when the sum stays exact (None then),
    else return it for the requantization to add in float64. A float32 bias is the
    binder's promise that it does (`weighted`)."""
    if y.dtype == np.float32 and (b.dtype == np.float32 or packed.partial_bound + float(
            np.abs(b).max(initial=0)) < F32_LIMIT):
        y += b.astype(np.float32, copy=False)
        return None
    return b


def _columns(x: np.ndarray, zp: int, dtype: np.dtype, kernel: tuple[int, ...],
             strides: tuple[int, ...], dilations: tuple[int, ...], begin: list[int],
             outs: list[int]) -> np.ndarray:
    """The im2col columns of x - zp in `dtype`: one compiled pass where it runs
    (`passes.im2col`: the same numbers), else a 1x1 unpadded convolution reads the (strided)
    input itself, any other centers it, then copies the columns out."""
    fast = passes.im2col(x, zp, dtype, kernel, strides, dilations, begin, outs)
    if fast is not None:
        return fast
    reach_ = [(o - 1) * s + 1 for o, s in zip(outs, strides, strict=True)]
    if all(k == 1 for k in kernel) and not any(begin) and all(
            r <= size for r, size in zip(reach_, x.shape[2:], strict=True)):
        if any(s != 1 for s in strides):
            x = x[(Ellipsis,) + tuple(slice(None, r, s)
                                      for r, s in zip(reach_, strides, strict=True))]
        return centered(x, zp, dtype)
    return im2col(centered(x, zp, dtype), kernel, strides, dilations, begin, outs)


register("Conv", conv, combos(ACTIVATIONS, WEIGHTS))


@binds("Conv")
def bind_conv(ctx: Context) -> Bound | None:
    x, w = ctx.input(0), ctx.input(1)
    if x is None or x.encoding is None or w is None or not w.constant or not w.encodings:
        return None
    weights = w.array
    group, m = int(ctx.node.attr("group", 1)), weights.shape[0]
    made = weighted(ctx, x.encoding, weights.reshape(group, m // group, -1), w.encodings,
                    ctx.input(2), weights.ndim - 2)
    if made is None:
        return None
    kwargs, replace = made
    return Bound({**ctx.node.kwargs, **kwargs, "x_zero_point": zero_point(x.encoding)},
                    replace)


def weighted(ctx: Context, x: Encoding, w: np.ndarray, encs: Sequence[Encoding],
             bias: Operand | None, rank: int) -> tuple[dict[str, Any], dict[int, Any]] | None:
    """The load-time constants of a product by quantized weights w (G, M, K) with symmetric
    encodings: the packed weights, the requantization per output channel (shaped for `rank`
    trailing axes) and the bias (input 2) in accumulator units; None when they do not apply."""
    if any(e.offset != 0 or e.blocked for e in encs) or (
            bias is not None and not bias.encodings):
        return None  # block scales (PER_BLOCK) have no integer product: float fallback
    s_acc = x.scale * _per_channel([e.scale for e in encs], w.shape[0] * w.shape[1])
    zp = zero_point(x)
    packed = pack(w, reach(x), (x.qmin - zp, x.qmax - zp))
    bound, replace = packed.acc_bound, {}
    if bias is not None:
        replace[2] = accumulator_bias(bias, s_acc)
        largest = float(np.abs(replace[2]).max(initial=0))
        bound += largest
        if (packed.dtype == np.float32 and len(packed.bounds) == 1
                and packed.partial_bound + largest < F32_LIMIT):
            replace[2] = replace[2].astype(np.float32)  # added to the product in float32
    requant = Requant.make(s_acc / ctx.out.scale, bound, ctx.out, ctx.output.clamp, proven=True)
    if requant is None:
        return None
    return {"packed": packed, "requant": requant.reshaped(-1, *(1,) * rank)}, replace


def accumulator_bias(b: Operand, s_acc: np.ndarray) -> np.ndarray:
    """A quantized bias in accumulator units (int64): b_q x s_b / s_acc, exactly b_q when its
    scale is the accumulator's, as the quantizer makes it."""
    encs = b.encodings or ()
    s_b = _per_channel([e.scale for e in encs], s_acc.size)
    q = b.array.reshape(-1).astype(np.float64) + _per_channel([e.offset for e in encs],
                                                              s_acc.size)
    return np.rint(q * (s_b / s_acc)).astype(np.int64)


def _per_channel(values: list[float], m: int) -> np.ndarray:
    out = np.asarray(values, np.float64)
    return np.broadcast_to(out, (m,)).copy() if out.size == 1 else out
