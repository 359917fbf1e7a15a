"""Quantization encodings and the three quantizers that choose them.

The convention is the HTP's: real = scale * (q + offset), offset = -zero_point. Activations are
unsigned and asymmetric (8 or 16 bit): q in [0, 2^b - 1], offset in [-(2^b - 1), 0], and the
range always holds 0 exactly. Weights are signed and symmetric (4, 8 or 16 bit): q in
[-(2^(b-1) - 1), 2^(b-1) - 1], offset 0 in the signed form, optionally one scale per output
channel. Biases are 32 (or 8) bit with scale = input scale x weight scale.

Quantizers pick the range [min, max] of an activation from its statistics:

- `tf`: the observed min and max.
- `enhanced`: a search over candidate ranges (shrinking the observed range from either end)
  that minimizes the expected squared error between values and their quantize-dequantize
  round trip over the calibration histogram: rounding noise (scale^2 / 12 per value inside the
  range) plus clipping error (the squared distance to the range of every value outside it).
- `symmetric`: a range symmetric around 0, [-m, m] with m the largest magnitude seen.

Values outside the reals (the policy of the vendor's tools, whose min/max observers only see
finite numbers): a range is taken over the finite values only (NaN and infinities are left out
of the statistics, udo_build.quant.stats, and of a constant's range, `finite_range`). A tensor
with no finite value at all (a constant -inf, an activation that is only NaN) gets no encoding
and stays float, as a tensor calibration never saw does, so a comparison with -inf still means
what it says. At run time a value outside an encoding's range saturates to its bound (the -inf
of an attention mask becomes the encoding's minimum) and NaN becomes the zero point
(udo_build.runtime.integer.fixed.quantize).

Reproducibility: the statistics come from the float runtime, whose last bits may differ across
CPU kinds. Every range is rounded outward to the grid of udo_build.quant.stats before an
encoding is computed from it (`asymmetric`, `symmetric_weights`, the symmetric quantizer), so
noise far below the grid's step leaves the encoding's bytes unchanged unless a bound lies within
the noise of a grid point. The enhanced search starts from rounded bounds and runs on a
histogram whose range is on the grid; a value that the noise moves to the next bin changes the
candidates' errors a little, which changes the choice only where two candidates' errors are
that close (then it moves by one candidate: the result still lands on the grid).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from ..ir.encodings import Encoding
from .stats import TensorStats, round_down, round_up, round_up_magnitudes

QUANTIZERS = ("tf", "enhanced", "symmetric")


def finite_range(values: np.ndarray) -> tuple[float, float] | None:
    """(min, max) of the finite values: (0, 0) for an empty tensor, None when it has values
    and none of them is finite (it gets no encoding)."""
    x = np.asarray(values)
    if x.size == 0:
        return 0.0, 0.0
    if not np.all(np.isfinite(x)):
        x = x[np.isfinite(x)]
    return (float(x.min()), float(x.max())) if x.size else None


def asymmetric(lo: float, hi: float, bitwidth: int) -> Encoding:
    """The unsigned encoding of [lo, hi], widened to hold 0 exactly (offset is an integer) and
    rounded outward to the grid of udo_build.quant.stats. Bounds must be finite."""
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ValueError(f"an encoding's range must be finite, given [{lo}, {hi}]")
    lo, hi = round_down(min(float(lo), 0.0)), round_up(max(float(hi), 0.0))
    levels = 2 ** bitwidth - 1
    scale = (hi - lo) / levels if hi > lo else 1e-8
    offset = int(np.clip(np.rint(lo / scale), -levels, 0))
    return Encoding(bitwidth, scale, offset)


def symmetric_weights(w: np.ndarray, bitwidth: int, axis: int | None = None) -> list[Encoding]:
    """Signed symmetric encodings of weights: one, or one per index of `axis` (the largest
    finite magnitude rounded up to the grid)."""
    levels = 2 ** (bitwidth - 1) - 1
    magnitudes = np.abs(w)
    magnitudes[~np.isfinite(magnitudes)] = 0.0  # NaN and infinities do not widen the range
    if axis is None:
        peaks = [float(np.max(magnitudes)) if w.size else 0.0]
    else:
        moved = np.moveaxis(magnitudes, axis, 0).reshape(w.shape[axis], -1)
        peaks = list(moved.max(axis=1)) if moved.size else [0.0] * w.shape[axis]
    peaks = round_up_magnitudes(np.asarray(peaks, dtype=np.float64)).tolist()
    return [Encoding(bitwidth, p / levels if p > 0 else 1e-8, 0, signed=True) for p in peaks]


def bias_fitting(encs: list[Encoding], bias: np.ndarray, x_scale: float) -> list[Encoding]:
    """Weight encodings whose bias fits int32 at scale x_scale x weight scale: a channel whose
    bias would not (fine scales on both sides, as with 16-bit activations and weights, and a
    large bias) gets the smallest weight scale with which it does. Saturating the bias instead
    costs the layer 30 dB and more; a coarser weight grid costs that channel a few bits at
    most. Block encodings are left alone (their coarse 4- and 8-bit scales never come near)."""
    if any(e.blocked for e in encs) or bias.size == 0:
        return encs
    needed = np.abs(np.nan_to_num(bias.astype(np.float64), nan=0.0, posinf=0.0, neginf=0.0))
    needed = needed / (x_scale * (2 ** 31 - 1)) * (1 + 1e-6)  # float rounding's margin
    needed = np.array([needed.max()]) if len(encs) == 1 else needed.reshape(-1)
    if needed.shape != (len(encs),):
        return encs
    return [replace(e, scale=float(n)) if n > e.scale else e
            for e, n in zip(encs, needed, strict=True)]


def with_bias(encs: list[Encoding], bias: np.ndarray, x_scale: float, bias_bitwidth: int
              ) -> tuple[list[Encoding], list[Encoding]]:
    """A weight's encodings and its bias's: a 32-bit bias made to fit (bias_fitting), each
    channel's bias at input scale x weight scale (a PER_BLOCK channel's: its largest block's)."""
    if bias_bitwidth == 32:
        encs = bias_fitting(encs, bias, x_scale)
    return encs, [Encoding(bias_bitwidth, x_scale * e.scale * max(
        e.block_scales if e.blocked and not e.lpbq_bitwidth else [1.0]), 0, signed=True)
        for e in encs]


