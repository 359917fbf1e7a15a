"""The int8 path's integer convolution (c/qconv.c, through runtime/integer/conv.py's
`_dot_products`): int32 sums against an int64 oracle for every kind of geometry, up to the 2^31
bound it checks; its epilogue's bytes those of the compiled requantization and of a fused Add's
computed table; where it runs and where it refuses. Each on this host's build and on the builds
of the other CPU kinds this host can run: the portable lanes of a CPU without AVX2, AVX2's pairs
of 16-bit values where this host has VNNI (else the host's build is that one), 256-bit AVX-VNNI
where this host has both widths, and 512-bit VNNI without AMX's tiles where this host has them
(channels in multiples of 64 run on the tiles there). Under UDO_BUILD_NO_SKIP=1 (CI) a host
without a C compiler fails here."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from udo_build.ir.encodings import Encoding
from udo_build.kernels import compiled
from udo_build.kernels.default._common import window_pads
from udo_build.runtime.integer import conv as conv_kernel
from udo_build.runtime.integer import passes
from udo_build.runtime.integer.exact import pack
from udo_build.runtime.integer.fixed import Requant
from udo_build.runtime.integer.fuse import LookedUp

_FLAGS = compiled.machine().split()
_OTHER_BUILDS = {  # name: the flags that make it on this host
    # -mno-avx takes AVX2, AVX-512 and AVX-VNNI with it (the flags an older GCC knows)
    **({"portable": "-mno-avx"} if "avx" in _FLAGS else {}),
    **({"avx-vnni": "-mno-avx512f"} if {"avx_vnni", "avx512_vnni"} <= set(_FLAGS) else {}),
    **({"avx2": "-mno-avx512f" + (" -mno-avxvnni" if "avx_vnni" in _FLAGS else "")}
       if "avx2" in _FLAGS and ("avx_vnni" in _FLAGS or "avx512_vnni" in _FLAGS) else {}),
    **({"vnni-512": "-mno-amx-tile -mno-amx-int8"} if {"amx_int8", "avx512_vnni"} <= set(_FLAGS)
       else {}),
}
BUILDS = ["host", *_OTHER_BUILDS]


_STUB = """#include <stddef.h>
#define STUB __attribute__((visibility("default"))) int
STUB udo_conv(void) { return 2; }
STUB udo_conv_int(void) { return 2; }
STUB udo_conv_pack(void) { return 0; }
STUB udo_conv_packed_size(void) { return 0; }
STUB udo_conv_cols(void) { return 0; }
STUB udo_conv_onto_addend(void) { return 0; }
STUB udo_maxpool(void) { return 2; }
"""


@pytest.fixture(scope="module")
def libraries(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """This host's library, and the other builds: c/qconv.c and c/passes.c (the requantization
    the epilogue is checked against) compiled with this host's flags and the build's, the float
    kernels stubbed (they are not what these tests run, and take longest to compile)."""
    with pytest.MonkeyPatch.context() as m:
        m.delenv(compiled.SWITCH, raising=False)
        host = compiled.library()
        if host is None:
            pytest.skip("no C compiler (or it failed): the compiled kernels cannot run here")
    found = {"host": host}
    cc = compiled.compiler()
    assert cc is not None
    sources = [str(s) for s in compiled.SOURCES if s.name in ("passes.c", "qconv.c")]
    for name, flags in _OTHER_BUILDS.items():
        folder = tmp_path_factory.mktemp(name)
        stub = folder / "stub.c"
        stub.write_text(_STUB)
        out = folder / "kernels.so"
        done = subprocess.run([*cc, *compiled.FLAGS, *flags.split(), *sources, str(stub), "-o",
                               str(out), "-lm"], capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        found[name] = compiled._open(out)
    assert found.get("portable") is None or found["portable"].qconv_isa == 0
    assert found.get("avx-vnni") is None or found["avx-vnni"].qconv_isa == 256
    assert found.get("avx2") is None or found["avx2"].qconv_isa == 1
    assert found.get("vnni-512") is None or found["vnni-512"].qconv_isa == 512
    yield found


def _oracle(x: np.ndarray, zp: int, w: np.ndarray, b: np.ndarray | None,
            strides: tuple[int, int], dilations: tuple[int, int], begin: list[int],
            outs: list[int]) -> np.ndarray:
    """conv(x - zp, w) + b in int64, tap by tap over a zero-padded copy."""
    n, c, h, wd = x.shape
    m, _, kh, kw = w.shape
    room = 2 * max(kh * dilations[0], kw * dilations[1], *map(abs, begin)) + 2
    xp = np.zeros((n, c, h + 2 * room, wd + 2 * room), np.int64)
    xp[:, :, room:room + h, room:room + wd] = x.astype(np.int64) - zp
    y = np.zeros((n, m, *outs), np.int64)
    for ky in range(kh):
        for kx in range(kw):
            r0, c0 = room - begin[0] + ky * dilations[0], room - begin[1] + kx * dilations[1]
            patch = xp[:, :, r0:r0 + (outs[0] - 1) * strides[0] + 1:strides[0],
                       c0:c0 + (outs[1] - 1) * strides[1] + 1:strides[1]]
            y += np.einsum("mc,nchw->nmhw", w[:, :, ky, kx].astype(np.int64), patch)
    return y if b is None else y + b.astype(np.int64).reshape(1, -1, 1, 1)


def _case(rng: np.random.Generator, c: int, m: int, size: tuple[int, int],
          kernel: tuple[int, int], strides: tuple[int, int], dilations: tuple[int, int],
          pads: list[int], signed: bool, batch: int = 1, bias: bool = True) -> dict[str, Any]:
    dtype = np.int8 if signed else np.uint8
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max + 1, (batch, c, *size)).astype(dtype)
    w = rng.integers(-128, 128, (m, c, *kernel)).astype(np.int8)
    begin, _, outs = window_pads("NOTSET", pads, size, kernel, strides, dilations)
    return {"x": x, "zp": int(rng.integers(info.min, info.max + 1)), "w": w,
            "b": rng.integers(-10 ** 6, 10 ** 6, m).astype(np.int64) if bias else None,
            "strides": strides, "dilations": dilations, "begin": begin, "outs": outs}


def _named_cases() -> Iterator[tuple[str, dict[str, Any]]]:
    rng = np.random.default_rng(2026)
    yield "1x1 dense", _case(rng, 64, 24, (14, 14), (1, 1), (1, 1), (1, 1), [0] * 4, False)
    yield "3x3 pad 1", _case(rng, 17, 13, (9, 11), (3, 3), (1, 1), (1, 1), [1] * 4, False)
    yield "3x3 stride 2", _case(rng, 8, 7, (15, 16), (3, 3), (2, 2), (1, 1), [1] * 4, True)
    yield "7x7 stride 2, 3 channels", _case(rng, 3, 10, (30, 31), (7, 7), (2, 2), (1, 1),
                                            [3] * 4, False)
    yield "1x1 stride 2", _case(rng, 12, 9, (13, 14), (1, 1), (2, 2), (1, 1), [0] * 4, True)
    yield "dilated, uneven pads", _case(rng, 5, 6, (12, 10), (3, 2), (1, 3), (2, 2),
                                        [2, 0, 1, 3], False)
    yield "cropping pads", _case(rng, 6, 5, (11, 12), (2, 3), (1, 1), (1, 1), [-1, 2, 0, -2],
                                 True)
    yield "one channel, one output", _case(rng, 1, 1, (5, 5), (3, 3), (1, 1), (1, 1), [1] * 4,
                                           True)
    yield "k blocks (576 words)", _case(rng, 256, 8, (6, 6), (3, 3), (1, 1), (1, 1), [1] * 4,
                                        False)
    yield "narrow rows, many per vector", _case(rng, 9, 7, (3, 2), (1, 1), (1, 1), (1, 1),
                                                [0] * 4, True)
    yield "kernel past the input", _case(rng, 4, 3, (2, 2), (5, 5), (1, 1), (1, 1), [2] * 4,
                                         False)
    yield "batch of 2, no bias", _case(rng, 10, 11, (8, 9), (3, 3), (1, 2), (1, 1), [1] * 4,
                                       True, batch=2, bias=False)
    # channels in multiples of 64: AMX tiles where the build and the CPU have them
    yield "tiles: 3x3, 45 outputs", _case(rng, 64, 45, (9, 10), (3, 3), (1, 1), (1, 1), [1] * 4,
                                          False)
    yield "tiles: 3x3 stride 2", _case(rng, 128, 33, (15, 14), (3, 3), (2, 2), (1, 1), [1] * 4,
                                       True)
    yield "tiles: 1x1, a 7x7 grid", _case(rng, 192, 70, (7, 7), (1, 1), (1, 1), (1, 1), [0] * 4,
                                          False, batch=2)
    yield "tiles: dilated, cropped", _case(rng, 64, 16, (12, 13), (3, 3), (1, 1), (2, 2),
                                           [1, -1, 2, 0], True)
    rng = np.random.default_rng(2027)  # the random cases' own: named ones added do not move them
    for i in range(40):
        kernel = (int(rng.integers(1, 5)), int(rng.integers(1, 5)))
        dilations = (int(rng.integers(1, 3)),) * 2
        size = tuple(int(rng.integers((k - 1) * d + 1, 24))
                     for k, d in zip(kernel, dilations, strict=True))
        yield f"random {i}", _case(rng, int(rng.integers(1, 40)), int(rng.integers(1, 30)),
                                   size, kernel, (int(rng.integers(1, 4)),) * 2, dilations,
                                   [int(rng.integers(0, 3)) for _ in range(4)],
                                   bool(rng.integers(0, 2)), batch=int(rng.integers(1, 3)))


CASES = list(_named_cases())


def _run(lib: Any, case: dict[str, Any], requant: Any = None) -> tuple[np.ndarray, bool] | None:
    w = case["w"]
    packed = pack(w.reshape(1, w.shape[0], -1), 255)
    return conv_kernel._dot_products(case["x"], case["zp"], w, case["b"], packed, 1,
                                     case["begin"], case["outs"], case["strides"],
                                     case["dilations"], requant, lib=lib)


@pytest.mark.parametrize("build", BUILDS)
def test_the_int32_sums_are_exact_for_every_geometry(build: str,
                                                     libraries: dict[str, Any]) -> None:
    for name, case in CASES:
        if min(case["outs"]) <= 0:
            continue
        found = _run(libraries[build], case)
        assert found is not None and not found[1], name
        want = _oracle(case["x"], case["zp"], case["w"], case["b"], case["strides"],
                       case["dilations"], case["begin"], case["outs"])
        assert found[0].dtype == np.int32
        np.testing.assert_array_equal(found[0], want, err_msg=name)


@pytest.mark.parametrize("build", BUILDS)
def test_the_sums_are_exact_up_to_the_int32_bound_and_refused_past_it(
        build: str, libraries: dict[str, Any]) -> None:
    """Weights and a bias whose bound is 2^31 - 1: the largest output is that, exactly
    (partial sums wrap on the way, the result does not); one more unit of bias is refused."""
    rng = np.random.default_rng(31)
    c = 66_300  # 127 x 255 x c is a step below 2^31
    w = np.where(rng.random((2, c, 1, 1)) < 0.5, 127, -127).astype(np.int8)
    w[0] = 127
    x = rng.integers(0, 256, (1, c, 2, 3)).astype(np.uint8)
    x[0, :, 0, 0] = 255  # channel 0's output there: 127 x 255 x c, the bound
    x[0, :, 1, 2] = np.where(w[1, :, 0, 0] < 0, 255, 0)  # channel 1's there: far below 0
    room = 2 ** 31 - 1 - 127 * 255 * c
    assert 0 < room < 10 ** 6
    case = {"x": x, "zp": 0, "w": w, "b": np.array([room, -room], np.int64),
            "strides": (1, 1), "dilations": (1, 1), "begin": [0, 0], "outs": [2, 3]}
    found = _run(libraries[build], case)
    assert found is not None
    want = _oracle(x, 0, w, case["b"], (1, 1), (1, 1), [0, 0], [2, 3])
    assert want.max() == 2 ** 31 - 1
    np.testing.assert_array_equal(found[0], want)
    case["b"] = np.array([room + 1, -room], np.int64)
    assert _run(libraries[build], case) is None


def _requants(m: int) -> Iterator[tuple[str, Requant]]:
    rng = np.random.default_rng(5)
    real = rng.uniform(2.0 ** -14, 2.0 ** -9, m)
    for enc, clamp in ((Encoding(8, 0.05, -3), (None, None)), (Encoding(8, 0.05, -128),
                                                                (0.0, None)),
                       (Encoding(8, 0.05, 0, signed=True), (None, None))):
        found = Requant.make(real, 2 ** 27, enc, clamp, proven=True)  # above every case
        assert found is not None and not found.wide
        yield f"{enc.bitwidth}-bit zp {enc.offset} signed={enc.signed} clamp={clamp}", \
            found.reshaped(-1, 1, 1)
    one = Requant.make(2.0 ** -10, 2 ** 27, Encoding(8, 0.05, -100), proven=True)
    assert one is not None
    yield "one factor", one


@pytest.mark.parametrize("build", BUILDS)
def test_the_epilogue_gives_the_compiled_requantization_bytes(
        build: str, libraries: dict[str, Any]) -> None:
    """Requantized in the kernel: the bytes `Requant.apply` gives the int32 sums (ties to
    even included), and with a fused 8-bit Add computed (`passes.SumForm`) the bytes of the
    compiled requantization's sum rows, for both input orders and signs."""
    lib = libraries[build]
    rng = np.random.default_rng(9)
    for label, case in CASES[:12]:
        acc = _run(lib, case)
        assert acc is not None
        raw = acc[0].copy()
        for name, requant in _requants(case["w"].shape[0]):
            found = _run(lib, case, requant)
            assert found is not None and found[1], (label, name)
            np.testing.assert_array_equal(found[0], requant.apply(raw), err_msg=f"{label} {name}")
            for q_first in (True, False):
                other = rng.integers(0, 256, raw.shape).astype(np.uint8)
                f0, f1 = (0.5, 0.75) if q_first else (0.75, 0.5)
                form = passes.SumForm(np.array([f0, f1, -3.5, -128.0, 127.0, 128.0]),
                                      int(rng.integers(0, 4)))
                table = np.zeros(1 << 16, np.uint8)
                fused = _run(lib, case, LookedUp(requant, table, other, q_first, form))
                assert fused is not None and fused[1], (label, name)
                want = np.concatenate([_sum_rows(raw[i:i + 1], requant, table,
                                                 other[i:i + 1], q_first, form)
                                       for i in range(raw.shape[0])])
                np.testing.assert_array_equal(fused[0], want, err_msg=f"{label} {name}")


