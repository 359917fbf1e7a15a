"""Per-tensor statistics gathered in one pass with bounded memory.

A `TensorStats` keeps the running min and max and (unless `histogram=False`: only the enhanced
quantizer reads it) a histogram of fixed size. The histogram's range starts at the first
batch's range and grows by doubling when later values fall outside it, merging bins pairwise,
so old counts are never lost and memory never grows (the approach of TensorRT's and
onnxruntime's histogram calibrators). No activation is kept. `add` is `observe` (the batch's
span: min, max, count, and the range grown to hold it) then `add_counts` of the batch's
`counts` at that range: calibration over several workers does the two apart, in input order, for
the same bits (udo_build.quant.calibrate).

The statistics come from the float runtime, whose last bits may differ between CPU kinds (BLAS
kernels, vectorized transcendental functions). So that such noise does not reach the encodings,
every range an encoding is computed from is first rounded outward to a fixed grid (`round_down`,
`round_up`) of RANGE_BITS significant bits: less than 1.2% wider (2^-7 within a binade, up to
3 x 2^-8 across a power of two), and zero stays zero. In the binade [2^(e-1), 2^e) the grid's
points are (n + theta_e) * 2^(e-8) for n = 128..255, the offset theta_e = frac((e + 1/2) *
GOLDEN) another in every binade, so that the ratio of two rounded ranges (the requantization
multiplier between two encodings) is neither a simple fraction nor a power of two: on a plain
grid of short binary numbers such ratios are common (9/4, 1/2), and requantizing lands on
exact ties (x.5), where implementations that agree elsewhere round apart. The histogram's range
is such a rounded range too.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

BINS = 2048
RANGE_BITS = 8  # significant bits of the range bounds encodings are computed from
GOLDEN = 0.6180339887498949  # the golden ratio - 1: theta_e = frac((e + 1/2) * GOLDEN)
MIN_WIDTH = 2.0 ** -26  # the narrowest histogram range (an all-zero tensor's)
_FIRST, _LAST = 2 ** (RANGE_BITS - 1), 2 ** RANGE_BITS - 1  # the indices n of a binade's points


def finite_span(values: np.ndarray) -> tuple[np.ndarray, float, float] | None:
    """(the finite values as float32, flat; their min; their max), None when there is none."""
    x = np.asarray(values, dtype=np.float32).ravel()
    if x.size == 0:
        return None
    lo, hi = float(x.min()), float(x.max())
    if not (math.isfinite(lo) and math.isfinite(hi)):  # NaN or an infinity: leave them out
        x = x[np.isfinite(x)]
        if x.size == 0:
            return None
        lo, hi = float(x.min()), float(x.max())
    return x, lo, hi


def histogram(x: np.ndarray, bins: int, lo: float, hi: float) -> np.ndarray:
    """Counts of the finite float32 values `x` (within [lo, hi], as a TensorStats range holds
    them) in `bins` equal bins: value v goes to bin floor((v - lo) x (bins / (hi - lo))),
    computed in float32 (two correctly rounded operations: the same bits on every machine) and
    clipped to the bins. np.histogram places the few values within a rounding of an edge by
    comparing them with the edges, in a dozen passes over the data with two gathers; this takes
    four, 2-3x faster (the enhanced quantizer histograms every activation of every input)."""
    t = np.subtract(x, np.float32(lo), dtype=np.float32)
    t *= np.float32(bins / (hi - lo))
    np.clip(t, 0, bins - 1, out=t)
    return np.bincount(t.astype(np.intp), minlength=bins).astype(np.int64)


def round_down(x: float) -> float:
    """The largest grid point <= x (0 and non-finite numbers are their own)."""
    x = float(x)
    return -_up(-x) if x < 0 else _down(x)


def round_up(x: float) -> float:
    """The smallest grid point >= x (0 and non-finite numbers are their own)."""
    x = float(x)
    return -_down(-x) if x < 0 else _up(x)


def round_up_magnitudes(x: np.ndarray) -> np.ndarray:
    """round_up of every element of x >= 0 (float64), the same bits as the scalar function:
    the same points, computed by the same float operations, a row of six per element."""
    x = np.asarray(x, dtype=np.float64)
    _, e = np.frexp(x)
    step = np.ldexp(1.0, e - RANGE_BITS)
    theta = ((e + 0.5) * GOLDEN) % 1.0
    n = np.floor(x / step - theta)
    k = n[:, None] + np.arange(-1.0, 3.0)  # n - 1 .. n + 2, kept inside the binade
    points = np.where((k >= _FIRST) & (k <= _LAST), (k + theta[:, None]) * step[:, None], np.inf)
    below = (_LAST + ((e - 1 + 0.5) * GOLDEN) % 1.0) * step / 2
    above = (_FIRST + ((e + 1 + 0.5) * GOLDEN) % 1.0) * step * 2
    points = np.concatenate([below[:, None], points, above[:, None]], axis=1)
    up = np.where(points >= x[:, None], points, np.inf).min(axis=1, initial=np.inf)
    return np.where((x == 0) | ~np.isfinite(x), x, up)


def _near(x: float) -> list[float]:
    """The grid points around x > 0: of its binade [2^(e-1), 2^e), those whose index n is next
    to x / step - theta_e, and the last of the binade below and the first of the one above.
    The points are the floats (n + theta_e) * step, products by a power of two (exact), so the
    rounding is a fixed function of x's bits, the same on every machine."""
    _, e = math.frexp(x)
    step = math.ldexp(1.0, e - RANGE_BITS)
    theta = _theta(e)
    n = math.floor(x / step - theta)
    points = [(k + theta) * step for k in range(max(_FIRST, n - 1), min(_LAST, n + 2) + 1)]
    return [(_LAST + _theta(e - 1)) * step / 2, *points, (_FIRST + _theta(e + 1)) * step * 2]


