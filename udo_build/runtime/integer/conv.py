"""Integer convolution: uint8/uint16 input, int8/int16 weights (per output channel or not),
int32 bias, exact accumulation, fixed-point requantization (an absorbed Relu/Clip clamps).

A 2-d convolution of one group with 8-bit input and int8 weights runs the integer kernel
(c/qconv.c, `_dot_products`) where the CPU has VNNI or AVX2: four products of bytes added into each
32-bit lane at once (vpdpbusd), or two of 16-bit values (AVX2's vpmaddwd), wrapping modulo 2^32, so
exact where every output is below 2^31 in magnitude (checked from the weights' sums of magnitudes,
any input byte and the bias); the zero point's term is folded into each channel's start (bias - zp
x sum of its weights), the padding holding the zero point. It requantizes in its epilogue, and
computes a fused residual Add's table there (`passes.SumForm`), with the same IEEE operations as
the compiled requantization: the same bytes. Its weights are packed once, as int8.

Otherwise, a 2-d convolution of one group whose product is one float32 chunk (`exact.pack`: most of
them at 8 bits) runs the float path's compiled convolution on x - zero point (`_compiled`): every
partial sum below 2^24, its chains of fused multiply-adds form the exact integers, the same bits as
the products below; its weights are packed once, as float32 (four times the int8 weights). One of
several float32 chunks runs it once per range of input channels whose bound stays below 2^24
(`exact.float32_parts`), the parts' exact results summed in float64.

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
from ...kernels.default.conv import ConvWeights, aligned, im2col, pack_for, run_compiled
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
    found = _dot_products(x, x_zero_point, w, b, packed, group, begin, outs, strides_,
                          dilations_, requant)
    if found is not None:
        y, done = found
        return y if done else requant.apply(y, None, owned=True)  # the bias is in it
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
I32_LIMIT = 2 ** 31


class DotWeights:
    """A convolution's int8 weights packed for the compiled integer kernel (c/qconv.c), once
    per `Packed`: the packing, each output channel's sum of weights (the zero point's
    correction) and largest sum of magnitudes (the bound), the 14 geometry numbers per input
    shape, and per zero point the channels' starting values."""

    def __init__(self, lib: Any, w: np.ndarray) -> None:
        m, c, taps = w.shape[0], w.shape[1], math.prod(w.shape[2:])
        self.packing = aligned(int(lib.qconv_packed_size(m, c, taps)), np.int8)
        source = np.ascontiguousarray(w, np.int8)
        lib.qconv_pack(source.ctypes.data, m, c, taps, self.packing.ctypes.data)
        self.isa = lib.qconv_isa
        rows = w.reshape(m, -1).astype(np.int64)
        self.sums = rows.sum(axis=1)
        self.magnitude = int(np.abs(rows).sum(axis=1).max(initial=0))
        self.geometry: dict[tuple, np.ndarray] = {}
        self.epilogues: dict[tuple[int, int], tuple[Any, Any, Epilogue | None]] = {}
        self.starts: dict[int, tuple[Any, np.ndarray | None]] = {}

    def start(self, zu: int, b: np.ndarray | None) -> np.ndarray | None:
        """corr[m] = b[m] - zu * sum_k w[m][k] as int32, b integers in accumulator units; None
        where the kernel's int32 sums might not be the true integers: |acc| <= the largest sum
        of |w| times the input's reach about zu (any byte), plus |b|, reaches 2^31, or b holds
        a value that is no integer. Kept for the last bias seen with this zero point."""
        found = self.starts.get(zu)
        if found is not None and found[0] is b:
            return found[1]
        corr = -zu * self.sums
        bound = self.magnitude * max(zu, 255 - zu)
        if b is not None:
            b64 = b.reshape(-1).astype(np.float64)
            if not np.array_equal(b64, np.rint(b64)):
                bound = I32_LIMIT
            else:
                bound += float(np.abs(b64).max(initial=0))
                corr = corr + b64.astype(np.int64)
        start = corr.astype(np.int32) if bound < I32_LIMIT else None
        self.starts[zu] = (b, start)
        return start


