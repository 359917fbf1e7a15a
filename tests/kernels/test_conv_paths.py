"""Every path of the float convolution against a float64 sum over taps (exact on any machine),
and numpy's BLAS called directly (udo_build.kernels.blas) against np.matmul.

The paths, chosen by shape: a 1x1 unpadded convolution multiplies the input itself; 2-d
stride-1 convolutions wide enough (junk columns <= 1/8 of the width) read their taps as
contiguous rows of the padded input, with a GEMM per tap from TAP_GEMM_CHANNELS input channels
and one GEMM over copied rows below; everything else (strided, 1-d, 3-d, narrow 2-d) takes the
classic im2col; groups a batched matmul.
Each case also says which path it takes, so that no path goes untested when the rules move.
These are the numpy paths, the compiled kernel's fallback (UDO_BUILD_NATIVE_KERNELS=0 here):
the compiled kernel has its own tests (test_compiled_conv.py).
"""

from __future__ import annotations

import numpy as np
import pytest

from udo_build.kernels import blas, compiled
from udo_build.kernels.default import conv as conv_module
from udo_build.kernels.default._common import pad_spatial, window_pads
from udo_build.kernels.default.conv import TAP_GEMM_CHANNELS, Geometry, fused_conv, wide_pays


@pytest.fixture(autouse=True)
def numpy_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(compiled.SWITCH, "0")


