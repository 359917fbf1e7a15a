"""Pooling's window reductions: maxima reduce the leading spatial axis first, sums the trailing
one; a window one pixel wide on an axis reduces nothing there; the result is always a fresh
array (AveragePool divides it in place; a caller may write into it)."""

from __future__ import annotations

import numpy as np
import pytest

from udo_build.kernels.default._common import window_pads
from udo_build.kernels.default.pool import average_pool, max_pool


def _windows(x: np.ndarray, kernel: list[int], strides: list[int]) -> np.ndarray:
    """(N, C, Ho, Wo, kh, kw): every window of an unpadded 2-d input."""
    outs = [(n - k) // s + 1 for n, k, s in zip(x.shape[2:], kernel, strides, strict=True)]
    windows = np.empty((*x.shape[:2], *outs, *kernel), x.dtype)
    for i, j in np.ndindex(*outs):
        windows[:, :, i, j] = x[:, :, i * strides[0]:i * strides[0] + kernel[0],
                                j * strides[1]:j * strides[1] + kernel[1]]
    return windows


@pytest.mark.parametrize("kernel,strides", [([3, 3], [2, 2]), ([1, 3], [1, 2]), ([3, 1], [2, 1]),
                                            ([1, 1], [1, 1]), ([1, 1], [2, 3]),
                                            ([11, 12], [1, 1])])  # one window: the input
def test_pools_match_their_windows_and_own_their_result(kernel: list[int],
                                                        strides: list[int]) -> None:
    x = np.random.default_rng(0).standard_normal((1, 3, 11, 12)).astype(np.float32)
    x.flags.writeable = False
    windows = _windows(x, kernel, strides)
    y = max_pool(x, kernel_shape=kernel, strides=strides)
    assert np.array_equal(y, windows.max(axis=(-2, -1)))
    mean = average_pool(x, kernel_shape=kernel, strides=strides)
    np.testing.assert_allclose(mean, windows.mean(axis=(-2, -1)), rtol=1e-6, atol=1e-7)
    for result in (y, mean):
        assert result.flags.writeable and not np.shares_memory(result, x)


def _geometries(count: int) -> list[dict]:
    rng = np.random.default_rng(1)
    found: list[dict] = []
    while len(found) < count:
        h, w = (int(v) for v in rng.integers(1, 20, 2))
        kh, kw = (int(v) for v in rng.integers(1, 5, 2))
        dh, dw = (int(v) for v in rng.integers(1, 3, 2))
        pads = [min(int(p), k - 1) for p, k in zip(rng.integers(0, 3, 4), [kh, kw, kh, kw],
                                                      strict=True)]
        if h + pads[0] + pads[2] < (kh - 1) * dh + 1 or w + pads[1] + pads[3] < (kw - 1) * dw + 1:
            continue
        auto_pad = ("NOTSET", "SAME_UPPER", "SAME_LOWER", "VALID")[int(rng.integers(0, 4))]
        case = {"kernel_shape": [kh, kw], "strides": [int(v) for v in rng.integers(1, 4, 2)],
                "dilations": [dh, dw], "ceil_mode": int(rng.integers(0, 2)),
                "auto_pad": auto_pad, **({"pads": pads} if auto_pad == "NOTSET" else {})}
        try:  # a window VALID padding cannot hold is refused by both paths
            window_pads(auto_pad, case.get("pads"), (h, w), (kh, kw), case["strides"],
                        (dh, dw), case["ceil_mode"])
        except ValueError:
            continue
        found.append({"shape": (int(rng.integers(1, 3)), int(rng.integers(1, 5)), h, w), **case})
    return found


def _both_paths(monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """A function of (x, case) giving MaxPool's compiled result and the numpy path's, and the
    list it appends to each time c/pool.c really ran. Under UDO_BUILD_NO_SKIP=1 (CI) a host
    without a C compiler fails here."""
    from udo_build.kernels import compiled

    monkeypatch.delenv(compiled.SWITCH, raising=False)
    lib = compiled.library()
    if lib is None:
        pytest.skip("no C compiler (or it failed): the compiled MaxPool cannot run here")
    ran: list[int] = []

    class Spy:
        def __getattr__(self, name: str):  # type: ignore[no-untyped-def]
            return getattr(lib, name)

        def maxpool(self, *args):  # type: ignore[no-untyped-def]
            ran.append(1)
            return lib.maxpool(*args)

    def both(x: np.ndarray, case: dict) -> tuple[np.ndarray, np.ndarray]:
        with monkeypatch.context() as m:
            m.setenv(compiled.SWITCH, "0")
            expected = max_pool(x, **case)
        with monkeypatch.context() as m:
            m.setattr(compiled, "library", Spy)
            got = max_pool(x, **case)
        assert got.shape == expected.shape and got.dtype == np.float32
        return got, expected

    return both, ran


def test_the_compiled_max_pool_gives_the_numpy_values(monkeypatch: pytest.MonkeyPatch) -> None:
    """c/pool.c against the numpy windows on random geometries (pads, ceil_mode, auto_pad,
    dilations, strides past the kernel) and NaNs: the same values, NaN where numpy has one;
    and it really ran."""
    both, ran = _both_paths(monkeypatch)
    rng = np.random.default_rng(2)
    for case in _geometries(150):
        x = rng.standard_normal(case.pop("shape")).astype(np.float32)
        if rng.random() < 0.3:
            x.flat[int(rng.integers(0, x.size))] = np.nan
        np.testing.assert_array_equal(*both(x, case))
    assert len(ran) == 150


@pytest.mark.parametrize("width", [15, 16, 17, 31, 33, 111])
def test_three_whole_rows_at_once_keep_every_nan(monkeypatch: pytest.MonkeyPatch,
                                                 width: int) -> None:
    """3-high windows over rows of at least one block (16) read three whole rows in one pass,
    its last block overlapping the one before, noting NaNs as it reads: NaNs in the first and
    last columns and rows, inside a block and in the overlap, in some planes only; strides 1
    to 3, with and without pads."""
    both, ran = _both_paths(monkeypatch)
    rng = np.random.default_rng(width)
    shape = (2, 3, 9, width)
    spots = [(0, 0), (0, width - 1), (8, 0), (8, width - 1), (4, width // 2), (3, width - 2),
             (5, max(width - 17, 0))]
    for strides in ([1, 1], [2, 2], [3, 2], [2, 3]):
        for pads in ([0, 0, 0, 0], [1, 1, 1, 1], [0, 1, 2, 0]):
            case = {"kernel_shape": [3, 3], "strides": strides, "pads": pads}
            x = rng.standard_normal(shape).astype(np.float32)
            got, expected = both(x, case)
            np.testing.assert_array_equal(got, expected)
            for row, column in spots:
                spotted = x.copy()
                spotted[1, int(rng.integers(0, 3)), row, column] = np.nan
                got, expected = both(spotted, case)
                assert np.isnan(expected).any() or strides != [1, 1]
                np.testing.assert_array_equal(got, expected)
    assert len(ran) == 4 * 3 * (1 + len(spots))
