"""Statistics, quantizers and AIMET encodings; encodings that float noise in the statistics
does not change (the grid of udo_build.quant.stats)."""

from __future__ import annotations

import numpy as np
import pytest

from udo_build.ir.encodings import from_aimet, to_aimet
from udo_build.quant.quantizers import (
    activation_encoding,
    asymmetric,
    enhanced_range,
    symmetric_weights,
)
from udo_build.quant.stats import TensorStats, round_down, round_up, round_up_magnitudes


def test_histogram_grows_without_losing_counts() -> None:
    rng = np.random.default_rng(0)
    stats = TensorStats(bins=256)
    batches = [rng.normal(0, s, 5000) for s in (0.1, 1.0, 10.0)] + [rng.normal(-50, 1, 100)]
    for b in batches:
        stats.add(b)
    data = np.concatenate(batches)
    assert stats.count == data.size and stats.hist.sum() == data.size
    assert (stats.min, stats.max) == (pytest.approx(data.min()), pytest.approx(data.max()))
    assert stats.lo <= data.min() and stats.hi > data.max()
    # the histogram is the data's histogram at the final resolution
    expected, _ = np.histogram(data, bins=256, range=(stats.lo, stats.hi))
    assert np.abs(expected - stats.hist).sum() <= 0.02 * data.size


def test_asymmetric_encodings_hold_zero_exactly() -> None:
    for lo, hi in ((-1.0, 3.0), (0.5, 2.0), (-4.0, -1.0), (-0.37, 0.91)):
        enc = asymmetric(lo, hi, 8)
        assert enc.min <= min(lo, 0) + 1e-9 and enc.max >= max(hi, 0) - enc.scale
        assert enc.dequantize(enc.quantize(np.array([0.0])))[0] == 0.0
        assert -255 <= enc.offset <= 0


def test_symmetric_per_channel_weights() -> None:
    w = np.array([[1.0, -2.0], [0.5, 0.25], [0.0, 0.0]], np.float32)
    encs = symmetric_weights(w, 8, axis=0)
    # each channel's peak rounded up to the grid: 2 -> 2.0085, 0.5 -> 0.5012 (see test_the_grid)
    assert [e.scale for e in encs] == [round_up(2.0) / 127, round_up(0.5) / 127, 1e-8]
    q = encs[0].quantize(w[0])
    assert list(q) == [63, -126] and encs[0].signed  # -2 / (2.0085 / 127) = -126.46


def mse(x: np.ndarray, enc) -> float:  # type: ignore[no-untyped-def]
    return float(np.mean((enc.dequantize(enc.quantize(x)) - x) ** 2))


def test_enhanced_minimizes_the_error_that_minmax_leaves() -> None:
    rng = np.random.default_rng(1)
    x = rng.laplace(0.0, 1.0, 200_000).astype(np.float32)  # long, thin tails
    stats = TensorStats()
    stats.add(x)
    tf = activation_encoding(stats, 8, "tf")
    enhanced = activation_encoding(stats, 8, "enhanced")
    assert mse(x, enhanced) < 0.8 * mse(x, tf)  # here the optimum clips to about +-10
    assert enhanced.max - enhanced.min < 0.85 * (tf.max - tf.min)
    two_outliers = np.concatenate([rng.standard_normal(100_000), [40.0, -35.0]])
    stats = TensorStats()
    stats.add(two_outliers)  # clipping them would cost more than the resolution it buys
    assert mse(two_outliers, activation_encoding(stats, 8, "enhanced")) <= mse(
        two_outliers, activation_encoding(stats, 8, "tf"))


def exhaustive_range(stats: TensorStats, bitwidth: int, steps: int = 128) -> tuple[float, float]:
    """The enhanced search as it was first written: every candidate's error, lo by lo (the
    oracle of the pruned search, which must choose the same range bit for bit)."""
    centers, counts = stats.centers(), stats.hist.astype(np.float64)
    lo0, hi0 = round_down(min(stats.min, 0.0)), round_up(max(stats.max, 0.0))
    fractions = np.linspace(0.0, 1.0, steps + 1)[:-1] ** 2
    lows = lo0 * (1 - fractions) if lo0 < 0 else np.zeros(1)
    highs = hi0 * (1 - fractions) if hi0 > 0 else np.zeros(1)
    levels = 2 ** bitwidth - 1
    best = (np.inf, lo0, hi0)
    for lo in lows:
        his = highs[highs > lo]
        if his.size == 0:
            continue
        scale = (his - lo) / levels
        offset = np.clip(np.rint(lo / scale), -levels, 0)
        qlo, qhi = (scale * offset)[:, None], (scale * (levels + offset))[:, None]
        inside = (centers >= qlo) & (centers <= qhi)
        noise = (inside * counts).sum(axis=1) * scale ** 2 / 12.0
        errors = noise + ((centers - np.clip(centers, qlo, qhi)) ** 2 * counts).sum(axis=1)
        i = int(np.argmin(errors))
        if errors[i] < best[0]:
            best = (float(errors[i]), float(lo), float(his[i]))
    return best[1], best[2]


