"""The integer convolution and pair-table Add (runtime/integer/conv.py, eltwise.py) against an
int64 numpy reference: im2col and np.matmul on int64, the bias added in int64, then the explicit
integer requantization (round half to even of acc x M0 / 2^shift, zero point, clamp). No
tolerance: the float BLAS products and the float64 requantization must give the same integers,
on random data and on adversarial cases (extreme codes and weights that need several K chunks,
power-of-two multipliers where every other accumulator is a tie, zero points with padding)."""

from __future__ import annotations

import numpy as np
import pytest

from udo_build.ir.encodings import Encoding
from udo_build.kernels.default.conv import im2col
from udo_build.runtime.integer.conv import conv
from udo_build.runtime.integer.eltwise import add
from udo_build.runtime.integer.exact import F32_LIMIT, biased_product, pack, product
from udo_build.runtime.integer.fixed import Requant, lookup, pair_table, reach, zero_point


def _requantize(acc: np.ndarray, requant: Requant) -> np.ndarray:
    """round_half_even(acc x M0 / 2^shift) + zp, clamped, all in int64 (acc x M0 < 2^62);
    acc (channels, ...) with one multiplier per channel or one for all."""
    m0 = requant.m0.reshape((-1,) + (1,) * (acc.ndim - 1))
    v = acc.astype(np.int64) * m0
    shift = np.broadcast_to(requant.shift.reshape(m0.shape), v.shape)
    floor = v >> shift
    rem = v - (floor << shift)
    half = np.int64(1) << (shift - 1)
    up = (rem > half) | ((rem == half) & (floor % 2 == 1))
    q = floor + up + requant.zero_point
    return np.clip(q, requant.lo, requant.hi)