_DOT_WEIGHTS: weakref.WeakKeyDictionary[Packed, DotWeights] = weakref.WeakKeyDictionary()


def _dot_library() -> Any:
    """The compiled library where its integer kernel runs (a build with VNNI or AVX2), else
    None."""
    from ...kernels.compiled import library

    lib = library()
    return lib if lib is not None and lib.qconv_isa else None


def _dot_weights(lib: Any, packed: Packed, w: np.ndarray) -> DotWeights:
    """The integer kernel's weights of this product, made on first use and kept as long as
    `packed` (made again for a library of another build: its packing is the build's)."""
    weights = _DOT_WEIGHTS.get(packed)
    if weights is None or weights.isa != lib.qconv_isa:
        weights = _DOT_WEIGHTS[packed] = DotWeights(lib, w)
    return weights


def _dot_products(x: np.ndarray, zp: int, w: np.ndarray, b: np.ndarray | None, packed: Packed,
                  group: int, begin: list[int], outs: list[int], strides: tuple[int, ...],
                  dilations: tuple[int, ...], requant: Any = None,
                  lib: Any = None) -> tuple[np.ndarray, bool] | None:
    """conv(x - zp, w) + b by the compiled integer kernel (c/qconv.c: four byte products per 32-bit
    lane with VNNI, two 16-bit ones with AVX2), requantized by `requant` in its epilogue where
    it can (`_epilogue`): (the output, True), else (the int32 accumulator, False); None where
    the kernel does not run: a 2-d convolution of one group, 8-bit input, int8 weights, a zero
    point of the input's type, |acc| < 2^31 for every input (`DotWeights.start`: the kernel's
    wrapping int32 sums are then the true integers), and a library built with VNNI or AVX2
    (`lib`, the caller's, runs whatever its lanes: the tests' portable build)."""
    if (group != 1 or w.ndim != 4 or w.dtype != np.int8 or x.ndim != 4
            or x.dtype not in _BYTES or x.shape[1] == 0):
        return None
    if lib is None:
        lib = _dot_library()
        if lib is None:
            return None
    zu = zp + 128 if x.dtype == np.int8 else zp
    if not 0 <= zu <= 255:
        return None
    weights = _dot_weights(lib, packed, w)
    start = weights.start(zu, b)
    if start is None:
        return None
    key = (x.shape[1:], tuple(begin), tuple(outs), strides, dilations)
    numbers = weights.geometry.get(key)
    if numbers is None:
        numbers = weights.geometry[key] = np.array(
            [*x.shape[1:], *w.shape[2:], *strides, *dilations, *begin, *outs, w.shape[0]],
            np.int64)
    if not x.flags.c_contiguous:
        x = np.ascontiguousarray(x)
    shape = (x.shape[0], w.shape[0], *outs)
    fused = _epilogue(weights, requant, shape)
    if fused is None:
        y, (factor, values, ints), other = _scratch("acc", shape, np.int32), _RAW, None
    else:
        (factor, values, ints), other = fused
        y = np.empty(shape, _output_dtype(requant))
    for i in range(x.shape[0]):
        status = lib.qconv(x.ctypes.data + i * x.strides[0], int(x.dtype == np.int8), zu,
                           numbers.ctypes.data, weights.packing.ctypes.data, start.ctypes.data,
                           factor.ctypes.data, values.ctypes.data, ints.ctypes.data,
                           None if other is None else other.ctypes.data + i * other.strides[0],
                           y.ctypes.data + i * y.strides[0])
        if status != 0:
            raise MemoryError("the compiled integer convolution could not allocate its phases")
    return y, fused is not None


Epilogue = tuple[np.ndarray, np.ndarray, np.ndarray]  # udo_qconv's factor, numbers, ints
_RAW: Epilogue = (np.zeros(1), np.zeros(8), np.array([0, 2, 0, 0, 0, 0], np.intc))


