"""Fixed-point requantization, the last step of every integer kernel, and the quantized types.

An integer kernel computes an exact integer accumulator `acc` per output element (a convolution's
int32 sum of products plus its bias, a pool's window sum, ...) and maps it to the output's
encoding with an integer multiplier M0 and a right shift:

    q = clamp(zero_point + round_half_to_even(acc * M0 / 2^shift), lo, hi)

M0 / 2^shift is the real multiplier (a convolution's channel c: s_x * s_w[c] / s_y) rounded to
M0's width: M0 is the widest integer of at most 31 bits for which |acc| * M0 < 2^53 for every
accumulator the op can produce (the bound is known at load: K x max|x - zp| x the weights'
largest sum of |w|, plus the bias), and at least 16 bits. Then float64 holds acc * M0 exactly,
the power-of-two shift is exact, and np.rint rounds the exact value, halves to even: the same
rounding as ONNX's QuantizeLinear, onnxruntime's requantization and `Encoding.quantize`. (8-bit
convolutions of ResNet-50 get 26 to 31 bits; additions and pools 31.) `lo`/`hi` are the
encoding's [qmin, qmax], narrowed by an absorbed Relu (to the zero point) or Clip (to its
quantized bounds).

The passes (numpy's, over every output: this is most of what the integer path adds to the
float path's GEMMs): the accumulator to float64 (a plain cast, then an in-place product by the
multiplier: a mixed-type product is 2-3x slower), the clamp, then the rounding straight into
the output type. Clamping before rounding gives the same integers: for integer L <= H,
rint(clip(t, L, H)) = clip(rint(t), L, H), since rint is monotone and keeps integers. When the
caller proves a bound on the accumulator (`Requant.make(..., proven=True)`: a convolution's, from
its weights and its input's range) and bound x M0 / 2^shift < NARROW_LIMIT, the rounding goes
into int16 (exact: every rounded value fits) and the clamp runs on those two-byte integers.
A large accumulator goes by blocks of BLOCK elements through one float64 buffer, so that its
temporaries stay in the cache (each element is computed alone: the same integers). Where the
host has a C compiler, all of that is one compiled pass instead (`passes.requantized`, the
arithmetic in udo_build/kernels/c/passes.c: the same exact operations and the same rounding,
so the same integers); the numpy passes are the fallback and the reference.

Wide accumulators: when that bound leaves M0 fewer than FLOAT_BITS bits (products of two 16-bit
activations, a normalization's fixed-point values times its scale), the requantization is
`wide`: M0 has the full 31 bits and acc x M0 / 2^shift is rounded in int64 without forming the
product (`intmath.mul_shift_round`), exact for |acc| < 2^62.

Elementwise maps of 8-bit inputs are tables computed at load by this same arithmetic (`Rescale`:
256 entries for requantizing one tensor into another encoding; `pair_table`: 65536 for Add, Sum
or Mul of two tensors), so their results are identical and a run costs one lookup per element.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from ...ir.encodings import Encoding
from . import passes
from .intmath import mul_shift_round

MAX_BITS = 31
MIN_BITS = 16
FLOAT_BITS = 24  # below this width of M0, the requantization is wide (exact int64)
WIDE_LIMIT = 2 ** 62  # the largest |acc| (and |acc| x multiplier) a wide requantization takes
NARROW_LIMIT = 2 ** 15 - 1  # a bound on |acc x M0 / 2^shift| below this: rounded into int16
BLOCK = 1 << 16  # elements requantized at a time (float64 temporaries of 512 KiB)


def qtype(enc: Encoding) -> np.dtype:
    """The numpy type of a quantized tensor of this encoding."""
    if enc.bitwidth <= 8:
        return np.dtype(np.int8 if enc.signed else np.uint8)
    if enc.bitwidth <= 16:
        return np.dtype(np.int16 if enc.signed else np.uint16)
    return np.dtype(np.int32 if enc.signed else np.uint32)


def zero_point(enc: Encoding) -> int:
    return -int(enc.offset)


ROWS_CHUNK = 1 << 18  # elements computed at a time (see by_rows)


def reach(enc: Encoding) -> int:
    """The largest |q - zero point| of the encoding."""
    zp = zero_point(enc)
    return max(zp - enc.qmin, enc.qmax - zp)


def centered(x: np.ndarray, zp: int, dtype: np.dtype | type) -> np.ndarray:
    """x - zp as a new array of the float type BLAS or the requantization takes (a cast and a
    subtraction in place: twice as fast as one mixed-type ufunc)."""
    out = np.asarray(x).astype(dtype)
    if zp:
        out -= zp
    return out


def quantize(x: np.ndarray, enc: Encoding) -> np.ndarray:
    """Float values as quantized integers: round half to even, clamp (QuantizeLinear).

    Values no encoding holds: an infinity saturates (-inf to qmin, +inf to qmax: an attention
    mask's -inf becomes the encoding's minimum), and NaN becomes the zero point (real 0), the
    same on every machine (a float NaN cast to an integer type is undefined in C and numpy)."""
    return _codes(x, np.float64(enc.scale), np.float64(enc.offset), enc)


def quantize_along(x: np.ndarray, encs: tuple[Encoding, ...] | list[Encoding],
                   axis: int) -> np.ndarray:
    """A constant quantized with one encoding, or one per index of `axis` (as `quantize`);
    block encodings by block (their own axes, `BlockGrid`: `axis` is not read)."""
    if encs[0].blocked:  # each block's scale: the channel's x the block's (float64, exact)
        scales = np.array([[e.scale] for e in encs], np.float64) * np.asarray(
            [e.block_scales for e in encs], np.float64)
        return _codes(x, BlockGrid.of(scales, encs, np.shape(x)), np.float64(0.0), encs[0])
    if len(encs) == 1:
        return quantize(x, encs[0])
    shape = [1] * x.ndim
    shape[axis] = len(encs)
    scale = np.array([e.scale for e in encs], np.float64).reshape(shape)
    offset = np.array([e.offset for e in encs], np.float64).reshape(shape)
    return _codes(x, scale, offset, encs[0])


def _codes(x: np.ndarray, scale: np.ndarray, offset: np.ndarray, enc: Encoding) -> np.ndarray:
    """clamp(rint(x / scale) - offset) in the encoding's type; NaN: the zero point (-offset)."""
    return by_rows(_codes_of, qtype(enc), x, scale, offset, enc=enc)


