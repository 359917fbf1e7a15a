"""Statistics, quantizers and AIMET encodings."""

from __future__ import annotations

import numpy as np
import pytest

from udo_build.ir.encodings import from_aimet, to_aimet
from udo_build.quant.quantizers import (
    activation_encoding,
    asymmetric,
    symmetric_weights,
)
from udo_build.quant.stats import TensorStats


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
    assert [e.scale for e in encs] == [2 / 127, 0.5 / 127, 1e-8]
    q = encs[0].quantize(w[0])
    assert list(q) == [64, -127] and encs[0].signed


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


def test_aimet_round_trip() -> None:
    acts = {"relu_out": [asymmetric(0.0, 6.0, 8)]}
    params = {"conv.weight": symmetric_weights(np.array([[1.0], [-0.5]]), 8, axis=0)}
    doc = to_aimet(acts, params)
    entry = doc["param_encodings"]["conv.weight"][0]
    assert (entry["offset"], entry["is_symmetric"], entry["min"]) == (
        -128, "True", pytest.approx(-128 / 127))
    assert from_aimet(doc, "e.json") == (acts, params)