def _distribution(kind: int, rng: np.random.Generator) -> np.ndarray:
    size = int(rng.integers(5, 6000))
    return [lambda: rng.standard_normal(size),
            lambda: np.maximum(rng.standard_normal(size), 0) * 10.0 ** rng.uniform(-3, 3),
            lambda: rng.laplace(rng.uniform(-2, 2), 1, size),
            lambda: -np.abs(rng.standard_cauchy(size)),
            lambda: rng.integers(-3, 5, size) * 0.5,  # few distinct values: many equal errors
            lambda: np.concatenate([rng.standard_normal(size), rng.uniform(-50, 50, 3)]),
            lambda: np.full(size, rng.uniform(-2, 2)),  # one value
            lambda: np.zeros(size)][kind % 8]().astype(np.float32)


def test_the_pruned_enhanced_search_chooses_as_the_exhaustive_one() -> None:
    """Bit for bit, for distributions of every kind (ties included), 4, 8 and 16 bit, and
    histograms that grew; most with 24 candidates per side (the oracle is slow), some with the
    default 128."""
    rng = np.random.default_rng(15)
    for case in range(48):
        stats = TensorStats(bins=(2048, 512)[case % 2])
        for part in np.array_split(_distribution(case, rng), int(rng.integers(1, 4))):
            stats.add(part)
        steps = 128 if case % 16 == 5 else 24
        for bitwidth in (4, 8, 16):
            want = exhaustive_range(stats, bitwidth, steps)
            assert enhanced_range(stats, bitwidth, steps) == want, (case, bitwidth)


def test_non_finite_values_are_left_out_and_histograms_are_optional() -> None:
    rng = np.random.default_rng(4)
    x = rng.standard_normal(1000).astype(np.float32)
    dirty = x.copy()
    dirty[[3, 70, 500]] = [np.nan, np.inf, -np.inf]
    clean, noisy, plain = TensorStats(), TensorStats(), TensorStats(histogram=False)
    for part in np.array_split(x[np.isfinite(dirty)], 3):
        clean.add(part)
    for part in np.array_split(dirty, 3):
        noisy.add(part)
        plain.add(part)
    noisy.add(np.array([np.nan], np.float32))
    assert (noisy.min, noisy.max, noisy.count, noisy.lo, noisy.hi) == (
        clean.min, clean.max, clean.count, clean.lo, clean.hi) and clean.count == 997
    assert np.array_equal(noisy.hist, clean.hist)
    assert (plain.min, plain.max, plain.count, plain.hist.size) == (clean.min, clean.max, 997, 0)


def test_aimet_round_trip() -> None:
    acts = {"relu_out": [asymmetric(0.0, 6.0, 8)]}
    params = {"conv.weight": symmetric_weights(np.array([[1.0], [-0.5]]), 8, axis=0)}
    doc = to_aimet(acts, params)
    entry = doc["param_encodings"][0]
    assert (entry["name"], entry["enc_type"], entry["offset"], entry["is_sym"]) == (
        "conv.weight", "PER_CHANNEL", [-128, -128], True)
    assert entry["scale"][0] == pytest.approx(round_up(1.0) / 127)
    assert from_aimet(doc, "e.json") == (acts, params)


# -- the grid: encodings that float noise does not change -----------------------------------------


def test_the_grid_rounds_outward_by_less_than_1_2_percent_and_keeps_zero() -> None:
    rng = np.random.default_rng(11)
    values = rng.standard_normal(20_000) * 10.0 ** rng.integers(-30, 30, 20_000)
    for x in [*values.tolist(), 1.0, 2.0, -0.5, 255.0, 1e-30, 3.4e38]:
        lo, hi = round_down(x), round_up(x)
        assert lo <= x <= hi and hi - lo <= abs(x) * 0.012
        assert round_down(lo) == round_up(lo) == lo and round_up(hi) == round_down(hi) == hi
        assert round_up(-x) == -lo and round_down(-x) == -hi
    assert round_down(0.0) == round_up(0.0) == 0.0
    assert round_down(1.0) < 1.0 < round_up(1.0)  # 1.0 is no grid point: see below
    magnitudes = np.abs(np.concatenate([values, [0.0, 1.0, 255.0, 1e-300, np.inf]]))
    assert round_up_magnitudes(magnitudes).tolist() == [round_up(x) for x in magnitudes]


