"""The integer convolution's GEMM per tap (runtime/integer/taps.py) against an int64 reference
(im2col and matmul on int64, the bias, the explicit requantization): extreme codes and weights
with a float32 bias that fills what is left below 2^24 (the largest partial sums the proof
allows), zero points with padding, dilations, and a bias one past the bound (the im2col path)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from udo_build.ir.encodings import Encoding
from udo_build.kernels import compiled
from udo_build.kernels.default.conv import im2col
from udo_build.runtime.integer import conv as conv_module
from udo_build.runtime.integer import taps
from udo_build.runtime.integer.exact import F32_LIMIT, pack
from udo_build.runtime.integer.fixed import Requant, reach


def _accumulator(x: np.ndarray, w: np.ndarray, b: np.ndarray, zp: int, pads: list[int],
                 dilations: list[int]) -> np.ndarray:
    """conv(x - zp, w) + b in int64, (1, M, Ho, Wo)."""
    centered = x.astype(np.int64) - zp
    m, kernel = w.shape[0], w.shape[2:]
    outs = [size + p0 + p1 - d * (k - 1) for size, p0, p1, k, d in
            zip(x.shape[2:], pads[:2], pads[2:], kernel, dilations, strict=True)]
    cols = im2col(centered, tuple(kernel), (1, 1), tuple(dilations), pads[:2], outs)
    acc = w.astype(np.int64).reshape(m, -1) @ cols.reshape(-1, int(np.prod(outs)))
    return (acc + b.astype(np.int64)[:, None]).reshape(1, m, *outs)


def _reference(x: np.ndarray, w: np.ndarray, b: np.ndarray, zp: int, requant: Requant,
               pads: list[int], dilations: list[int]) -> np.ndarray:
    full = _accumulator(x, w, b, zp, pads, dilations)
    acc = full.reshape(full.shape[1], -1)
    v = acc * requant.m0.reshape(-1, 1)
    shift = np.broadcast_to(requant.shift.reshape(-1, 1), v.shape)
    floor = v >> shift
    rem = v - (floor << shift)
    half = np.int64(1) << (shift - 1)
    up = (rem > half) | ((rem == half) & (floor % 2 == 1))
    q = np.clip(floor + up + requant.zero_point, requant.lo, requant.hi)
    return q.reshape(full.shape)


@pytest.mark.parametrize(("zp", "size", "pads", "dilations"), [
    (0, 20, [1, 1, 1, 1], [1, 1]), (128, 20, [1, 1, 1, 1], [1, 1]),
    (37, 34, [2, 2, 2, 2], [2, 2]), (0, 18, [0, 1, 2, 0], [1, 1])])
@pytest.mark.parametrize("path", ["taps", "compiled"])
def test_tap_gemms_are_exact_up_to_the_bound(zp: int, size: int, pads: list[int],
                                             dilations: list[int], path: str,
                                             float_products: None,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """The tap GEMMs (the compiled library off), and the float path's compiled convolution
    (its chains of fused multiply-adds), on sums a step below 2^24: exact."""
    rng = np.random.default_rng(size + zp)
    c, m = 64, 6
    x_enc = Encoding(8, 0.1, -zp)
    w = np.where(rng.random((m, c, 3, 3)) < 0.5, -127, 127).astype(np.int8)
    x = np.where(rng.random((1, c, size, size)) < 0.5, 0, 255).astype(np.uint8)
    d = dilations[0]  # output (5, 5) of channel 1 (bias +room) at its largest sum: 255 where
    rows = 5 - pads[0] + d * np.arange(3)  # its weights are positive, 0 where negative
    cols = 5 - pads[1] + d * np.arange(3)
    x[0][np.ix_(np.arange(c), rows, cols)] = np.where(w[1] > 0, 255, 0)
    packed = pack(w.reshape(1, m, -1), reach(x_enc), (x_enc.qmin - zp, x_enc.qmax - zp))
    assert len(packed.bounds) == 1 and packed.dtype == np.float32
    room = F32_LIMIT - 1 - int(packed.partial_bound)
    assert 0 < room < 2 ** 23
    b = np.where(np.arange(m) % 2 == 0, -room, room).astype(np.float32)
    real = rng.uniform(0.5, 2.0, m) / (c * 9 * 40.0)
    requant = Requant.make(real, packed.acc_bound + room, Encoding(8, 0.05, -17), proven=True)
    assert requant is not None
    requant = requant.reshaped(-1, 1, 1)
    taken = []

    def counted(*args: Any, **kwargs: Any) -> np.ndarray:
        taken.append(True)
        return tap_product(*args, **kwargs)

    tap_product = taps.tap_product
    monkeypatch.setattr(taps, "tap_product", counted)
    ran = []
    if path == "taps":
        monkeypatch.setenv(compiled.SWITCH, "0")
    else:
        monkeypatch.delenv(compiled.SWITCH, raising=False)
        if compiled.library() is None:
            pytest.skip("no C compiler (or it failed): the compiled convolution cannot run")
        run_compiled = conv_module.run_compiled

        def spied(*args: Any, **kwargs: Any) -> np.ndarray:
            ran.append(True)
            return run_compiled(*args, **kwargs)

        monkeypatch.setattr(conv_module, "run_compiled", spied)
    expected = _reference(x, w, b, zp, requant, pads, dilations)
    largest = _accumulator(x, w, b, zp, pads, dilations)[0, 1, 5, 5]
    assert 0.9 * F32_LIMIT < largest < F32_LIMIT  # near the bound: odd values above it round
    got = conv_module.conv(x, w, b, x_zero_point=zp, requant=requant, packed=packed,
                           pads=pads, dilations=dilations)
    assert (taken if path == "taps" else ran) and not (taken and ran)
    assert got.dtype == np.uint8 and np.array_equal(got, expected)
    over = b + np.float32(np.sign(b))  # one past the bound: the bias added in float64
    taken.clear()
    got = conv_module.conv(x, w, over, x_zero_point=zp, requant=requant, packed=packed,
                           pads=pads, dilations=dilations)
    assert not taken
    assert np.array_equal(got, _reference(x, w, over, zp, requant, pads, dilations))


def test_narrow_rows_and_few_channels_take_im2col() -> None:
    packed = pack(np.ones((1, 4, 63 * 9), np.int8), 255, (0, 255))
    bias = np.zeros(4, np.float32)
    k, s, d = (3, 3), (1, 1), (1, 1)
    assert not taps.fits(packed, bias, (1, 63, 20, 20), k, s, d, [1, 1], [20, 20], 1)
    packed = pack(np.ones((1, 4, 64 * 9), np.int8), 255, (0, 255))
    assert taps.fits(packed, bias, (1, 64, 20, 20), k, s, d, [1, 1], [20, 20], 1)
    assert not taps.fits(packed, bias, (1, 64, 15, 15), k, s, d, [1, 1], [15, 15], 1)
    assert not taps.fits(packed, bias, (1, 64, 20, 20), k, (2, 2), d, [1, 1], [10, 10], 1)
    assert not taps.fits(packed, None, (1, 64, 20, 20), k, s, d, [1, 1], [20, 20], 1)