def _codes_of(x: np.ndarray, scale: np.ndarray, offset: np.ndarray, enc: Encoding
              ) -> np.ndarray:
    """rint(x / scale) - offset in float64, in one buffer (x / scale makes it; each later
    pass runs in place), NaN replaced, clamped, cast."""
    with np.errstate(invalid="ignore", over="ignore"):  # inf / scale is inf: clamped below
        q = np.asarray(np.divide(x, scale, dtype=np.float64))  # a 0-d array for a scalar
        np.rint(q, out=q)
        np.subtract(q, offset, out=q)
    nan = np.isnan(q)  # NaN exactly where x is NaN (scale is finite and positive)
    if nan.any():
        np.copyto(q, np.broadcast_to(-np.asarray(offset, np.float64), q.shape), where=nan)
    np.clip(q, enc.qmin, enc.qmax, out=q)
    return q.astype(qtype(enc))


def by_rows(compute: Callable[..., np.ndarray], dtype: Any, x: np.ndarray,
            *values: np.ndarray, **options: Any) -> np.ndarray:
    """compute(x, *values, **options), elementwise over x with `values` broadcast against it,
    as a new array of `dtype`. A large x goes by slices of its first axis, ROWS_CHUNK elements
    or so each (with the slices of `values` shaped like x), so its float64 temporaries stay
    small: a weight of 60 MB would take several of 120 MB at once. Every element is computed
    alone, so the slices give the same bits."""
    x = np.asarray(x)
    if x.ndim == 0 or x.size <= ROWS_CHUNK or x.shape[0] == 1:
        return compute(x, *(v.rows(slice(None)) if isinstance(v, BlockGrid) else v
                            for v in values), **options)
    out = np.empty(x.shape, dtype)
    rows = max(1, ROWS_CHUNK // (x.size // x.shape[0]))
    for r0 in range(0, x.shape[0], rows):
        part = slice(r0, r0 + rows)
        out[part] = compute(x[part], *(_rows(v, part, x.ndim) for v in values), **options)
    return out


def _rows(values: Any, part: slice, ndim: int) -> np.ndarray:
    """The rows `part` of per-element values broadcast against an array of `ndim` axes."""
    if isinstance(values, BlockGrid):
        return values.rows(part)
    values = np.asarray(values)
    return values[part] if values.ndim == ndim and values.shape[0] > 1 else values


def dequantize_along(q: np.ndarray, encs: tuple[Encoding, ...] | list[Encoding],
                     axis: int) -> np.ndarray:
    """Quantized constants as float32 values (one encoding, one per index of `axis`, or block
    encodings), by rows (by_rows)."""
    if encs[0].blocked:  # scale x (block scale x q): LPBQ's integers q x block scale, exact
        shape = np.shape(q)
        scale = BlockGrid.of([[e.scale] for e in encs], encs, shape)
        mult = BlockGrid.of([e.block_scales for e in encs], encs, shape)
        return by_rows(_blocks_real, np.float32, q, scale, mult)
    if len(encs) == 1:
        return by_rows(encs[0].dequantize, np.float32, q)
    shape = [1] * q.ndim
    shape[axis] = len(encs)
    scale = np.array([e.scale for e in encs], np.float64).reshape(shape)
    offset = np.array([e.offset for e in encs], np.float64).reshape(shape)
    return by_rows(_real, np.float32, q, scale, offset)


def _blocks_real(q: np.ndarray, scale: np.ndarray, mult: np.ndarray) -> np.ndarray:
    return (scale * (mult * q.astype(np.float64))).astype(np.float32)


def _real(q: np.ndarray, scale: np.ndarray, offset: np.ndarray) -> np.ndarray:
    return (scale * (q.astype(np.float64) + offset)).astype(np.float32)


@dataclass(frozen=True)
class BlockGrid:
    """Values per (channel, block) (one per channel: [[v], ...]) broadcast against a weight of
    `shape` quantized with block encodings: blocks of block_size along its input axis (the first
    of a blocks_first 2-D weight, else the second), channels along the other. Made a slice of
    the weight's first axis at a time (by_rows): the whole grid, float64 per element, would be
    twice a float32 weight."""

    values: np.ndarray  # (channels, blocks or 1)
    block_size: int
    blocks_first: bool
    ndim: int

    @classmethod
    def of(cls, values: Any, encs: tuple[Encoding, ...] | list[Encoding],
           shape: tuple[int, ...]) -> BlockGrid:
        grid = np.asarray(values)
        grid = grid if grid.dtype.kind in "iu" else grid.astype(np.float64)
        return cls(grid, encs[0].block_size, encs[0].blocks_first, len(shape))

    def rows(self, part: slice) -> np.ndarray:
        """The grid's rows `part` (of the weight's first axis), broadcastable against them."""
        grid, blocks = self.values, self.values.shape[1] > 1
        if self.blocks_first:  # (input, channels): rows are inputs, a block every block_size
            if not blocks:
                return grid.T
            start, stop, _ = part.indices(grid.shape[1] * self.block_size)
            return grid[:, np.arange(start, stop) // self.block_size].T
        grid = grid[part] if grid.shape[0] > 1 else grid  # one row: every channel's
        if blocks:
            grid = np.repeat(grid, self.block_size, axis=1)  # (channels, input length)
        return grid.reshape(grid.shape + (1,) * (self.ndim - 2))


def lpbq_integers(q: np.ndarray, encs: tuple[Encoding, ...] | list[Encoding]
                  ) -> tuple[np.ndarray, tuple[Encoding, ...]]:
    """LPBQ weights as the integers q x block scale (of the decompressed width) and one plain
    symmetric encoding per channel: what an integer product takes."""
    width = encs[0].lpbq_bitwidth
    plain = tuple(Encoding(width, e.scale, 0, signed=True) for e in encs)
    mult = BlockGrid.of(np.asarray([e.block_scales for e in encs], np.int64), encs, q.shape)
    return by_rows(_times, qtype(plain[0]), q, mult, into=qtype(plain[0])), plain


def _times(q: np.ndarray, mult: np.ndarray, into: Any) -> np.ndarray:
    return (q.astype(np.int64) * mult).astype(into)


def multiplier_bits(acc_bound: float) -> int | None:
    """The width of M0 that keeps |acc| x M0 exact in float64 (None: below MIN_BITS)."""
    bits = min(MAX_BITS, 52 - math.ceil(math.log2(float(acc_bound) + 1.0)))
    return bits if bits >= MIN_BITS else None


def fixed_point(real: np.ndarray | float, bits: int,
                common: bool = False) -> tuple[np.ndarray, np.ndarray]:
    """(M0, shift) with M0 / 2^shift the nearest value of `bits` significant bits to `real`
    (each element its own shift; with `common`, the shift of the largest for all)."""
    real = np.asarray(real, np.float64)
    if np.any(real < 0) or not np.all(np.isfinite(real)):
        raise ValueError("requantization multipliers must be finite and non-negative")
    _, exponent = np.frexp(np.max(real) if common else real)  # real = mantissa x 2^exponent
    shift = np.broadcast_to(np.asarray(bits - exponent, np.int64), real.shape).copy()
    m0 = np.rint(np.ldexp(real, shift)).astype(np.int64)
    carry = m0 >= 2 ** bits  # rounding reached 2^bits: one bit less of shift
    if np.any(carry):
        m0 = np.where(carry, (m0 + 1) // 2, m0)
        shift = np.where(carry, shift - 1, shift)
    return m0, shift


@dataclass(frozen=True, eq=False)
class Requant:
    """The map from exact accumulators to an output encoding (see the module docstring).
    `m0` and `shift` are shaped to broadcast against the accumulator (one per channel, or one)."""

    m0: np.ndarray
    shift: np.ndarray
    zero_point: int
    lo: int
    hi: int
    dtype: np.dtype
    bits: int
    wide: bool = False  # int64 arithmetic (see the module docstring)
    bound: float = math.inf  # a proven bound on |acc + offset| of every `apply` (inf: none)

    @staticmethod
    def make(real: np.ndarray | float, acc_bound: float, out: Encoding,
             clamp: tuple[float | None, float | None] = (None, None),
             common: bool = False, proven: bool = False) -> Requant | None:
        """The requantization of accumulators bounded by `acc_bound` (None: too wide even
        for int64, or a wide one with a common shift, which only float sums take). `proven`:
        every accumulator `apply` will take (plus its offset) is within acc_bound, which then
        lets a small enough result round into int16 (`narrow`)."""
        bits = multiplier_bits(acc_bound)
        wide = bits is None or bits < FLOAT_BITS
        if wide:
            largest = float(np.max(real)) * acc_bound
            if common or acc_bound >= WIDE_LIMIT or largest >= WIDE_LIMIT // 2:
                return None
            bits = MAX_BITS
        assert bits is not None
        m0, shift = fixed_point(real, bits, common)
        lo, hi = clamp_bounds(out, clamp)
        return Requant(m0, shift, zero_point(out), lo, hi, qtype(out), bits, wide,
                       float(acc_bound) if proven else math.inf)

    @cached_property
    def factor(self) -> np.ndarray:
        """M0 / 2^shift as float64 (exact)."""
        return np.ldexp(self.m0.astype(np.float64), -self.shift)

    @cached_property
    def narrow(self) -> bool:
        """Whether every result before rounding is below NARROW_LIMIT in magnitude, the
        clamped range fits int16 and the output is 8-bit: `apply` then rounds into int16.
        |acc + offset| <= bound (the caller's proof) and factor <= max(factor) give
        |t| <= bound x max(factor) < NARROW_LIMIT = 2^15 - 1, so |rint(t)| <= 2^15 - 1."""
        lo, hi = self.lo - self.zero_point, self.hi - self.zero_point
        return (not self.wide and self.dtype.itemsize == 1 and -2 ** 15 <= lo <= hi < 2 ** 15
                and self.bound * float(np.max(self.factor, initial=0.0)) < NARROW_LIMIT)

    def reshaped(self, *shape: int) -> Requant:
        """The multipliers reshaped to broadcast against the accumulator."""
        return Requant(self.m0.reshape(shape), self.shift.reshape(shape), self.zero_point,
                       self.lo, self.hi, self.dtype, self.bits, self.wide, self.bound)

    def with_real(self, real: np.ndarray | float) -> Requant:
        """The same output, another multiplier (of the same width; no bound kept)."""
        m0, shift = fixed_point(real, self.bits)
        return Requant(m0, shift, self.zero_point, self.lo, self.hi, self.dtype, self.bits,
                       self.wide)

    def apply(self, acc: np.ndarray, offset: np.ndarray | float | None = None, *,
              owned: bool = False) -> np.ndarray:
        """requantize(acc + offset): acc holds exact integers (any numeric type; `owned`: a
        float64 buffer of the caller's that may be overwritten), offset broadcasts against it
        (a bias per channel, or -zero_point for a plain rescale). A wide requantization runs
        in int64 (`_apply_wide`), any other in float64: one product forms the exact value,
        in one compiled pass where the layout allows (`passes.requantized`), else BLOCK
        elements at a time where the accumulator allows (`_by_blocks`)."""
        if self.wide:
            return self._apply_wide(acc, offset)
        acc = np.asarray(acc)
        fast = passes.requantized(acc, self.factor, offset, (self.lo, self.hi), self.zero_point,
                                  self.dtype)
        if fast is not None:  # compiled: the same integers (see `passes`)
            return fast
        if offset is not None:
            into = owned and acc.dtype == np.float64 and np.broadcast_shapes(
                acc.shape, np.shape(offset)) == acc.shape
            acc = np.add(acc, offset, dtype=np.float64,  # integers below 2^53: exact
                         out=acc if into else None)
            owned = True
        factor = self.factor
        shape = np.broadcast_shapes(acc.shape, factor.shape)
        axis = _block_axis(acc.shape, factor.shape) if acc.shape == shape else None
        if axis is not None and acc.size > BLOCK:
            return self._by_blocks(acc, factor.reshape((1,) * (acc.ndim - factor.ndim)
                                                       + factor.shape), axis)
        if owned and acc.dtype == np.float64 and acc.shape == shape:
            t = acc
        else:  # a cast, then the product in place: faster than one mixed-type product
            t = np.empty(shape)
            np.copyto(t, acc)
        np.multiply(t, factor, out=t)  # |acc + offset| x M0 < 2^53, times 2^-shift: exact
        return self._rounded(t, np.empty(shape, self.dtype))

    def _by_blocks(self, acc: np.ndarray, factor: np.ndarray, axis: int) -> np.ndarray:
        """`apply` by slices of `axis` (every axis before it of size 1) of about BLOCK
        elements, through one float64 buffer that stays in the cache: each element is
        computed alone, so the same integers as one pass."""
        rows, lead = acc.shape[axis], (0,) * axis
        step = max(1, BLOCK // max(1, acc.size // rows))
        out = np.empty(acc.shape, self.dtype)
        buffer = np.empty((min(step, rows), *acc.shape[axis + 1:]))
        for r0 in range(0, rows, step):
            part = (*lead, slice(r0, r0 + step))
            t = buffer[:min(step, rows - r0)]
            np.copyto(t, acc[part])
            np.multiply(t, factor[part] if factor.shape[axis] > 1 else factor[lead], out=t)
            self._rounded(t, out[part])
        return out

    def _rounded(self, t: np.ndarray, out: np.ndarray) -> np.ndarray:
        return self._round_narrow(t, out) if self.narrow else self.round(t, out)

    def _apply_wide(self, acc: np.ndarray, offset: np.ndarray | float | None) -> np.ndarray:
        t = np.asarray(acc).astype(np.int64)
        if offset is not None:
            t = t + np.asarray(offset).astype(np.int64)
        q = mul_shift_round(t, self.m0, self.shift)
        np.clip(q, self.lo - self.zero_point, self.hi - self.zero_point, out=q)
        if self.zero_point:
            q += self.zero_point
        return q.astype(self.dtype)

    def round(self, t: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """t (float64, exact; overwritten) rounded half to even, shifted by the zero point,
        clamped, in the output type (into `out` when given): clamped first (the same
        integers, see the module docstring), then rounded into the output (or rounded, then
        shifted into it)."""
        zp = self.zero_point
        t.clip(float(self.lo - zp), float(self.hi - zp), out=t)  # typed bounds: no range check
        out = np.empty(t.shape, self.dtype) if out is None else out
        if zp:
            np.rint(t, out=t)
            np.add(t, zp, out=out, casting="unsafe")  # integers in [lo, hi]: exact
        else:
            np.rint(t, out=out, casting="unsafe")  # integers in [lo, hi]: exact
        return out

    def _round_narrow(self, t: np.ndarray, out: np.ndarray) -> np.ndarray:
        """`round` for |t| < NARROW_LIMIT (`narrow`): rounded into int16 (exact), clamped
        there, then shifted by the zero point into `out`."""
        zp = self.zero_point
        q = np.empty(t.shape, np.int16)
        np.rint(t, out=q, casting="unsafe")
        q.clip(np.int16(self.lo - zp), np.int16(self.hi - zp), out=q)  # typed: no range check
        if zp:
            np.add(q, zp, out=out, casting="unsafe")  # in [lo, hi]: exact
        else:
            np.copyto(out, q, casting="unsafe")
        return out


def _block_axis(shape: tuple[int, ...], factor: tuple[int, ...]) -> int | None:
    """The axis `Requant.apply` goes along by blocks: the last one the multipliers vary along
    (the first for one multiplier), when every axis before it has size 1; else None."""
    if len(factor) > len(shape):
        return None
    aligned = (1,) * (len(shape) - len(factor)) + factor
    varying = [i for i, n in enumerate(aligned) if n != 1]
    axis = varying[-1] if varying else 0
    if not shape or any(n != 1 for n in shape[:axis]):
        return None
    return axis


def clamp_bounds(out: Encoding, clamp: tuple[float | None, float | None]) -> tuple[int, int]:
    """[qmin, qmax] of the encoding, narrowed to the quantized clamp of an activation."""
    lo, hi = out.qmin, out.qmax
    if clamp[0] is not None:
        lo = max(lo, int(out.quantize(np.array([clamp[0]]))[0]))
    if clamp[1] is not None:
        hi = min(hi, int(out.quantize(np.array([clamp[1]]))[0]))
    return lo, max(lo, hi)


def same(a: Encoding, b: Encoding) -> bool:
    return (a.scale, a.offset, a.bitwidth, a.signed) == (b.scale, b.offset, b.bitwidth, b.signed)


@dataclass(frozen=True, eq=False)
class Rescale:
    """The requantization of one encoding's values into another's: q_y = requant(q_x - z_x),
    as a table of all 256 results for 8-bit inputs (one lookup per element)."""

    requant: Requant
    zero_point: int  # the input's
    table: np.ndarray | None = None  # by raw byte, for 8-bit inputs

    def __call__(self, x: np.ndarray) -> np.ndarray:
        if self.table is not None and x.dtype.itemsize == 1:
            return lookup(self.table, x)
        return self.requant.apply(x, -self.zero_point)


def rescale(x_enc: Encoding, out: Encoding,
            clamp: tuple[float | None, float | None] = (None, None)) -> Rescale | None:
    """The Rescale of x_enc's values into out (None: the same encoding and no clamp, the bytes
    move as they are)."""
    if same(x_enc, out) and clamp == (None, None):
        return None
    requant = Requant.make(x_enc.scale / out.scale, 2 * max(-x_enc.qmin, x_enc.qmax), out,
                           clamp)
    if requant is None:  # pragma: no cover (single values never need more than 31 bits)
        return None
    zp = zero_point(x_enc)
    dtype = qtype(x_enc)
    if dtype.itemsize != 1:
        return Rescale(requant, zp)
    values = np.arange(256, dtype=np.uint8).view(dtype)  # every byte, as the input's type
    return Rescale(requant, zp, requant.apply(values, -zp))


def lookup(table: np.ndarray, *xs: np.ndarray) -> np.ndarray:
    """table[x] (one 8-bit input) or table[x0 * 256 + x1] (two, broadcast), by raw byte
    (two of one shape: one compiled pass, `passes.pair_lookup`, where it runs)."""
    if len(xs) == 1:
        return np.take(table, xs[0].view(np.uint8))
    fast = passes.pair_lookup(table, xs[0], xs[1])
    if fast is not None:  # compiled, for two contiguous inputs of one shape
        return fast
    shape = np.broadcast_shapes(xs[0].shape, xs[1].shape)
    index = np.left_shift(np.broadcast_to(xs[0], shape).view(np.uint8), 8,
                          dtype=np.uint16)  # widened and shifted in one pass
    index |= xs[1].view(np.uint8)
    return np.take(table, index)


def pair_table(kernel: Callable[..., np.ndarray], a: np.dtype, b: np.dtype,
               **kwargs: object) -> np.ndarray:
    """A binary 8-bit kernel's result for every pair of raw bytes (index a * 256 + b)."""
    bytes_ = np.arange(256, dtype=np.uint8)
    first = np.repeat(bytes_, 256).view(a)
    second = np.tile(bytes_, 256).view(b)
    return kernel(first, second, **kwargs)
