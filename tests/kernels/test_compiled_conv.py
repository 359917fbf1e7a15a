"""The float convolution's compiled kernel (udo_build/kernels/c/conv.c, called by
`udo_build.kernels.default.conv`) against a float64 sum over taps, on the geometries ONNX allows:
both orientations (rows for large images, cols for small ones), a 1x1 convolution read in place
and every other one through its phases (strides, dilations, pads on either side, cropping
negative pads), whole and partial tiles, one k block and several, every epilogue. Also: the
same bits whatever the vector width, packings made once, threads that convolve at once, and
the numpy path (UDO_BUILD_NATIVE_KERNELS=0) agreeing. Under UDO_BUILD_NO_SKIP=1 (CI) a host
without a C compiler fails here."""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from udo_build.kernels import compiled
from udo_build.kernels.default import conv as conv_module
from udo_build.kernels.default.conv import ConvWeights, fused_conv
from udo_build.kernels.default.pool import max_pool

from .test_conv_paths import reference

TOLERANCE = 2e-6  # max abs difference over max abs value


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[tuple[int, ...]]]:
    """The compiled library (skipped where none can be built), with a record of the
    convolutions it ran: (c, h, w, kh, kw, sh, sw, ho, wo, m, cols) each, cols 1 where the
    kernel ran it in the cols orientation."""
    monkeypatch.delenv(compiled.SWITCH, raising=False)
    lib = compiled.library()
    if lib is None:
        pytest.skip("no C compiler (or it failed): the compiled convolution cannot run here")
    seen: list[tuple[int, ...]] = []

    class Spy:
        def __getattr__(self, name: str) -> Any:
            return getattr(lib, name)

        def conv(self, *args: Any) -> int:
            numbers = list((ctypes.c_int64 * 14).from_address(args[1]))
            seen.append(tuple(numbers[0:7]) + tuple(numbers[11:14]) + (lib.conv_cols(args[1]),))
            return lib.conv(*args)

    monkeypatch.setattr(compiled, "library", lambda: Spy() if compiled.enabled() else None)
    yield seen


def _case(rng: np.random.Generator, big: bool) -> dict[str, Any] | None:
    """A random convolution that ONNX allows (None when the draw has no valid output)."""
    c = int(rng.integers(1, 40 if not big else 90))
    m = int(rng.integers(1, 80))
    kh, kw = (int(v) for v in rng.integers(1, 6, 2))
    sh, sw = (int(v) for v in rng.integers(1, 4, 2))
    dh, dw = (int(v) for v in rng.integers(1, 3, 2))
    size = (20, 70) if big else (1, 30)
    h, w = (int(v) for v in rng.integers(*size, 2))
    pads = [int(v) for v in rng.integers(-1, 4, 4)]
    if h + pads[0] + pads[2] < (kh - 1) * dh + 1 or w + pads[1] + pads[3] < (kw - 1) * dw + 1:
        return None
    if min(pads[0], pads[2]) < 0 and -min(pads[0], pads[2]) >= h:
        return None
    if min(pads[1], pads[3]) < 0 and -min(pads[1], pads[3]) >= w:
        return None
    return {"x": (int(rng.integers(1, 3)), c, h, w), "w": (m, c, kh, kw), "strides": [sh, sw],
            "dilations": [dh, dw], "pads": pads}


def _cases(count: int, seed: int, big: bool) -> list[dict[str, Any]]:
    rng = np.random.default_rng(seed)
    found: list[dict[str, Any]] = []
    while len(found) < count:
        case = _case(rng, big)
        if case is not None:
            found.append(case)
    return found


