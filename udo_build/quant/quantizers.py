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

import numpy as np

from ..ir.encodings import Encoding
from .stats import TensorStats, round_down, round_up

QUANTIZERS = ("tf", "enhanced", "symmetric")


def asymmetric(lo: float, hi: float, bitwidth: int) -> Encoding:
    """The unsigned encoding of [lo, hi], widened to hold 0 exactly (offset is an integer) and
    rounded outward to the grid of udo_build.quant.stats."""
    lo, hi = round_down(min(float(lo), 0.0)), round_up(max(float(hi), 0.0))
    levels = 2 ** bitwidth - 1
    scale = (hi - lo) / levels if hi > lo else 1e-8
    offset = int(np.clip(np.rint(lo / scale), -levels, 0))
    return Encoding(bitwidth, scale, offset)


def symmetric_weights(w: np.ndarray, bitwidth: int, axis: int | None = None) -> list[Encoding]:
    """Signed symmetric encodings of weights: one, or one per index of `axis` (the largest
    magnitude rounded up to the grid)."""
    levels = 2 ** (bitwidth - 1) - 1
    if axis is None:
        peaks = [float(np.max(np.abs(w))) if w.size else 0.0]
    else:
        moved = np.moveaxis(np.abs(w), axis, 0).reshape(w.shape[axis], -1)
        peaks = list(moved.max(axis=1)) if moved.size else [0.0] * w.shape[axis]
    peaks = [round_up(float(p)) for p in peaks]
    return [Encoding(bitwidth, p / levels if p > 0 else 1e-8, 0, signed=True) for p in peaks]


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
    """The [lo, hi] minimizing the expected squared quantization error over the histogram."""
    centers = stats.centers()
    counts = stats.hist.astype(np.float64)
    lo0, hi0 = round_down(min(stats.min, 0.0)), round_up(max(stats.max, 0.0))
    fractions = np.linspace(0.0, 1.0, steps + 1)[:-1] ** 2  # finer near the observed range
    lows = lo0 * (1 - fractions) if lo0 < 0 else np.zeros(1)
    highs = hi0 * (1 - fractions) if hi0 > 0 else np.zeros(1)
    best = (np.inf, lo0, hi0)
    for lo in lows:
        his = highs[highs > lo]
        if his.size == 0:
            continue
        errors = _expected_errors(centers, counts, lo, his, bitwidth)
        i = int(np.argmin(errors))
        if errors[i] < best[0]:
            best = (float(errors[i]), float(lo), float(his[i]))
    return best[1], best[2]


def _expected_errors(centers: np.ndarray, counts: np.ndarray, lo: float, his: np.ndarray,
                     bitwidth: int) -> np.ndarray:
    """Expected squared error of the encodings of [lo, hi] for every hi: rounding noise inside
    the (zero-aligned) range plus clipping error outside it."""
    levels = 2 ** bitwidth - 1
    scale = (his - lo) / levels
    offset = np.clip(np.rint(lo / scale), -levels, 0)
    qlo = (scale * offset)[:, None]
    qhi = (scale * (levels + offset))[:, None]
    inside = (centers >= qlo) & (centers <= qhi)
    noise = (inside * counts).sum(axis=1) * scale ** 2 / 12.0
    clipped = np.clip(centers, qlo, qhi)
    return noise + ((centers - clipped) ** 2 * counts).sum(axis=1)