def _reference(x: np.ndarray, w: np.ndarray, b: np.ndarray, zp: int, requant: Requant | None,
               group: int, pads: list[int], strides: list[int]) -> np.ndarray:
    """The requantized convolution (the accumulator itself for requant None)."""
    centered = x.astype(np.int64) - zp  # padding is the real zero: 0 after centering
    m, kernel = w.shape[0], w.shape[2:]
    outs = [(size + p0 + p1 - k) // s + 1 for size, p0, p1, k, s in
            zip(x.shape[2:], pads[:2], pads[2:], kernel, strides, strict=True)]
    cols = im2col(centered, tuple(kernel), tuple(strides), (1, 1), pads[:2], outs)
    cols = cols.reshape(group, -1, int(np.prod(outs)))
    acc = np.matmul(w.astype(np.int64).reshape(group, m // group, -1), cols)
    acc = acc.reshape(m, -1) + b.astype(np.int64)[:, None]
    return (acc if requant is None else _requantize(acc, requant)).reshape(1, m, *outs)


def _case(rng: np.random.Generator, c: int, m: int, group: int, x_enc: Encoding,
          extreme: bool, real: np.ndarray | None = None) -> tuple:
    k = c // group * 9
    if extreme:  # every |w| at 127 and every code at an end of the range: the largest sums
        w = np.where(rng.random((m, c // group, 3, 3)) < 0.5, -127, 127).astype(np.int8)
        x = np.where(rng.random((1, c, 9, 9)) < 0.5, x_enc.qmin, x_enc.qmax).astype(np.uint8)
    else:
        w = np.clip(np.rint(rng.standard_normal((m, c // group, 3, 3)) * 40), -127,
                    127).astype(np.int8)
        x = rng.integers(0, 256, (1, c, 9, 9)).astype(np.uint8)
    packed = pack(w.reshape(group, m // group, -1), reach(x_enc))
    b = rng.integers(-2 ** 14, 2 ** 14, m).astype(np.int64)
    if real is None:
        real = rng.uniform(0.5, 2.0, m) / (k * 40.0)
    requant = Requant.make(real, packed.acc_bound + 2 ** 14, Encoding(8, 0.05, -17))
    assert requant is not None
    return x, w, b, packed, requant.reshaped(-1, 1, 1)


@pytest.mark.parametrize(("c", "m", "group", "zp", "extreme"), [
    (16, 8, 1, 0, False), (16, 8, 1, 131, False), (32, 32, 32, 7, False),  # depthwise
    (24, 12, 3, 0, False), (256, 4, 1, 0, True), (512, 4, 1, 128, True)])  # several chunks
def test_integer_conv_equals_the_int64_reference(c: int, m: int, group: int, zp: int,
                                                 extreme: bool) -> None:
    rng = np.random.default_rng(c + m + zp)
    x_enc = Encoding(8, 0.1, -zp)
    x, w, b, packed, requant = _case(rng, c, m, group, x_enc, extreme)
    if extreme:
        assert len(packed.bounds) > 1 or packed.dtype == np.float64
    for pads, strides in (([1, 1, 1, 1], [1, 1]), ([0, 2, 1, 0], [2, 1])):
        got = conv(x, w, b, x_zero_point=zp, requant=requant, packed=packed, group=group,
                   pads=pads, strides=strides)
        expected = _reference(x, w, b, zp, requant, group, pads, strides)
        assert got.dtype == np.uint8 and np.array_equal(got, expected)


def test_ties_in_the_convolution_round_to_even() -> None:
    # multipliers of exactly 2^-3: an accumulator = 4 mod 8 is a tie (one in eight)
    rng = np.random.default_rng(3)
    x, w, b, packed, requant = _case(rng, 8, 6, 1, Encoding(8, 0.1, 0), False,
                                     real=np.full(6, 2.0 ** -3))
    got = conv(x, w, b, x_zero_point=0, requant=requant, packed=packed, pads=[1, 1, 1, 1])
    expected = _reference(x, w, b, 0, requant, 1, [1, 1, 1, 1], [1, 1])
    assert np.array_equal(got, expected)
    acc = _reference(x, w, b, 0, None, 1, [1, 1, 1, 1], [1, 1])
    assert (acc % 8 == 4).sum() > 20  # the case really holds ties


def test_the_pair_table_add_equals_the_int64_reference() -> None:
    encs = [Encoding(8, 0.031, -5), Encoding(8, 0.0173, -200)]
    out = Encoding(8, 0.04, -60)
    reals = np.array([e.scale for e in encs]) / out.scale
    requant = Requant.make(reals, 2 * 255 * 2, out, (0.0, None), common=True)
    assert requant is not None
    zps = tuple(zero_point(e) for e in encs)
    table = pair_table(add, np.dtype(np.uint8), np.dtype(np.uint8), zero_points=zps,
                       requant=requant)
    a = np.repeat(np.arange(256, dtype=np.uint8), 256)
    b = np.tile(np.arange(256, dtype=np.uint8), 256)
    v = ((a.astype(np.int64) - zps[0]) * int(requant.m0[0])
         + (b.astype(np.int64) - zps[1]) * int(requant.m0[1]))
    one = Requant(np.array(1), requant.shift[:1], requant.zero_point, requant.lo,
                  requant.hi, requant.dtype, 31)
    assert np.array_equal(lookup(table, a, b), _requantize(v, one))
    assert np.array_equal(add(a, b, zero_points=zps, requant=requant), _requantize(v, one))


def test_a_float32_bias_added_inside_the_product_is_exact_up_to_its_bound() -> None:
    # extreme codes and weights, one float32 chunk, and a bias that fills what is left below
    # 2^24: the pre-filled sgemm (beta 1) must still give the int64 accumulator exactly
    rng = np.random.default_rng(5)
    x_enc = Encoding(8, 0.1, 0)
    c, m = 57, 6
    w = np.where(rng.random((m, c, 3, 3)) < 0.5, -127, 127).astype(np.int8)
    x = np.where(rng.random((1, c, 9, 9)) < 0.5, 0, 255).astype(np.uint8)
    packed = pack(w.reshape(1, m, -1), reach(x_enc))
    assert len(packed.bounds) == 1 and packed.dtype == np.float32
    room = F32_LIMIT - 1 - int(packed.acc_bound)
    assert 0 < room < 2 ** 18
    b = np.where(np.arange(m) % 2 == 0, -room, room).astype(np.float32)
    cols = im2col(x.astype(np.float32), (3, 3), (1, 1), (1, 1), [1, 1], [9, 9])
    got = biased_product(packed, cols.reshape(c * 9, -1), b)
    expected = _reference(x, w, b.astype(np.int64), 0, None, 1, [1, 1, 1, 1], [1, 1])
    assert got is not None and np.array_equal(got.astype(np.int64), expected.reshape(m, -1))
    over = b + np.float32(np.sign(b))  # one more: past the bound, the caller adds it in float64
    assert biased_product(packed, cols.reshape(c * 9, -1), over) is None
    real = rng.uniform(0.5, 2.0, m) / (c * 9 * 40.0)
    requant = Requant.make(real, packed.acc_bound + room + 1, Encoding(8, 0.05, -17))
    assert requant is not None
    for bias in (b, over):
        y = conv(x, w, bias, x_zero_point=0, requant=requant.reshaped(-1, 1, 1), packed=packed,
                 pads=[1, 1, 1, 1])
        ref = _reference(x, w, bias.astype(np.int64), 0, requant.reshaped(-1, 1, 1), 1,
                         [1, 1, 1, 1], [1, 1])
        assert np.array_equal(y, ref)


def test_the_signed_bound_takes_fewer_chunks_and_stays_exact_at_its_edge() -> None:
    # inputs after a Relu (x - zp in [0, 255]) against weights of both signs: a sum over any
    # subset of K lies in [-255 N, 255 P], so max(P, N) decides the chunks, not P + N
    k = 900
    signs = np.where(np.arange(k) % 2 == 0, 1, -1)
    w = np.stack([127 * signs, -127 * signs, np.roll(127 * signs, 1)]).astype(np.int8)
    symmetric, relu = pack(w[None], 255), pack(w[None], 255, (0, 255))
    positive = 127 * (k // 2)
    assert relu.acc_bound == symmetric.acc_bound == 255 * 127 * k  # the requantization's
    assert relu.partial_bound == 255 * positive < F32_LIMIT < symmetric.partial_bound
    assert len(relu.bounds) == 1 and relu.dtype == np.float32 and len(symmetric.bounds) == 2
    # columns that reach the bound: 255 where a row's weight is positive, 0 elsewhere, and
    # random ones; float32 results must be the int64 ones
    x = np.concatenate([np.where(w.T > 0, 255, 0),
                        np.random.default_rng(7).integers(0, 256, (k, 61))], axis=1)
    expected = w.astype(np.int64) @ x
    assert np.abs(expected).max() == relu.partial_bound
    for packed in (relu, symmetric):
        got = product(packed, x.astype(packed.dtype))
        assert np.array_equal(got.astype(np.int64), expected)