def _theta(exponent: int) -> float:
    """Binade e's offset: never 0, another in every binade (a low-discrepancy sequence)."""
    return ((exponent + 0.5) * GOLDEN) % 1.0


def _up(x: float) -> float:
    if x == 0.0 or not math.isfinite(x):
        return x
    return min(p for p in _near(x) if p >= x)


def _down(x: float) -> float:
    if x == 0.0 or not math.isfinite(x):
        return x
    below = [p for p in _near(x) if p <= x]
    return max(below) if below else 0.0


@dataclass
class TensorStats:
    bins: int = BINS
    min: float = float("inf")
    max: float = float("-inf")
    count: int = 0
    lo: float = 0.0  # histogram range [lo, hi)
    hi: float = 0.0
    hist: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    histogram: bool = True  # False: min, max and count only

    def add(self, values: np.ndarray) -> None:
        """Count the finite values (NaN and infinities are left out)."""
        found = finite_span(values)
        if found is None:
            return
        x, lo, hi = found
        self.observe(lo, hi, x.size)
        if self.histogram:
            self.add_counts(self.counts(x))

    def observe(self, lo: float, hi: float, size: int) -> None:
        """Take in a batch of `size` finite values within [lo, hi]: the running min, max and
        count, and the histogram's range grown to hold them (the batch's counts come apart, at
        the range this leaves: `counts`, then `add_counts`)."""
        self.min, self.max = min(self.min, lo), max(self.max, hi)
        self.count += size
        if not self.histogram:
            return
        if self.hist.size == 0:
            self._start(lo, hi)
        while lo < self.lo or hi >= self.hi:
            self._grow(lo, hi)

    def counts(self, x: np.ndarray, span: tuple[float, float] | None = None) -> np.ndarray:
        """The histogram of finite values `x` over `span` (default: the current range)."""
        return histogram(x, self.bins, *(span or (self.lo, self.hi)))

    def add_counts(self, counts: np.ndarray) -> None:
        """Add a batch's counts, taken at the current range."""
        self.hist += counts

    def _start(self, lo: float, hi: float) -> None:
        """The first range: the batch's, holding 0 (as every quantization range does), rounded
        outward to the grid, and a little wider than that so the maximum falls inside [lo, hi)."""
        lo, hi = round_down(min(lo, 0.0)), round_up(max(hi, 0.0))
        width = round_up(max(hi - lo, MIN_WIDTH) * (1 + 2.0 ** -RANGE_BITS))
        self.lo, self.hi = lo, lo + width
        self.hist = np.zeros(self.bins, np.int64)

    def _grow(self, lo: float, hi: float) -> None:
        """Double the range (toward the side that overflows), merging bins pairwise."""
        width = self.hi - self.lo
        merged = self.hist.reshape(-1, 2).sum(axis=1)
        empty = np.zeros(self.bins // 2, np.int64)
        if hi >= self.hi:  # grow upward: old bins fill the lower half
            self.hist = np.concatenate([merged, empty])
            self.hi = self.lo + 2 * width
        else:  # grow downward: old bins fill the upper half
            self.hist = np.concatenate([empty, merged])
            self.lo = self.hi - 2 * width

    def centers(self) -> np.ndarray:
        edges = np.linspace(self.lo, self.hi, self.bins + 1, dtype=np.float64)
        return (edges[:-1] + edges[1:]) / 2

    @property
    def empty(self) -> bool:
        return self.count == 0