def _output_dtype(requant: Any) -> np.dtype:
    """The output type of a Requant, or of a requantization with an Add after it (its
    table's)."""
    return requant.dtype if isinstance(requant, Requant) else np.dtype(requant.table.dtype)


def _epilogue(weights: DotWeights, requant: Any,
              shape: tuple[int, ...]) -> tuple[Epilogue, np.ndarray | None] | None:
    """udo_qconv's epilogue arrays for `requant` (and the Add's other input), or None where
    the kernel's epilogue does not compute it (the int32 accumulator then goes through
    `requant.apply`): a Requant that is not wide, to one byte, one factor or one per output
    channel; or a requantization with an 8-bit Add after it (fuse.LookedUp: `requant`,
    `other`, `q_first`, `sum`) whose table is computed (`sum`, passes.sum_form) and whose other
    input is contiguous bytes of the output's shape. Kept per Requant (and sum form)."""
    plain, form, other = requant, None, None
    if not isinstance(requant, Requant):
        plain, form, other = (getattr(requant, name, None) for name in ("requant", "sum",
                                                                        "other"))
        if (form is None or not isinstance(other, np.ndarray) or other.shape != shape
                or other.itemsize != 1 or not other.flags.c_contiguous):
            return None
    if not isinstance(plain, Requant):
        return None
    key = (id(plain), id(form))
    found = weights.epilogues.get(key)
    if found is None or found[0] is not plain or found[1] is not form:
        made = _epilogue_of(plain, form, bool(getattr(requant, "q_first", True)),
                            shape[1])
        weights.epilogues[key] = found = (plain, form, made)
    made = found[2]
    return None if made is None else (made, other)


def _epilogue_of(r: Requant, form: Any, q_first: bool, m: int) -> Epilogue | None:
    """The arrays of `_epilogue` (None: not one the kernel computes)."""
    factor = np.ascontiguousarray(np.asarray(r.factor, np.float64).reshape(-1))
    if r.wide or r.dtype not in _BYTES or factor.size not in (1, m):
        return None
    numbers = np.zeros(8)
    numbers[:2] = r.lo - r.zero_point, r.hi - r.zero_point
    other_signed = 0
    if form is not None:
        numbers[2:] = form.numbers
        other_signed = int(bool(form.kinds & (2 if q_first else 1)))
    ints = np.array([r.zero_point, 0 if r.dtype == np.uint8 else 1, int(factor.size > 1),
                     other_signed, int(q_first), int(form is not None)], np.intc)
    return factor, numbers, ints


_BYTES = (np.dtype(np.uint8), np.dtype(np.int8))


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


def _scratch(use: str, shape: tuple[int, ...], dtype: type = np.float32) -> np.ndarray:
    """The calling thread's array of this shape and dtype for `use` (an accumulator: float32, or the
    integer kernel's int32), kept from one convolution to the next: the accumulator is
    requantized into a new array (or summed into a float64 one) before the next convolution of
    the thread runs, so fresh pages (page faults, zeroing) are not paid at every product."""
    kept = getattr(_SCRATCH, use, None)
    if kept is None or kept.size < math.prod(shape):
        kept = np.empty(max(math.prod(shape), 1), dtype)
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
    shape (C, H, W), where it will run: a plan built before its session's workers fork is
    packed once, in the parent, and its pages shared. The integer kernel's int8 packing where
    it runs (8-bit input: the span `packed` holds; int8 weights; a build with VNNI or AVX2),
    else the float kernel's float32 one (`_compiled`); either is made on first use otherwise."""
    if int(attrs.get("group", 1)) != 1 or w.ndim != 4:
        return
    if w.dtype == np.int8 and packed.span[1] - packed.span[0] <= 255:
        lib = _dot_library()
        if lib is not None:
            _dot_weights(lib, packed, w)
            return
    if packed.dtype != np.float32:
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
