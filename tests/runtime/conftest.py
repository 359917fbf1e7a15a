"""Fixtures of the runtime's tests."""

from __future__ import annotations

import pytest

from udo_build.kernels import compiled


@pytest.fixture(params=["compiled", "numpy"])
def kernel_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test twice: with the compiled kernels (skipped where none can be built; CI fails
    there) and with the numpy path (UDO_BUILD_NATIVE_KERNELS=0)."""
    if request.param == "numpy":
        monkeypatch.setenv(compiled.SWITCH, "0")
    else:
        monkeypatch.delenv(compiled.SWITCH, raising=False)
        if compiled.library() is None:
            pytest.skip("no C compiler (or it failed): the compiled convolution cannot run here")
    return str(request.param)


@pytest.fixture
def float_products(monkeypatch: pytest.MonkeyPatch) -> None:
    """The int8 path's convolutions without the integer dot-product kernel (c/qconv.c), as on
    a CPU without VNNI: the float path's compiled kernel and the BLAS products, which this
    host's own build would otherwise not run."""
    from udo_build.runtime.integer import conv

    monkeypatch.setattr(conv, "_dot_library", lambda: None)
