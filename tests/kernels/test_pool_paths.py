"""Pooling's window reductions: maxima reduce the leading spatial axis first, sums the trailing
one; a window one pixel wide on an axis reduces nothing there; the result is always a fresh
array (AveragePool divides it in place; a caller may write into it)."""

from __future__ import annotations

import numpy as np
import pytest

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
                                            ([1, 1], [1, 1]), ([1, 1], [2, 3])])
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