def _sum_rows(raw: np.ndarray, requant: Requant, table: np.ndarray, other: np.ndarray,
              q_first: bool, form: passes.SumForm) -> np.ndarray:
    """passes.requantized's sum rows (compiled) for one image: its rows repeated past
    NATIVE_MIN (below it the numpy passes run), and the first copy kept (each element is
    computed alone)."""
    times = -(-passes.NATIVE_MIN // raw.size)
    big = np.concatenate([raw] * times, axis=-1)
    others = np.concatenate([other] * times, axis=-1)
    out = passes.requantized(big, requant.factor, None, (requant.lo, requant.hi),
                             requant.zero_point, requant.dtype, (table, others, q_first), form)
    assert out is not None
    return out[..., :raw.shape[-1]]


def _spy_on_dots(monkeypatch: pytest.MonkeyPatch, module: Any) -> list[bool]:
    """Whether each call of `module`'s _dot_products ran the integer kernel, in order."""
    ran: list[bool] = []
    dot_products = conv_kernel._dot_products

    def spied(*args: Any, **kwargs: Any) -> Any:
        found = dot_products(*args, **kwargs)
        ran.append(found is not None)
        return found

    monkeypatch.setattr(module, "_dot_products", spied)
    return ran


def test_where_the_kernel_runs_and_where_it_refuses(libraries: dict[str, Any],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the integer Conv: this host's build runs it where it has VNNI, and the bytes
    are the float products' (the float kernel, or BLAS); 16-bit input, int16 weights, groups,
    a zero point outside a byte, and a bias that is no integer take the float products."""
    lib = libraries["host"]
    rng = np.random.default_rng(3)
    x = rng.integers(0, 256, (1, 16, 10, 10)).astype(np.uint8)
    w = rng.integers(-128, 128, (8, 16, 3, 3)).astype(np.int8)
    b = rng.integers(-5000, 5000, 8).astype(np.int64)
    requant = next(r for _, r in _requants(8))
    dot_products = conv_kernel._dot_products
    ran = _spy_on_dots(monkeypatch, conv_kernel)
    dots = conv_kernel.conv(x, w, b, x_zero_point=77, requant=requant, pads=[1] * 4)
    assert ran == [bool(lib.qconv_isa)]
    monkeypatch.setattr(conv_kernel, "_dot_products", lambda *args, **kwargs: None)
    np.testing.assert_array_equal(dots, conv_kernel.conv(x, w, b, x_zero_point=77,
                                                         requant=requant, pads=[1] * 4))
    packed = pack(w.reshape(1, 8, -1), 255)
    refused = {
        "16-bit input": (x.astype(np.uint16), 77, w, b, 1),
        "int16 weights": (x, 77, w.astype(np.int16), b, 1),
        "groups": (x, 77, w, b, 2),
        "zero point past a byte": (x, 256, w, b, 1),
        "a bias that is no integer": (x, 77, w, b + 0.5, 1),
    }
    for name, (xi, zp, wi, bi, group) in refused.items():
        assert dot_products(xi, zp, wi, bi, packed, group, [1, 1], [10, 10], (1, 1), (1, 1),
                            lib=lib) is None, name


def test_the_library_cache_key_names_the_integer_kernel() -> None:
    """The library is rebuilt when qconv.c changes: it is one of the sources its key hashes."""
    assert any(Path(s).name == "qconv.c" for s in compiled.SOURCES)


@pytest.mark.parametrize("rows", [1, 7, 300])
def test_gemm_and_matmul_by_weights_run_as_1x1_convolutions(
        rows: int, libraries: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """Gemm and MatMul by int8 weights take the integer kernel as a 1x1 convolution (K
    channels, the rows its pixels) where this host's build runs it; the bytes are the float
    products' (the kernel off), with a bias, per-channel factors and both weight layouts."""
    from udo_build.runtime.integer import gemm as gemm_kernel

    rng = np.random.default_rng(rows)
    k, n = 192, 70  # 192 channels: AMX's tiles where the host has them
    a = rng.integers(0, 256, (rows, k)).astype(np.uint8)
    w_kn = rng.integers(-128, 128, (k, n)).astype(np.int8)
    c = rng.integers(-50_000, 50_000, n).astype(np.int64)
    requant = next(r for _, r in _requants(n)).reshaped(-1, 1)
    ran = _spy_on_dots(monkeypatch, gemm_kernel)
    runs = {
        "Gemm": lambda: gemm_kernel.gemm(a, np.ascontiguousarray(w_kn.T), c, a_zero_point=9,
                                         requant=requant, transB=1),
        "MatMul": lambda: gemm_kernel.matmul(a, w_kn, a_zero_point=9, requant=requant),
    }
    dots = {name: run() for name, run in runs.items()}
    assert ran == [bool(libraries["host"].qconv_isa)] * 2
    monkeypatch.setattr(conv_kernel, "_dot_library", lambda: None)
    for name, run in runs.items():
        np.testing.assert_array_equal(dots[name], run(), err_msg=name)
        assert dots[name].shape == (rows, n)