def _check(case: dict[str, Any], epilogue: str, rng: np.random.Generator) -> tuple[int, ...]:
    x = rng.standard_normal(case["x"]).astype(np.float32)
    w = rng.standard_normal(case["w"]).astype(np.float32)
    b = rng.standard_normal(case["w"][0]).astype(np.float32) if "bias" in epilogue else None
    attrs = {k: case[k] for k in ("strides", "dilations", "pads")}
    # the reference pads with zeros only: a negative pad crops its input first
    pads = case["pads"]
    cropped = x[:, :, max(0, -pads[0]):x.shape[2] - max(0, -pads[2]),
                max(0, -pads[1]):x.shape[3] - max(0, -pads[3])]
    kept = {**attrs, "pads": [max(0, p) for p in pads]}
    plain = reference(cropped, w, None, None, group=1, relu=False, **kept)
    z = rng.standard_normal(plain.shape).astype(np.float32) if "addend" in epilogue else None
    relu = "relu" in epilogue
    y = fused_conv(x, w, b, z, activation="Relu" if relu else "", packed=ConvWeights(w), **attrs)
    expected = reference(cropped, w, b, z, group=1, relu=relu, **kept)
    assert y.shape == expected.shape and y.dtype == np.float32 and y.flags.c_contiguous
    scale = max(float(np.abs(expected).max()), 1e-30)
    assert float(np.abs(y - expected).max()) <= TOLERANCE * scale, case
    return plain.shape


EPILOGUES = ["plain", "bias", "bias-relu", "addend", "bias-addend-relu"]


@pytest.mark.parametrize("big", [False, True], ids=["small images", "large images"])
@pytest.mark.parametrize("epilogue", EPILOGUES)
def test_random_geometries_match_a_float64_sum(big: bool, epilogue: str,
                                               calls: list[tuple[int, ...]]) -> None:
    rng = np.random.default_rng(11)
    for case in _cases(12 if big else 40, 100 + big + 10 * EPILOGUES.index(epilogue), big):
        _check(case, epilogue, rng)
    assert len(calls) >= (12 if big else 40)  # every image went through the kernel


# (input, weights, strides, dilations, pads, orientation): named shapes that pin down each
# branch; the orientation (1: cols) where AVX2 and AVX-512 hosts both choose it
NAMED = {
    "1x1 in place, rows": ((1, 64, 20, 20), (70, 64, 1, 1), [1, 1], [1, 1], [0, 0, 0, 0], 0),
    "1x1 in place, rows, few channels, k blocks":
        ((1, 200, 20, 20), (16, 200, 1, 1), [1, 1], [1, 1], [0, 0, 0, 0], 0),
    "1x1 in place, cols, k blocks, a partial chunk":
        ((1, 600, 7, 7), (124, 600, 1, 1), [1, 1], [1, 1], [0, 0, 0, 0], 1),
    "3x3 rows, k blocks": ((1, 70, 40, 33), (12, 70, 3, 3), [1, 1], [1, 1], [1, 1, 1, 1], 0),
    "3x3 cols, 28x28": ((1, 20, 28, 28), (64, 20, 3, 3), [1, 1], [1, 1], [1, 1, 1, 1], 1),
    "3x3 cols, k blocks, a partial chunk":
        ((1, 70, 7, 7), (124, 70, 3, 3), [1, 1], [1, 1], [1, 1, 1, 1], 1),
    "3x3 cols, slabs": ((1, 24, 40, 40), (256, 24, 3, 3), [1, 1], [1, 1], [1, 1, 1, 1], 1),
    "7x7 stride 2": ((1, 3, 64, 64), (64, 3, 7, 7), [2, 2], [1, 1], [3, 3, 3, 3], None),
    "7x7 stride 2, 96 channels":
        ((1, 3, 64, 64), (96, 3, 7, 7), [2, 2], [1, 1], [3, 3, 3, 3], None),
    "1x1 stride 2": ((1, 40, 30, 30), (20, 40, 1, 1), [2, 2], [1, 1], [0, 0, 0, 0], None),
    "3x3 stride 2": ((2, 33, 29, 31), (17, 33, 3, 3), [2, 2], [1, 1], [1, 1, 1, 1], None),
    "a narrow image": ((1, 5, 500, 3), (7, 5, 3, 3), [1, 1], [1, 1], [1, 1, 1, 1], None),
    "one pixel": ((1, 9, 1, 1), (4, 9, 1, 1), [1, 1], [1, 1], [0, 0, 0, 0], None),
    "cropping pads": ((1, 6, 20, 19), (5, 6, 3, 2), [1, 2], [2, 1], [-1, 2, 0, -1], None),
    "stride past kernel": ((1, 4, 25, 25), (3, 4, 2, 2), [5, 3], [1, 1], [0, 1, 2, 0], None),
}