def reference(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, z: np.ndarray | None,
              strides: list[int], dilations: list[int], pads: list[int], group: int,
              relu: bool) -> np.ndarray:
    """The convolution in float64, one tap at a time."""
    rank = x.ndim - 2
    begin, end, outs = window_pads("NOTSET", pads, x.shape[2:], w.shape[2:], strides, dilations)
    xp = pad_spatial(x.astype(np.float64), begin, end)
    n, m, cg = x.shape[0], w.shape[0], w.shape[1]
    y = np.zeros((n, m, *outs))
    for tap in np.ndindex(*w.shape[2:]):
        window = xp[(Ellipsis,) + tuple(slice(t * d, t * d + (o - 1) * s + 1, s) for t, d, o, s
                                        in zip(tap, dilations, outs, strides, strict=True))]
        for g in range(group):
            rows = slice(g * (m // group), (g + 1) * (m // group))
            y[:, rows] += np.einsum("mc,nc...->nm...", w[rows][(Ellipsis,) + tap],
                                    window[:, g * cg:(g + 1) * cg])
    y += 0 if b is None else b.reshape((-1,) + (1,) * rank)
    y += 0 if z is None else z
    return np.maximum(y, 0) if relu else y


# (input shape, weight shape, strides, dilations, pads, group, the path it takes)
CASES = [
    ((1, 8, 20, 20), (6, 8, 1, 1), [1, 1], [1, 1], [0, 0, 0, 0], 1, "1x1"),
    ((1, 8, 20, 21), (6, 8, 1, 1), [2, 3], [1, 1], [0, 0, 0, 0], 1, "1x1"),
    ((1, 3, 33, 35), (5, 3, 3, 3), [1, 1], [1, 1], [1, 1, 1, 1], 1, "wide rows"),
    ((2, 3, 60, 58), (4, 3, 7, 7), [1, 1], [1, 1], [3, 2, 1, 3], 1, "wide rows"),
    ((1, 5, 37, 41), (3, 5, 3, 2), [1, 1], [2, 3], [0, 2, 1, 0], 1, "wide rows"),
    ((2, 3, 60, 58), (4, 3, 7, 7), [2, 2], [1, 1], [3, 2, 1, 3], 1, "im2col"),  # strided
    ((1, TAP_GEMM_CHANNELS, 18, 17), (7, TAP_GEMM_CHANNELS, 3, 3), [1, 1], [1, 1],
     [1, 1, 1, 1], 1, "wide taps"),
    ((2, TAP_GEMM_CHANNELS + 3, 19, 20), (5, TAP_GEMM_CHANNELS + 3, 3, 3), [1, 1], [1, 1],
     [1, 0, 2, 1], 1, "wide taps"),
    ((1, TAP_GEMM_CHANNELS, 20, 19), (4, TAP_GEMM_CHANNELS, 2, 3), [1, 1], [2, 1],
     [0, 1, 0, 3], 1, "wide taps"),
    ((1, 4, 9, 9), (6, 4, 3, 3), [1, 1], [1, 1], [1, 1, 1, 1], 1, "im2col"),  # too narrow
    ((1, 3, 4, 4), (2, 3, 1, 1), [1, 1], [1, 1], [1, 0, 0, 1], 1, "im2col"),  # padded 1x1
    ((2, 3, 30), (4, 3, 3), [2], [1], [1, 2], 1, "im2col"),
    ((1, 2, 6, 20, 7), (3, 2, 3, 3, 3), [1, 1, 1], [1, 1, 1], [1, 0, 1, 1, 1, 0], 1, "im2col"),
    ((2, 8, 20, 20), (8, 2, 3, 3), [2, 2], [1, 1], [1, 1, 1, 1], 4, "groups"),
]


def _path(x_shape: tuple[int, ...], w_shape: tuple[int, ...], strides: list[int],
          dilations: list[int], pads: list[int], group: int) -> str:
    rank = len(x_shape) - 2
    begin, end, outs = window_pads("NOTSET", pads, x_shape[2:], w_shape[2:], strides, dilations)
    g = Geometry(tuple(w_shape[2:]), tuple(strides), tuple(dilations), begin, end, outs)
    if group > 1:
        return "groups"
    if wide_pays(x_shape[2:], g):
        return "wide taps" if x_shape[1] >= TAP_GEMM_CHANNELS else "wide rows"
    if all(k == 1 for k in w_shape[2:]) and not any(pads):
        return "1x1"
    assert rank in (1, 2, 3)
    return "im2col"


@pytest.mark.parametrize("case", CASES, ids=[f"{c[-1]}-{i}" for i, c in enumerate(CASES)])
@pytest.mark.parametrize("epilogue", ["plain", "bias-relu", "bias-addend", "addend-relu"])
def test_convolution_paths_match_a_float64_sum(case: tuple, epilogue: str,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blas, "DIRECT_MIN", 0)  # these small outputs too call BLAS directly
    x_shape, w_shape, strides, dilations, pads, group, path = case
    assert _path(x_shape, w_shape, strides, dilations, pads, group) == path
    rng = np.random.default_rng(len(x_shape) * 100 + w_shape[0])
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    b = rng.standard_normal(w_shape[0]).astype(np.float32) if "bias" in epilogue else None
    plain = reference(x, w, None, None, strides, dilations, pads, group, False)
    z = rng.standard_normal(plain.shape).astype(np.float32) if "addend" in epilogue else None
    relu = "relu" in epilogue
    y = fused_conv(x, w, b, z, activation="Relu" if relu else "", strides=strides,
                   dilations=dilations, pads=pads, group=group)
    expected = reference(x, w, b, z, strides, dilations, pads, group, relu)
    assert y.shape == expected.shape and y.dtype == np.float32
    assert y.flags.owndata and y.flags.c_contiguous
    np.testing.assert_allclose(y, expected, rtol=0, atol=2e-6 * np.abs(expected).max())


def test_wide_taps_are_deterministic_and_leave_the_inputs_alone() -> None:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((1, TAP_GEMM_CHANNELS, 24, 24)).astype(np.float32)
    w = rng.standard_normal((8, TAP_GEMM_CHANNELS, 3, 3)).astype(np.float32)
    z = rng.standard_normal((1, 8, 24, 24)).astype(np.float32)
    for array in (x, w, z):
        array.flags.writeable = False
    first = fused_conv(x, w, None, z, activation="Relu", pads=[1, 1, 1, 1])
    assert np.array_equal(first, fused_conv(x, w, None, z, activation="Relu", pads=[1, 1, 1, 1]))


def test_float64_and_float16_convolutions() -> None:
    """float64 goes through dgemm; float16 (no BLAS) through np.matmul."""
    rng = np.random.default_rng(2)
    for dtype, tolerance in ((np.float64, 1e-12), (np.float16, 2e-2)):
        x = rng.standard_normal((1, 3, 20, 20)).astype(dtype)
        w = rng.standard_normal((4, 3, 3, 3)).astype(dtype)
        b = rng.standard_normal(4).astype(dtype)
        y = fused_conv(x, w, b, pads=[1, 1, 1, 1])
        expected = reference(x, w, b, None, [1, 1], [1, 1], [1, 1, 1, 1], 1, False)
        assert y.dtype == dtype
        np.testing.assert_allclose(y, expected, atol=tolerance * np.abs(expected).max())


# -- gemm ----------------------------------------------------------------------------------------


def _operands(rng: np.random.Generator, dtype: type) -> list[tuple[np.ndarray, np.ndarray]]:
    a = rng.standard_normal((7, 5)).astype(dtype)
    b = rng.standard_normal((5, 9)).astype(dtype)
    wide_b = np.zeros((5, 12), dtype)
    wide_b[:, :9] = b
    return [(a, b), (np.ascontiguousarray(a.T).T, b), (a, np.ascontiguousarray(b.T).T),
            (a, wide_b[:, :9]), (np.ascontiguousarray(a.T).T, wide_b[:, :9])]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("direct", [True, False], ids=["blas", "fallback"])
def test_gemm_reads_transposes_and_leading_dimensions_in_place(
        dtype: type, direct: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blas, "DIRECT_MIN", 0)
    if not direct:
        monkeypatch.setattr(blas, "_library", lambda: {})
    elif not blas.direct():
        pytest.fail("numpy's OpenBLAS was not found among the loaded libraries: "
                    f"{blas.__doc__.splitlines()[0]}")
    rng = np.random.default_rng(3)
    for a, b in _operands(rng, dtype):
        expected = a.astype(np.float64) @ b.astype(np.float64)
        wide_out = np.full((7, 11), 7.0, dtype)
        out = blas.gemm(a, b, wide_out[:, :9])
        np.testing.assert_allclose(out, expected, rtol=1e-5)
        assert np.all(wide_out[:, 9:] == 7.0)  # the leading dimension is respected
        prefilled = np.ones((7, 9), dtype)
        blas.gemm(a, b, prefilled, beta=1.0)
        np.testing.assert_allclose(prefilled, expected + 1, rtol=1e-5)


def test_gemm_copies_nothing_it_can_read(monkeypatch: pytest.MonkeyPatch) -> None:
    """With beta 1, a transposed operand reaches the BLAS as a transpose flag, not through
    np.matmul; with beta 0, or an output smaller than DIRECT_MIN, np.matmul makes the call."""
    if not blas.direct():
        pytest.fail("numpy's OpenBLAS was not found among the loaded libraries")
    calls = []
    monkeypatch.setattr(blas, "_fallback", lambda *args: calls.append(args))
    monkeypatch.setattr(blas, "DIRECT_MIN", 63)
    rng = np.random.default_rng(4)
    for a, b in _operands(rng, np.float32):
        blas.gemm(a, b, np.zeros((7, 9), np.float32), beta=1.0)
    assert calls == []
    blas.gemm(np.ones((7, 5), np.float32)[:, ::2], np.ones((3, 9), np.float32),
              np.zeros((7, 9), np.float32), beta=1.0)  # no unit stride: the fallback
    blas.gemm(np.ones((7, 5), np.float32), np.ones((5, 9), np.float32),
              np.zeros((7, 9), np.float32))  # beta 0
    blas.gemm(np.ones((6, 5), np.float32), np.ones((5, 10), np.float32),
              np.zeros((6, 10), np.float32), beta=1.0)  # 60 < DIRECT_MIN elements
    assert len(calls) == 3


def test_fallback_keeps_the_convolution_exact(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(blas, "_library", lambda: {})
    monkeypatch.setattr(conv_module, "gemm", blas.gemm)
    x_shape, w_shape, strides, dilations, pads, group, _ = CASES[5]
    rng = np.random.default_rng(5)
    x = rng.standard_normal(x_shape).astype(np.float32)
    w = rng.standard_normal(w_shape).astype(np.float32)
    b = rng.standard_normal(w_shape[0]).astype(np.float32)
    y = fused_conv(x, w, b, activation="Relu", strides=strides, pads=pads)
    expected = reference(x, w, b, None, strides, dilations, pads, group, True)
    np.testing.assert_allclose(y, expected, atol=2e-6 * np.abs(expected).max())
