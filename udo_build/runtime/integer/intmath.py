"""Exact int64 arithmetic for values that outgrow float64's 53 bits: rounding shifts and
divisions, integer square roots, and products by a fixed-point multiplier.

Every function here rounds halves to even, as `fixed.py` does, and is exact for the ranges its
docstring states: integer operations in numpy's int64 never round, so the results are the same
on every machine. (The one float operation, the first guess of `isqrt`, is corrected by integer
steps until it is the exact floor.)
"""

from __future__ import annotations

import numpy as np

HALF_WORD = 31
_LOW = np.int64((1 << HALF_WORD) - 1)
SLICE = 1 << 20  # values of an accumulator mul_shift_round takes at a time


def _rounded(floor: np.ndarray, rem: np.ndarray, half: np.ndarray | int) -> np.ndarray:
    """floor + 1 where the remainder is above half, or at half with an odd floor."""
    half = np.asarray(half, np.int64)
    up = (rem > half) | ((rem == half) & (half > 0) & ((floor & 1) == 1))
    return floor + up.astype(np.int64)


def shift_round(v: np.ndarray, shift: np.ndarray | int) -> np.ndarray:
    """round_half_even(v / 2^shift) for int64 v and 0 <= shift <= 62 (broadcast)."""
    v = np.asarray(v, np.int64)
    shift = np.asarray(shift, np.int64)
    floor = v >> shift  # arithmetic: the floor for negative values too
    rem = v - (floor << shift)  # in [0, 2^shift)
    return _rounded(floor, rem, (np.int64(1) << shift) >> 1)


def divide_round(num: np.ndarray, den: np.ndarray | int) -> np.ndarray:
    """round_half_even(num / den) for int64 num and den > 0 with 2 x den < 2^63."""
    num = np.asarray(num, np.int64)
    den = np.asarray(den, np.int64)
    floor = num // den
    rem = num - floor * den  # in [0, den)
    twice = 2 * rem
    up = (twice > den) | ((twice == den) & ((floor & 1) == 1))
    return floor + up.astype(np.int64)


def isqrt(r: np.ndarray) -> np.ndarray:
    """floor(sqrt(r)) for int64 0 <= r < 2^62, exactly."""
    r = np.asarray(r, np.int64)
    s = np.sqrt(r.astype(np.float64)).astype(np.int64)  # within 1 of the root
    for _ in range(2):
        s = np.where(s * s > r, s - 1, s)
        s = np.where((s + 1) * (s + 1) <= r, s + 1, s)
    return s


def bit_length(r: np.ndarray) -> np.ndarray:
    """The exact bit length of int64 0 <= r < 2^62 (0 for 0), as int.bit_length."""
    r = np.asarray(r, np.int64)
    _, e = np.frexp(r.astype(np.float64))  # one too many where the float rounded up
    e = e.astype(np.int64)
    over = (e > 0) & ((np.int64(1) << np.maximum(e - 1, 0)) > r)
    return e - over.astype(np.int64)


def mul_shift_round(acc: np.ndarray, m0: np.ndarray, shift: np.ndarray) -> np.ndarray:
    """round_half_even(acc x m0 / 2^shift), exact for int64 |acc| < 2^62, 0 <= m0 < 2^31 and
    0 <= shift <= 62 when the result's magnitude stays below 2^61.

    acc splits into hi x 2^31 + lo (lo in [0, 2^31)): both partial products fit int64, and the
    sum is reassembled at the shift without ever forming the 93-bit product. A large acc is
    taken SLICE values at a time along its first axis (every step is elementwise: the same
    values): the steps hold a dozen int64 temporaries of acc's size, 370 MB for an LLM's
    128 x 32000 logits."""
    acc = np.asarray(acc, np.int64)
    m0 = np.asarray(m0, np.int64)
    shift = np.asarray(shift, np.int64)
    shape = np.broadcast_shapes(acc.shape, m0.shape, shift.shape)
    if acc.size <= SLICE or acc.ndim == 0 or shape != acc.shape:
        return _mul_shift_round(acc, m0, shift)
    out = np.empty(shape, np.int64)
    rows = max(1, SLICE // max(1, acc.size // acc.shape[0]))
    for start in range(0, acc.shape[0], rows):
        part = slice(start, start + rows)
        out[part] = _mul_shift_round(acc[part], _rows(m0, part, acc.ndim),
                                     _rows(shift, part, acc.ndim))
    return out


def _rows(a: np.ndarray, part: slice, ndim: int) -> np.ndarray:
    """a's rows of `part` where a runs along the first axis of an ndim-array, else a."""
    return a[part] if a.ndim == ndim and a.shape[0] > 1 else a


def _mul_shift_round(acc: np.ndarray, m0: np.ndarray, shift: np.ndarray) -> np.ndarray:
    a = (acc >> HALF_WORD) * m0
    b = (acc & _LOW) * m0  # >= 0
    # shift >= 31: total = (a + b_hi) x 2^31 + b_lo
    c = a + (b >> HALF_WORD)
    t = np.maximum(shift - HALF_WORD, 0)
    floor_wide = c >> t
    rem_wide = ((c - (floor_wide << t)) << HALF_WORD) + (b & _LOW)
    # shift < 31: total / 2^shift = a x 2^(31 - shift) + b / 2^shift
    low = np.minimum(shift, HALF_WORD)
    floor_narrow = (a << (HALF_WORD - low)) + (b >> low)
    rem_narrow = b & ((np.int64(1) << low) - 1)
    wide = shift >= HALF_WORD
    floor = np.where(wide, floor_wide, floor_narrow)
    rem = np.where(wide, rem_wide, rem_narrow)
    return _rounded(floor, rem, (np.int64(1) << shift) >> 1)