def activation_encoding(stats: TensorStats, bitwidth: int, quantizer: str) -> Encoding:
    if stats.empty:
        return asymmetric(0.0, 1.0, bitwidth)
    if quantizer == "tf":
        return asymmetric(stats.min, stats.max, bitwidth)
    if quantizer == "symmetric":
        peak = round_up(max(abs(stats.min), abs(stats.max)))
        levels = 2 ** bitwidth - 1
        # symmetric around 0 within the unsigned range: offset at the middle
        return Encoding(bitwidth, 2 * peak / levels if peak > 0 else 1e-8,
                        -(2 ** (bitwidth - 1)))
    if quantizer == "enhanced":
        lo, hi = enhanced_range(stats, bitwidth)
        return asymmetric(lo, hi, bitwidth)
    raise ValueError(f"unknown quantizer {quantizer!r}; known: {', '.join(QUANTIZERS)}")


def enhanced_range(stats: TensorStats, bitwidth: int, steps: int = 128) -> tuple[float, float]:
    """The [lo, hi] minimizing the expected squared quantization error over the histogram: of
    the candidates (lo from `lows`, then hi from `highs`, in order), the first with the least
    error.

    Candidates are not all evaluated: each has a lower bound on its error (`_error_bounds`, its
    rounding noise exactly and a floor under its clipping error, both from prefix sums of the
    histogram), and errors are computed in order of bound until the next bound exceeds the
    least error found. Those evaluated are computed exactly as an exhaustive search would, so
    the choice is the same, bit for bit (tests/quant/test_quantizers.py checks it against the
    exhaustive search)."""
    lo0, hi0 = round_down(min(stats.min, 0.0)), round_up(max(stats.max, 0.0))
    cand = _Candidates.of(lo0, hi0, bitwidth, steps)
    if cand.lo.size == 0:
        return lo0, hi0
    centers = stats.centers()
    counts = stats.hist.astype(np.float64)
    noise, bound = _error_bounds(stats.hist, centers, cand)
    order = np.argsort(bound, kind="stable")
    errors = np.full(cand.lo.size, np.inf)
    best = np.inf
    for start in range(0, order.size, _CHUNK):
        chunk = order[start:start + _CHUNK]
        if bound[chunk[0]] > best:
            break
        errors[chunk] = noise[chunk] + _clipping_errors(centers, counts, cand.qlo[chunk],
                                                         cand.qhi[chunk])
        best = min(best, float(errors[chunk].min()))
    if not best < np.inf:
        return lo0, hi0
    i = int(np.argmin(errors))  # the first of the least errors: the exhaustive search's choice
    return float(cand.lo[i]), float(cand.hi[i])