@pytest.mark.parametrize("name", list(NAMED))
@pytest.mark.parametrize("epilogue", ["plain", "bias-addend-relu"])
def test_each_branch_matches_a_float64_sum(name: str, epilogue: str,
                                           calls: list[tuple[int, ...]]) -> None:
    x, w, strides, dilations, pads, cols = NAMED[name]
    _check({"x": x, "w": w, "strides": strides, "dilations": dilations, "pads": pads}, epilogue,
           np.random.default_rng(3))
    assert len(calls) == x[0]
    if cols is not None and "avx2" in compiled.machine():
        assert {call[-1] for call in calls} == {cols}, "the branch ran in the other orientation"


def test_relu_keeps_nan_and_inputs_are_left_alone(calls: list[tuple[int, ...]]) -> None:
    rng = np.random.default_rng(4)
    x = rng.standard_normal((1, 8, 16, 16)).astype(np.float32)
    x[0, 3, 5, 5] = np.nan
    w = rng.standard_normal((6, 8, 3, 3)).astype(np.float32)
    z = rng.standard_normal((1, 6, 16, 16)).astype(np.float32)
    copies = [a.copy() for a in (x, w, z)]
    for a in (x, w, z):
        a.flags.writeable = False
    y = fused_conv(x, w, None, z, activation="Relu", pads=[1, 1, 1, 1])
    assert np.isnan(y[0, :, 4:7, 4:7]).all() and not np.isnan(y[0, :, :3]).any()
    assert (y[~np.isnan(y)] >= 0).all()
    for a, copy in zip((x, w, z), copies, strict=True):
        np.testing.assert_array_equal(a, copy)


def test_strided_views_and_a_column_bias_are_read_as_given(
        calls: list[tuple[int, ...]]) -> None:
    rng = np.random.default_rng(5)
    big = rng.standard_normal((1, 10, 40, 40)).astype(np.float32)
    x = big[:, ::2, ::2, 1::2]  # no axis contiguous
    w = rng.standard_normal((7, 5, 3, 3)).astype(np.float32)
    b = rng.standard_normal((7, 2)).astype(np.float32)[:, 0]
    z = rng.standard_normal((1, 7, 20, 40)).astype(np.float32)[..., ::2]
    y = fused_conv(x, w, b, z, pads=[1, 1, 1, 1])
    expected = reference(x, w, b, z, [1, 1], [1, 1], [1, 1, 1, 1], 1, False)
    assert float(np.abs(y - expected).max()) <= TOLERANCE * float(np.abs(expected).max())


