"""relu_into (the Relu kernel and the convolutions' activation): contiguous data of any size goes
through the row-of-zeros maximum for its whole 1024-element rows and the scalar one for the rest;
every element must equal numpy's maximum(x, 0), NaN included, in place or not."""

from __future__ import annotations

import numpy as np
import pytest

from udo_build.kernels.default._common import relu_into


@pytest.mark.parametrize("size", [0, 1, 1023, 1024, 1025, 3 * 1024, 3 * 55 * 55])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_relu_into_equals_maximum_on_every_element(size: int, dtype: type) -> None:
    x = (np.random.default_rng(size).standard_normal(size) * 3).astype(dtype)
    x[::97] = np.nan
    x[1::89] = -0.0
    expected = np.maximum(x, 0)
    got = relu_into(x.reshape(1, -1), np.empty((1, size), dtype))
    assert np.array_equal(got.reshape(-1), expected, equal_nan=True)
    inplace = x.copy()
    assert relu_into(inplace, inplace) is inplace
    assert np.array_equal(inplace, expected, equal_nan=True)


def test_relu_into_strided_input() -> None:
    x = np.random.default_rng(1).standard_normal((40, 60)).astype(np.float32)[:, ::2]
    assert np.array_equal(relu_into(x, np.empty(x.shape, np.float32)), np.maximum(x, 0))
