"""The requantization's fast passes (runtime/integer/fixed.py) against the explicit integer
reference: the int16 rounding of a proven bound (`Requant.narrow`) at the edge of that bound,
and the requantization by blocks (`BLOCK` elements at a time) of large, strided and per-row
accumulators; the same integers as Python's unbounded arithmetic, ties and clamps included."""

from __future__ import annotations

import numpy as np
import pytest

from udo_build.ir.encodings import Encoding
from udo_build.runtime.integer import fixed
from udo_build.runtime.integer.fixed import BLOCK, NARROW_LIMIT, Requant


def _rhe(num: int, den: int) -> int:
    q, r = divmod(num, den)
    return q + (1 if 2 * r > den or (2 * r == den and q % 2) else 0)


def _reference(acc: np.ndarray, requant: Requant) -> np.ndarray:
    """clamp(zp + round_half_even(acc x M0 / 2^shift)) per element, in Python integers."""
    a, m, s = np.broadcast_arrays(np.asarray(acc, object), requant.m0.astype(object),
                                  requant.shift.astype(object))
    out = [min(max(_rhe(int(x) * int(y), 2 ** int(z)) + requant.zero_point, requant.lo),
               requant.hi) for x, y, z in zip(a.ravel(), m.ravel(), s.ravel(), strict=True)]
    return np.array(out, np.int64).reshape(a.shape)


def _reference64(acc: np.ndarray, requant: Requant) -> np.ndarray:
    """The same in int64 (for |acc| x M0 < 2^62)."""
    v = acc.astype(np.int64) * requant.m0
    shift = np.broadcast_to(requant.shift, v.shape)
    floor = v >> shift
    rem = v - (floor << shift)
    half = np.int64(1) << (shift - 1)
    up = (rem > half) | ((rem == half) & (floor % 2 == 1))
    return np.clip(floor + up + requant.zero_point, requant.lo, requant.hi)


@pytest.mark.parametrize("offset", [0, -100, 17])
def test_the_int16_rounding_is_exact_at_the_edge_of_its_bound(offset: int) -> None:
    # multipliers per channel with bound x max(multiplier) just below 2^15 - 1: accumulators
    # at +-bound reach |t| = 32766.x (the largest the int16 rounding takes), the clamp of the
    # encoding maps them to its ends; near the zero point every value and tie is hit
    bound = 2 ** 23 - 1
    top = (NARROW_LIMIT - 0.75) / bound
    real = np.array([top, top / 3, 0.5 / 2 ** 11, 0.25 / 2 ** 11])  # the last two: ties
    requant = Requant.make(real, bound, Encoding(8, 0.1, offset), proven=True)
    assert requant is not None and requant.narrow
    requant = requant.reshaped(-1, 1)
    rng = np.random.default_rng(1)
    acc = np.concatenate([np.full((4, 1), bound), np.full((4, 1), -bound),
                          np.tile(np.arange(-3 * 2 ** 12, 3 * 2 ** 12, 7), (4, 1)),
                          rng.integers(-bound, bound + 1, (4, 500))], axis=1)
    t = np.abs(acc * requant.factor)
    assert t.max() > NARROW_LIMIT - 1  # the int16 range is really used
    got = requant.apply(acc.astype(np.float32))
    assert got.dtype == np.uint8 and np.array_equal(got, _reference(acc, requant))


def test_a_bound_past_int16_is_not_narrow_and_stays_exact() -> None:
    bound = 2 ** 23 - 1
    real = np.array([(NARROW_LIMIT + 1.0) / bound])
    wide = Requant.make(real, bound, Encoding(8, 0.1, -128), proven=True)
    unproven = Requant.make(real / 4, bound, Encoding(8, 0.1, -128))
    assert wide is not None and not wide.narrow
    assert unproven is not None and not unproven.narrow  # no proof: never narrow
    acc = np.array([bound, -bound, 2 ** 10, -(2 ** 10)], np.int64)
    for requant in (wide, unproven):
        assert np.array_equal(requant.apply(acc.astype(np.float32)), _reference(acc, requant))


@pytest.mark.parametrize("proven", [True, False])
def test_requantization_by_blocks_equals_the_reference(proven: bool) -> None:
    # (1, M, H, W) with a multiplier per channel, a strided view of it (as the tap GEMMs give
    # it), (N, M) with one per row and one for all: each larger than BLOCK
    rng = np.random.default_rng(2)
    bound = 2 ** 22
    real = rng.uniform(2.0 ** -15, 2.0 ** -11, 48)
    base = Requant.make(real, bound, Encoding(8, 0.1, -3), (0.0, None), proven=proven)
    one = Requant.make(2.0 ** -13, bound, Encoding(8, 0.1, -128), proven=proven)
    assert base is not None and one is not None and base.narrow == proven
    small = rng.integers(-bound, bound, 2000)
    assert np.array_equal(_reference64(small, one), _reference(small, one))
    wide = rng.integers(-bound, bound, (1, 48, 40, 44)).astype(np.float32)
    cases = [(base.reshaped(-1, 1, 1), wide), (base.reshaped(-1, 1, 1), wide[..., :37]),
             (base.reshaped(-1, 1), wide[0, :, 0, :].repeat(40, axis=1)), (one, wide)]
    for requant, acc in cases:
        assert acc.size > BLOCK
        assert fixed._block_axis(acc.shape, requant.factor.shape) is not None
        expected = _reference64(acc, requant)
        assert np.array_equal(requant.apply(acc), expected)
        assert np.array_equal(requant.apply(acc.astype(np.float64), owned=True), expected)


def test_quantizing_values_saturates_infinities_and_puts_nan_at_the_zero_point() -> None:
    # QuantizeLinear's codes, element by element in Python: ties (k + 1/2 of the scale) to
    # even, the encoding's ends for +-inf and beyond, the zero point for NaN; per channel too
    scale, offset = 0.25, -100.0
    values = np.array([np.nan, np.inf, -np.inf, 0.125, 0.375, -0.125, 1e9, -1e9, 3.3, -24.9,
                       -25.1], np.float32)
    enc = Encoding(8, scale, offset)

    def code(v: float, s: float, o: float) -> int:
        if np.isnan(v):
            return -int(o)
        if np.isinf(v):
            return 255 if v > 0 else 0
        return int(min(max(round(float(v) / s) - o, 0), 255))

    assert fixed.quantize(values, enc).tolist() == [code(v, scale, offset) for v in values]
    for v in values:  # a scalar (0-d) too
        assert fixed.quantize(np.float32(v), enc).tolist() == code(v, scale, offset)
    encs = [Encoding(8, 0.5, -3), Encoding(8, 0.01, -250)]
    grid = np.stack([values, values[::-1]])
    got = fixed.quantize_along(grid, encs, 0)
    assert got.dtype == np.uint8 and got.tolist() == [
        [code(v, e.scale, e.offset) for v in row] for row, e in zip(grid, encs, strict=True)]
