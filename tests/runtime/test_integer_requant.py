"""The integer path's requantization (runtime/integer/fixed.py) against an explicit integer
reference: round_half_even(acc x M0 / 2^shift) + zero point, clamped, in Python's unbounded
integers (or int64 where the product fits), on ties, near ties, extremes and negative values."""

from __future__ import annotations

import numpy as np
import pytest

from udo_build.ir.encodings import Encoding
from udo_build.runtime.integer.fixed import Requant, fixed_point


def _rhe(num: int, den: int) -> int:
    q, r = divmod(num, den)
    return q + (1 if 2 * r > den or (2 * r == den and q % 2) else 0)


def _reference(acc: np.ndarray, m0: np.ndarray, shift: np.ndarray, zp: int, lo: int,
               hi: int) -> list[int]:
    """The exact result per element, m0/shift broadcast against acc (Python integers)."""
    a, m, s = np.broadcast_arrays(np.asarray(acc, object), np.asarray(m0, object),
                                  np.asarray(shift, object))
    return [min(max(_rhe(int(x) * int(y), 2 ** int(z)) + zp, lo), hi)
            for x, y, z in zip(a.ravel(), m.ravel(), s.ravel(), strict=True)]


def _signed(residue: int, bits: int) -> int:
    """The residue modulo 2^bits as a value in [-2^(bits-1), 2^(bits-1)) (same residue)."""
    return residue - 2 ** bits if residue >= 2 ** (bits - 1) else residue


def _requant(m0: np.ndarray, shift: np.ndarray, zp: int, lo: int, hi: int, dtype: type,
             wide: bool = False) -> Requant:
    return Requant(np.asarray(m0, np.int64), np.asarray(shift, np.int64), zp, lo, hi,
                   np.dtype(dtype), 31, wide)


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_ties_round_to_even_for_every_accumulator_type(dtype: type) -> None:
    # M0 / 2^shift = 1/2, 1/4 and 3/8 (per channel): every odd accumulator is a tie for the first
    m0, shift = np.array([2 ** 30, 2 ** 30, 3 * 2 ** 28]).reshape(3, 1), np.array([31, 32, 31])
    acc = np.arange(-600, 601).astype(dtype)[None, :].repeat(3, axis=0)
    for zp, lo, hi in ((0, 0, 255), (128, 0, 255), (3, 10, 200), (-7, -128, 127)):
        out_type = np.int8 if lo < 0 else np.uint8
        requant = _requant(m0, shift.reshape(3, 1), zp, lo, hi, out_type)
        got = requant.apply(acc.copy(), owned=True)
        assert got.dtype == out_type
        assert got.ravel().tolist() == _reference(acc.astype(np.int64), m0,
                                                  shift.reshape(3, 1), zp, lo, hi)


def test_float64_requantization_is_exact_up_to_its_bound() -> None:
    # widths as Requant.make picks them: |acc| x M0 < 2^53; accumulators at the bound, near it,
    # random, negative; per-channel multipliers of 26 to 31 bits; a bias offset
    rng = np.random.default_rng(5)
    for bound_bits in (21, 24, 27):
        bound = 2.0 ** bound_bits - 1
        real = rng.uniform(2.0 ** -12, 2.0 ** -4, 16) * 2.0 ** (20 - bound_bits)
        requant = Requant.make(real, bound, Encoding(8, 1.0, -100))
        assert requant is not None and not requant.wide
        requant = requant.reshaped(-1, 1)
        limit = int(bound) // 2
        acc = rng.integers(-limit, limit + 1, (16, 300))
        acc[:, :4] = [limit, -limit, 0, -1]
        bias = rng.integers(-limit, limit + 1, (16, 1))
        got = requant.apply(acc.astype(np.float64), bias, owned=True)
        assert got.dtype == np.uint8
        assert got.ravel().tolist() == _reference(acc + bias, requant.m0, requant.shift, 100,
                                                  0, 255)


def test_near_ties_one_unit_off_round_away_from_the_tie() -> None:
    # acc x M0 = (2k + 1) x 2^(shift - 1) + d for d in -2..2: exactly at, and one or two units
    # of the product either side of, a tie (float32 products would round them together)
    m0, shift = 2 ** 26 + 1, 27
    inverse = pow(m0, -1, 2 ** shift)
    acc = [_signed((((2 * k + 1) * 2 ** (shift - 1) + d) * inverse) % 2 ** shift, shift)
           for k in range(40) for d in (-2, -1, 0, 1, 2)]
    acc_array = np.array(acc, np.int64)  # |acc| < 2^26: acc x M0 < 2^53
    requant = _requant(np.array(m0), np.array(shift), 0, -2 ** 31, 2 ** 31 - 1, np.int32)
    assert requant.apply(acc_array).tolist() == _reference(acc_array, np.array(m0),
                                                           np.array(shift), 0, -2 ** 31,
                                                           2 ** 31 - 1)


def test_a_wide_requantization_is_exact_where_float64_would_round_the_product() -> None:
    # acc = 2^20 x u (exact in float64) times an odd 29-bit M0: u x M0 has 59 bits, one unit
    # off a tie, which a float64 product rounds onto the tie itself
    m0, shift = 2 ** 28 + 2 * 12345 + 1, 50
    inverse = pow(m0, -1, 2 ** 30)
    u = [(((2 * k + 1) * 2 ** 29 + d) * inverse) % 2 ** 30 for k in range(8) for d in (-1, 1)]
    acc = np.array(u, np.int64) << 20
    requant = _requant(np.array(m0), np.array(shift), 5, -2 ** 31, 2 ** 31 - 1, np.int32,
                       wide=True)
    expected = _reference(acc, np.array(m0), np.array(shift), 5, -2 ** 31, 2 ** 31 - 1)
    assert requant.apply(acc).tolist() == expected
    assert requant.apply(acc, np.zeros(acc.shape, np.int64)).tolist() == expected


def test_fixed_point_multipliers_keep_their_width() -> None:
    m0, shift = fixed_point(np.array([0.75, 1e-3, 2.0 ** -20]), 26)
    assert all(2 ** 25 <= m < 2 ** 26 for m in m0.tolist())
    assert np.allclose(np.ldexp(m0.astype(np.float64), -shift), [0.75, 1e-3, 2.0 ** -20],
                       rtol=2.0 ** -25)
