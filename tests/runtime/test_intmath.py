"""The integer path's exact int64 arithmetic (runtime/integer/intmath.py) and the wide
requantization built on it, against Python's unbounded integers."""

from __future__ import annotations

import math

import numpy as np
import pytest

from udo_build.ir.encodings import Encoding
from udo_build.runtime.integer.fixed import Requant
from udo_build.runtime.integer.intmath import (
    bit_length,
    divide_round,
    isqrt,
    mul_shift_round,
    shift_round,
)


def _rhe(num: int, den: int) -> int:
    q, r = divmod(num, den)
    return q + (1 if 2 * r > den or (2 * r == den and q % 2) else 0)


def test_mul_shift_round_is_exact_over_the_whole_range() -> None:
    rng = np.random.default_rng(1)
    acc = rng.integers(-2 ** 61, 2 ** 61, 4000)
    acc[:6] = [0, -1, 1, 3, -3, 2 ** 61 - 1]
    m0 = rng.integers(2 ** 30, 2 ** 31, 4000)
    shift = rng.integers(0, 63, 4000)
    expected = [_rhe(int(a) * int(m), 2 ** int(s)) for a, m, s in zip(acc, m0, shift, strict=True)]
    keep = np.abs(np.array(expected, dtype=object)) < 2 ** 61
    got = mul_shift_round(acc, m0, shift)
    assert keep.sum() > 1000
    assert got[keep].tolist() == [e for e, k in zip(expected, keep, strict=True) if k]


def test_a_large_accumulator_taken_in_slices_gives_the_same_values(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """mul_shift_round takes a large accumulator a slice of rows at a time, its multipliers
    per tensor, per channel along the last axis or along the first: the values of one pass."""
    from udo_build.runtime.integer import intmath

    rng = np.random.default_rng(2)
    acc = rng.integers(-2 ** 40, 2 ** 40, (12, 5, 7))
    cases = [(rng.integers(2 ** 30, 2 ** 31, ()), rng.integers(0, 63, ())),
             (rng.integers(2 ** 30, 2 ** 31, 7), rng.integers(0, 63, 7)),
             (rng.integers(2 ** 30, 2 ** 31, (12, 1, 1)), rng.integers(0, 63, (12, 1, 1))),
             (rng.integers(2 ** 30, 2 ** 31, (1, 5, 1)), rng.integers(20, 40, (12, 5, 1)))]
    whole = [mul_shift_round(acc, m0, shift) for m0, shift in cases]
    for (m0, shift), want in zip(cases, whole, strict=True):
        for size in (35, 80):  # slices of one row, then of two
            monkeypatch.setattr(intmath, "SLICE", size)
            got = mul_shift_round(acc, m0, shift)
            assert got.shape == want.shape and np.array_equal(got, want)


def test_ties_round_to_even() -> None:
    values = np.array([-5, -3, -1, 1, 3, 5, 7])
    assert mul_shift_round(values, np.array(1), np.array(1)).tolist() == [-2, -2, 0, 0, 2, 2, 4]
    assert shift_round(values, 1).tolist() == [-2, -2, 0, 0, 2, 2, 4]
    assert divide_round(values, 2).tolist() == [-2, -2, 0, 0, 2, 2, 4]
    assert shift_round(values, 0).tolist() == values.tolist()


def test_shifts_divisions_roots_and_bit_lengths_equal_pythons() -> None:
    rng = np.random.default_rng(2)
    v, s = rng.integers(-2 ** 62, 2 ** 62, 3000), rng.integers(0, 62, 3000)
    expected = [_rhe(int(a), 2 ** int(b)) for a, b in zip(v, s, strict=True)]
    assert shift_round(v, s).tolist() == expected
    n, d = rng.integers(-2 ** 60, 2 ** 60, 3000), rng.integers(1, 2 ** 40, 3000)
    assert divide_round(n, d).tolist() == [_rhe(int(a), int(b)) for a, b in zip(n, d, strict=True)]
    r = np.concatenate([rng.integers(0, 2 ** 62, 3000),
                        [0, 1, 2 ** 53 + 1, 2 ** 60 - 1, 2 ** 62 - 1, (2 ** 31 - 1) ** 2 - 1]])
    assert isqrt(r).tolist() == [math.isqrt(int(x)) for x in r]
    assert bit_length(r).tolist() == [int(x).bit_length() for x in r]


def test_a_wide_requantization_keeps_31_bits_where_float64_would_keep_fewer() -> None:
    out = Encoding(16, 1e-3, -32768)
    bound = 2.0 ** 44  # leaves float64 8 bits of multiplier
    requant = Requant.make(3.3e-9, bound, out)
    assert requant is not None and requant.wide and requant.bits == 31
    acc = np.array([2 ** 44 - 1, -(2 ** 44) + 1, 123456789012, 0])
    exact = [min(max(_rhe(int(a) * int(requant.m0), 2 ** int(requant.shift)) + 32768, 0), 65535)
             for a in acc]
    assert requant.apply(acc).tolist() == exact
    assert abs(float(requant.factor) - 3.3e-9) <= 3.3e-9 * 2.0 ** -30
    assert Requant.make(1.0, 2.0 ** 62, out) is None  # beyond int64