def test_weights_are_packed_once_per_orientation(calls: list[tuple[int, ...]],
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    lib = compiled.library()
    packs: list[int] = []
    original = lib.conv_pack

    class Counting:
        def __getattr__(self, name: str) -> Any:
            return getattr(lib, name)

        def conv_pack(self, *args: Any) -> None:
            packs.append(args[3])
            original(*args)

    monkeypatch.setattr(compiled, "library", Counting)
    rng = np.random.default_rng(6)
    w = rng.standard_normal((18, 8, 3, 3)).astype(np.float32)
    weights = ConvWeights(w)
    large = rng.standard_normal((1, 8, 40, 40)).astype(np.float32)
    small = rng.standard_normal((1, 8, 1, 1)).astype(np.float32)
    for x in (large, large, small, small, large):
        fused_conv(x, w, pads=[1, 1, 1, 1], packed=weights)
    assert packs == [0, 1]  # rows once, cols once
    assert [call[-1] for call in calls] == [0, 0, 1, 1, 0]
    assert all(not p.flags.writeable for p in weights._packings.values())


def test_threads_convolving_at_once_get_their_own_scratch(
        calls: list[tuple[int, ...]]) -> None:
    rng = np.random.default_rng(8)
    jobs = []
    for c, size in ((16, 40), (32, 9), (8, 64), (64, 12)):
        x = rng.standard_normal((1, c, size, size)).astype(np.float32)
        w = rng.standard_normal((24, c, 3, 3)).astype(np.float32)
        jobs.append((x, w, fused_conv(x, w, pads=[1, 1, 1, 1])))
    failures: list[str] = []
    barrier = threading.Barrier(len(jobs))

    def work(x: np.ndarray, w: np.ndarray, expected: np.ndarray) -> None:
        barrier.wait()
        for _ in range(20):
            if not np.array_equal(fused_conv(x, w, pads=[1, 1, 1, 1]), expected):
                failures.append(f"{x.shape} differs")
                return

    threads = [threading.Thread(target=work, args=job) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert failures == []


def test_the_numpy_path_agrees(calls: list[tuple[int, ...]],
                               monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(9)
    x = rng.standard_normal((2, 24, 33, 30)).astype(np.float32)
    w = rng.standard_normal((20, 24, 3, 3)).astype(np.float32)
    b = rng.standard_normal(20).astype(np.float32)
    native = fused_conv(x, w, b, activation="Relu", pads=[1, 0, 1, 2], strides=[1, 2])
    assert len(calls) == 2
    monkeypatch.setenv(compiled.SWITCH, "0")
    numpy = fused_conv(x, w, b, activation="Relu", pads=[1, 0, 1, 2], strides=[1, 2])
    assert len(calls) == 2  # the switch turned the kernel off
    assert float(np.abs(native - numpy).max()) <= TOLERANCE * float(np.abs(numpy).max())


def test_what_the_kernel_does_not_take_runs_in_numpy(calls: list[tuple[int, ...]]) -> None:
    rng = np.random.default_rng(10)
    x64 = rng.standard_normal((1, 4, 9, 9))
    w64 = rng.standard_normal((4, 4, 3, 3))
    fused_conv(x64, w64, pads=[1, 1, 1, 1])  # float64
    x = x64.astype(np.float32)
    fused_conv(x, w64.astype(np.float32)[:, :2], group=2, pads=[1, 1, 1, 1])  # groups
    fused_conv(x[:, :, 0], w64.astype(np.float32)[..., 0], pads=[1, 1])  # 1-d
    assert calls == []


def test_avx2_and_avx512_builds_give_the_same_bits(tmp_path: Path,
                                                   calls: list[tuple[int, ...]],
                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    """Each output is one chain of fused multiply-adds over k in a fixed order: the widest
    vectors this host has and 8-float ones give the same bits (on a host without AVX-512 the
    two builds are the same code)."""
    if "avx2" not in compiled.machine() or "fma" not in compiled.machine():
        pytest.skip("the host has no AVX2 with FMA")
    rng = np.random.default_rng(12)
    shapes = [(64, 56, 3, 1), (256, 14, 1, 1), (48, 7, 3, 1), (3, 60, 7, 2)]
    inputs = []
    for c, size, k, s in shapes:
        x = rng.standard_normal((1, c, size, size)).astype(np.float32)
        w = rng.standard_normal((40, c, k, k)).astype(np.float32)
        inputs.append((x, w, [k // 2] * 4, [s, s]))
    native = [fused_conv(x, w, activation="Relu", pads=p, strides=s) for x, w, p, s in inputs]
    wrapper = tmp_path / "cc-avx2"
    cc = compiled.compiler()
    assert cc is not None
    wrapper.write_text(f'#!/bin/sh\nexec {" ".join(cc)} "$@" -mno-avx512f\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("CC", str(wrapper))
    monkeypatch.setenv(compiled.CACHE, str(tmp_path / "cache"))
    monkeypatch.setattr(compiled, "_LOADED", {})
    monkeypatch.setattr(conv_module, "_library", _narrow_library)
    narrow = [fused_conv(x, w, activation="Relu", pads=p, strides=s) for x, w, p, s in inputs]
    assert os.listdir(tmp_path / "cache")  # the narrow build was made and used
    for a, b in zip(native, narrow, strict=True):
        np.testing.assert_array_equal(a, b)


def test_the_portable_build_matches_a_float64_sum(tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    """A host without AVX (another CPU kind) builds the portable vectors: 4 floats, a multiply
    then an add, an 8-channel cols chunk transposed lane by lane. Both orientations, a partial
    chunk, slabs, the rows tiles read in place and grouped, every epilogue term: each within
    the tolerance of a float64 sum, and its MaxPool the numpy path's values."""
    if "avx" not in compiled.machine():
        pytest.skip("the host is no x86 with AVX: its own build is the portable one")
    cc = compiled.compiler()
    if cc is None:
        pytest.skip("no C compiler: the compiled convolution cannot run here")
    wrapper = tmp_path / "cc-portable"
    wrapper.write_text(f'#!/bin/sh\nexec {" ".join(cc)} "$@" -mno-avx -mno-avx2 -mno-fma '
                       '-mno-avx512f\n')
    wrapper.chmod(0o755)
    monkeypatch.delenv(compiled.SWITCH, raising=False)
    monkeypatch.setenv("CC", str(wrapper))
    monkeypatch.setenv(compiled.CACHE, str(tmp_path / "cache"))
    monkeypatch.setattr(compiled, "_LOADED", {})
    lib = compiled.library()
    assert lib is not None and os.listdir(tmp_path / "cache")  # the portable build, loaded
    rng = np.random.default_rng(13)
    seen = set()
    for x, w, pads, strides in [((1, 64, 20, 20), (30, 64, 1, 1), [0] * 4, [1, 1]),
                                ((1, 200, 7, 7), (30, 200, 1, 1), [0] * 4, [1, 1]),
                                ((1, 24, 40, 40), (60, 24, 3, 3), [1] * 4, [1, 1]),
                                ((2, 3, 30, 30), (13, 3, 3, 3), [0] * 4, [2, 2]),
                                ((1, 70, 7, 7), (124, 70, 3, 3), [1] * 4, [1, 1])]:
        case = {"x": x, "w": w, "strides": strides, "dilations": [1, 1], "pads": pads}
        _check(case, "bias-addend-relu", rng)
        geometry = ConvWeights(np.zeros(w, np.float32)).call(
            np.zeros(x, np.float32), None, None, 1, None, "NOTSET", pads, strides, None)
        seen.add(lib.conv_cols(geometry.address))
    assert seen == {0, 1}  # both orientations ran
    x = rng.standard_normal((1, 5, 33, 35)).astype(np.float32)
    x[0, 2, 7, 9] = np.nan
    got = max_pool(x, kernel_shape=[3, 3], strides=[2, 2])
    monkeypatch.setenv(compiled.SWITCH, "0")
    np.testing.assert_array_equal(got, max_pool(x, kernel_shape=[3, 3], strides=[2, 2]))


def _narrow_library() -> Any:
    """conv_module._library, loading the library through compiled._build_and_load (the
    test's CC and cache) instead of the spy."""
    return compiled._build_and_load()


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.uint16, np.int16])
def test_integer_inputs_centered_as_the_kernel_reads_them(dtype: type) -> None:
    """udo_conv_int (`run_compiled(..., zp=)`, the integer path's input): the integers less
    their zero point, made float32 as the phases (or a dense image's copy) are made, give the
    bits of the same kernel on x - zp converted beforehand: dense 1x1 images in both
    orientations, strided and padded 3x3 ones, a batch of two."""
    lib = compiled.library()
    if lib is None:
        pytest.skip("no C compiler (or it failed): the compiled convolution cannot run here")
    info = np.iinfo(dtype)
    rng = np.random.default_rng(np.dtype(dtype).itemsize * 10 + info.min % 7)
    zp = int(rng.integers(info.min, info.max)) // 2
    cases = [((2, 24, 20, 20), 1, [1, 1], [0, 0, 0, 0], 20, 0),
             ((1, 400, 7, 7), 1, [1, 1], [0] * 4, 64, 1),
             ((1, 16, 19, 21), 3, [2, 2], [1, 1, 1, 1], 20, None),
             ((2, 8, 40, 40), 3, [1, 1], [1, 0, 2, 1], 20, None)]
    for shape, k, strides, pads, m, cols in cases:
        x = rng.integers(info.min, int(info.max) + 1, shape).astype(dtype)
        w = rng.integers(-127, 128, (m, shape[1], k, k)).astype(np.int8)
        b = rng.integers(-1000, 1000, m).astype(np.float32)
        weights = ConvWeights(w)
        attrs = {"strides": strides, "pads": pads}
        got = conv_module.run_compiled(lib, x, weights, b, zp=zp, **attrs)
        centered = (x.astype(np.int64) - zp).astype(np.float32)
        expected = conv_module.run_compiled(lib, centered, weights, b, **attrs)
        assert got.dtype == np.float32 and np.array_equal(got, expected), (shape, k)
        if cols is not None and "avx2" in compiled.machine():
            assert lib.conv_cols(weights.call(x, b, None, 1, None, "NOTSET", pads, strides,
                                              None).address) == cols, shape
        assert float(np.abs(got).max()) > 1000