_CHUNK = 32  # candidates evaluated at once (32 x 2048 float64 temporaries: 512 KiB)
_SAFETY = 1 - 1e-6  # the clipping floor shrunk far beyond float rounding, so it stays a floor


@dataclass(frozen=True)
class _Candidates:
    """The candidate ranges, lo-major: lo, hi and the zero-aligned range [qlo, qhi] an encoding
    of [lo, hi] represents, with its scale."""

    lo: np.ndarray
    hi: np.ndarray
    scale: np.ndarray
    qlo: np.ndarray
    qhi: np.ndarray

    @classmethod
    def of(cls, lo0: float, hi0: float, bitwidth: int, steps: int) -> _Candidates:
        fractions = np.linspace(0.0, 1.0, steps + 1)[:-1] ** 2  # finer near the observed range
        lows = lo0 * (1 - fractions) if lo0 < 0 else np.zeros(1)
        highs = hi0 * (1 - fractions) if hi0 > 0 else np.zeros(1)
        valid = highs[None, :] > lows[:, None]
        lo = np.broadcast_to(lows[:, None], valid.shape)[valid]
        hi = np.broadcast_to(highs[None, :], valid.shape)[valid]
        levels = 2 ** bitwidth - 1
        scale = (hi - lo) / levels
        offset = np.clip(np.rint(lo / scale), -levels, 0)
        return cls(lo, hi, scale, scale * offset, scale * (levels + offset))


def _error_bounds(hist: np.ndarray, centers: np.ndarray,
                  cand: _Candidates) -> tuple[np.ndarray, np.ndarray]:
    """(rounding noise, a lower bound on the error) of every candidate.

    The noise is exact: the count of values inside [qlo, qhi] is a sum of integers (exact in
    float64 below 2^53, in any order). The clipping floor puts every clipped value a whole
    number of bin steps from the range (integer moments of the histogram's tails), shrunk by
    _SAFETY: a value in bin j < a, the first bin inside, is more than (a - 1 - j) steps below
    qlo (bin a - 1 is below it); one in bin j >= b, the first bin above qhi, is more than
    (j - b) steps above it (bin b is above it)."""
    inside_from = np.searchsorted(centers, cand.qlo, side="left")  # first bin >= qlo
    outside_from = np.searchsorted(centers, cand.qhi, side="right")  # first bin > qhi
    j = np.arange(hist.size, dtype=np.int64)
    moments = [np.concatenate([[0], np.cumsum(hist * j ** p)]) for p in range(3)]
    inside = (moments[0][outside_from] - moments[0][inside_from]).astype(np.float64)
    noise = inside * cand.scale ** 2 / 12.0
    if int(moments[0][-1]) * hist.size ** 2 >= 2 ** 60:  # the moments could overflow int64
        return noise, noise
    below = _tail_steps(moments, 0, inside_from, inside_from - 1)
    above = _tail_steps(moments, outside_from, hist.size, outside_from)
    step = float(np.diff(centers).min()) if centers.size > 1 else 0.0
    return noise, noise + (below + above).astype(np.float64) * (step * step * _SAFETY)


def _tail_steps(moments: list[np.ndarray], begin: np.ndarray | int, end: np.ndarray | int,
                k: np.ndarray) -> np.ndarray:
    """sum over the bins j in [begin, end) of count_j * (j - k)^2, exactly (integers)."""
    m0, m1, m2 = (m[end] - m[begin] for m in moments)
    return m2 - 2 * k * m1 + k * k * m0


def _clipping_errors(centers: np.ndarray, counts: np.ndarray, qlo: np.ndarray,
                     qhi: np.ndarray) -> np.ndarray:
    """The squared distance of every value outside [qlo, qhi] to it, summed per candidate."""
    clipped = np.clip(centers, qlo[:, None], qhi[:, None])
    return ((centers - clipped) ** 2 * counts).sum(axis=1)
