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