def test_requantizing_between_rounded_ranges_lands_on_no_ties() -> None:
    """On a grid of short binary numbers, ranges like 3 and 6.75 give multipliers like 9/4 (and
    1 and 2 give 1/2): requantization lands on exact halves (x.5), where implementations round
    apart. The grid's offsets keep every ratio of its points from being such a fraction."""
    simple = [0.25, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, 6.75, 8.0, 10.0, 12.0, 255.0]
    for bitwidth in (8, 16):
        q = np.arange(2 ** bitwidth, dtype=np.float64)
        for a in simple:
            for b in simple:
                for e_in in (asymmetric(0.0, a, bitwidth), asymmetric(-a / 3, a, bitwidth)):
                    e_out = asymmetric(0.0, b, bitwidth)
                    v = (q + e_in.offset) * (e_in.scale / e_out.scale)  # in output steps
                    distance = np.abs(v - np.floor(v) - 0.5)
                    assert distance.min() > 2.0 ** -30, (bitwidth, a, b, e_in)


def _ulp_noise(x: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    """x with every element moved by one ulp, up or down at random (or left)."""
    x = np.asarray(x, np.float32)
    step = rng.integers(-1, 2, x.shape)
    up, down = np.nextafter(x, np.float32(np.inf)), np.nextafter(x, np.float32(-np.inf))
    return np.where(step > 0, up, np.where(step < 0, down, x)).astype(np.float32)


@pytest.mark.parametrize("quantizer", ["tf", "enhanced", "symmetric"])
def test_one_ulp_of_noise_in_the_activations_changes_no_encoding(quantizer: str) -> None:
    """The float runtime's last bits may differ between CPU kinds (BLAS): statistics of
    activations one ulp off give the same encodings, for distributions of every kind, 8 and 16
    bit, and histograms that grew."""
    rng = np.random.default_rng(2026)
    shapes = [rng.standard_normal, rng.standard_cauchy, rng.standard_exponential]
    changed = []
    for i in range(30):
        scale = 10.0 ** rng.uniform(-4, 4)
        shift = rng.uniform(-1, 1) * scale
        batches = [(shapes[i % 3](3000) * scale * growth + shift).astype(np.float32)
                   for growth in (1.0, 1.5, 3.0)]
        if i % 4 == 0:
            batches = [np.maximum(b, 0) for b in batches]  # ReLU outputs: zero is the min
        exact, noisy = TensorStats(bins=512), TensorStats(bins=512)
        for b in batches:
            exact.add(b)
            noisy.add(_ulp_noise(b, rng))
        bitwidth = (8, 16)[i % 2]
        want = activation_encoding(exact, bitwidth, quantizer)
        if activation_encoding(noisy, bitwidth, quantizer) != want:
            changed.append(i)
    assert changed == []


def test_the_histogram_range_is_on_the_grid() -> None:
    stats = TensorStats()
    stats.add(np.array([-0.3, 0.7], np.float32))
    assert stats.lo == round_down(np.float32(-0.3)) and stats.hi > 0.7
    assert stats.hi - stats.lo == round_up(stats.hi - stats.lo)
    stats.add(np.array([5.0], np.float32))  # grows by doubling: the same bin edges, merged
    assert stats.lo == round_down(np.float32(-0.3)) and stats.hi > 5.0


def test_the_histogram_bins_by_float32_arithmetic() -> None:
    """stats.histogram: bin floor((v - lo) x bins / width) in float32, clipped: the edges and the
    bins' middles where they belong, every value counted, and np.histogram's counts but for the
    values within a rounding of an edge."""
    from udo_build.quant.stats import histogram

    lo, hi, bins = -2.0, 6.0, 8
    x = np.array([-2.0, -1.5, 0.5, 3.5, 5.999, 6.0], np.float32)
    assert histogram(x, bins, lo, hi).tolist() == [2, 0, 1, 0, 0, 1, 0, 2]
    rng = np.random.default_rng(1)
    data = (rng.standard_normal(200_000) * 3).astype(np.float32)
    lo, hi = float(data.min()) - 0.1, float(data.max()) + 0.1
    counts = histogram(data, 2048, lo, hi)
    assert counts.dtype == np.int64 and counts.sum() == data.size
    expected, _ = np.histogram(data, bins=2048, range=(lo, hi))
    assert np.abs(counts - expected).sum() <= 1e-3 * data.size
