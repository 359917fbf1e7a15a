"""The int8 path's compiled passes (udo_build/kernels/compiled.py, runtime/integer/passes.py and
fuse.py) against its numpy passes on the same inputs: the same bytes, and the compiled pass
really ran. Under UDO_BUILD_NO_SKIP=1 (CI) a host without a C compiler fails here."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from udo_build.ir import Graph, Model, Node
from udo_build.ir.encodings import Encoding
from udo_build.kernels import compiled
from udo_build.runtime.integer import QuantizedSession, fixed, passes
from udo_build.runtime.integer import conv as conv_kernel
from udo_build.runtime.integer.fixed import Requant

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "quant"))
from qhelpers import encode, f32  # noqa: E402

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """The compiled library (skipped where none can be built), with a record of its calls."""
    monkeypatch.delenv(compiled.SWITCH, raising=False)
    if compiled.library() is None:
        pytest.skip("no C compiler (or it failed): the compiled passes cannot run here")
    seen: list[str] = []
    for name in ("requantize", "pair_lookup", "im2col"):
        monkeypatch.setattr(compiled, name, _spy(getattr(compiled, name), name, seen))
    yield seen


def _spy(fn: Callable[..., Any], name: str, seen: list[str]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        pair = name == "requantize" and len(args) > 8 and args[8] is not None
        seen.append(name + ("+lookup" if pair else ""))
        return fn(*args, **kwargs)
    return call


def _both(fn: Callable[[], Any], monkeypatch: pytest.MonkeyPatch) -> tuple[Any, Any]:
    native = fn()
    with monkeypatch.context() as m:
        m.setenv(compiled.SWITCH, "0")
        numpy = fn()
    return native, numpy


def _cases() -> Iterator[tuple[str, np.ndarray, Requant, Any]]:
    rng = np.random.default_rng(7)
    m = 24
    real = rng.uniform(2.0 ** -14, 2.0 ** -9, m)
    for enc in (Encoding(8, 0.05, -3), Encoding(8, 0.05, 0, signed=True),
                Encoding(16, 0.01, -30000), Encoding(16, 0.01, 0, signed=True)):
        conv = Requant.make(real, 2 ** 22, enc, proven=True).reshaped(-1, 1, 1)
        acc = rng.integers(-2 ** 21, 2 ** 21, (1, m, 18, 40)).astype(np.float32)
        yield f"conv {enc.bitwidth}-bit signed={enc.signed}", acc, conv, None
        yield f"int32 conv {enc.bitwidth}-bit signed={enc.signed}", acc.astype(np.int32), \
            conv, None  # the integer kernel's accumulator, where its epilogue does not run
        wide_rows = rng.integers(-2 ** 21, 2 ** 21, (1, m, 18, 43)).astype(np.float32)
        yield "tap view", wide_rows[..., :40], conv, None  # junk columns skipped in place
        bias = rng.integers(-2 ** 20, 2 ** 20, (m, 1, 1))
        yield "float64 + int64 bias", acc.astype(np.float64), conv, bias
    gemm = Requant.make(real, 2 ** 22, Encoding(8, 0.05, -128), (0.0, None)).reshaped(-1, 1)
    yield "gemm rows + float32 bias", rng.integers(-2 ** 15, 2 ** 15, (m, 700)).astype(
        np.float32), gemm, rng.integers(-2 ** 12, 2 ** 12, (m, 1)).astype(np.float32)
    ties = Requant.make(0.5, 2 ** 20, Encoding(8, 1.0, -128))  # acc x 1/2: every tie
    ties_acc = np.tile(np.arange(-600, 600, dtype=np.float32), 15).reshape(1, 3, 6000)
    yield "ties", ties_acc, ties, 7.0


@pytest.mark.parametrize("case", list(_cases()), ids=lambda c: c[0])
def test_the_compiled_requantization_gives_the_numpy_bytes(
        case: tuple[str, np.ndarray, Requant, Any], calls: list[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    _, acc, requant, offset = case
    native, numpy = _both(lambda: requant.apply(acc, offset), monkeypatch)
    assert calls == ["requantize"]
    assert native.dtype == numpy.dtype == requant.dtype and native.shape == numpy.shape
    assert np.array_equal(native, numpy)
    assert len(np.unique(numpy)) > 20  # the values spread over the range: not all clamped


def test_layouts_the_c_loop_does_not_take_run_in_numpy(calls: list[str]) -> None:
    requant = Requant.make(np.full(4, 2.0 ** -10), 2 ** 20, Encoding(8, 0.1, -128))
    acc = np.ones((2, 4, passes.NATIVE_MIN), np.float32)  # a batch of 2 before the channels
    uint8 = np.dtype(np.uint8)
    factor = requant.factor.reshape(-1, 1)
    assert passes.requantized(acc, factor, None, (0, 255), 128, uint8) is None
    assert passes.requantized(acc.astype(np.int32), requant.factor, None, (0, 255), 128,
                              uint8) is None
    small = np.ones((1, 4, passes.NATIVE_MIN // 4 - 1), np.float32)  # numpy's is cheaper
    assert passes.requantized(small, factor, None, (0, 255), 128, uint8) is None
    assert passes.requantized(acc[:1], factor, None, (0, 255), 128, uint8) is not None
    assert calls == ["requantize"]


def test_the_compiled_pair_lookup_gives_the_numpy_bytes(
        calls: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(3)
    a = rng.integers(0, 256, (1, 8, 48, 48), dtype=np.uint8)
    b = rng.integers(-128, 128, a.shape).astype(np.int8)
    for table in (rng.integers(0, 256, 65536).astype(np.uint8),
                  rng.integers(-2 ** 15, 2 ** 15, 65536).astype(np.int16)):
        native, numpy = _both(lambda t=table: fixed.lookup(t, a, b), monkeypatch)
        assert np.array_equal(native, numpy) and native.dtype == table.dtype
        assert np.array_equal(numpy, table[a.astype(np.int64) * 256 + b.view(np.uint8)])
    assert calls == ["pair_lookup", "pair_lookup"]


@pytest.mark.parametrize("dtype,zp", [(np.uint8, 128), (np.int8, 0), (np.uint16, 30000),
                                      (np.int16, -5)])
@pytest.mark.parametrize("geometry", [
    ((3, 3), (1, 1), (1, 1), [1, 1]),  # a padded 3x3
    ((7, 7), (2, 2), (1, 1), [3, 3]),  # ResNet's stem
    ((1, 1), (2, 2), (1, 1), [0, 0]),  # a strided 1x1
    ((3, 2), (2, 3), (2, 1), [2, 0]),  # dilated, uneven strides
    ((3, 3), (1, 1), (1, 1), [-1, 2]),  # a start pad cropping the input
], ids=["3x3", "7x7s2", "1x1s2", "dilated", "cropped"])
def test_the_compiled_im2col_gives_the_numpy_columns(
        dtype: type, zp: int, geometry: tuple[Any, ...], calls: list[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    kernel, strides, dilations, begin = geometry
    info = np.iinfo(dtype)
    x = np.random.default_rng(5).integers(info.min, info.max, (2, 3, 11, 13), endpoint=True
                                          ).astype(dtype)
    outs = [(size + 2 * max(b, 0) - (k - 1) * d - 1) // s + 1 - (1 if b < 0 else 0)
            for size, k, s, d, b in zip(x.shape[2:], kernel, strides, dilations, begin,
                                        strict=True)]
    def columns() -> np.ndarray:
        return conv_kernel._columns(x, zp, np.dtype(np.float32), kernel, strides, dilations,
                                    begin, outs)
    native, numpy = _both(columns, monkeypatch)
    assert calls == ["im2col"]
    # (numpy's columns of a 1x1 are (N, C, oh, ow): the same values in the same order)
    assert native.dtype == numpy.dtype == np.float32 and native.size == numpy.size
    assert np.array_equal(native.view(np.uint32), numpy.reshape(native.shape).view(np.uint32))
    assert (numpy != 0).mean() > 0.5
    assert not any(b > 0 for b in begin) or (numpy == 0).any()  # the padding's zeros


def _residual_model(channels: int, conv_first: bool) -> tuple[Model, dict[str, np.ndarray]]:
    """x -> Conv 3x3 -> Relu -> Conv 1x1 -> c; Add(c, x) (or Add(x, c)) -> Relu -> y."""
    rng = np.random.default_rng(channels)
    shape = (1, channels, 16, 24) if channels >= 64 else (1, channels, 48, 48)
    weights = {"w1": rng.normal(0, 0.1, (channels, channels, 3, 3)).astype(np.float32),
               "b1": rng.normal(0, 0.1, channels).astype(np.float32),
               "w2": rng.normal(0, 0.2, (channels, channels, 1, 1)).astype(np.float32),
               "b2": rng.normal(0, 0.1, channels).astype(np.float32)}
    nodes = (Node.make("c1", "Conv", ["x", "w1", "b1"], ["t1"], {"pads": [1, 1, 1, 1]}),
             Node.make("r1", "Relu", ["t1"], ["a"]),
             Node.make("c2", "Conv", ["a", "w2", "b2"], ["c"]),
             Node.make("add", "Add", ["c", "x"] if conv_first else ["x", "c"], ["s"]),
             Node.make("r2", "Relu", ["s"], ["y"]))
    model = Model(Graph("residual", (f32("x", shape),), (f32("y"),), nodes), weights)
    feeds = [{"x": rng.normal(0, 1, shape).astype(np.float32)} for _ in range(3)]
    return model, feeds


@pytest.mark.parametrize("channels", [8, 64])  # 64: the 3x3 takes the tap GEMMs
@pytest.mark.parametrize("conv_first", [True, False])
@pytest.mark.parametrize("products", ["dot", "float"])
def test_a_residual_add_fused_into_its_convolution_gives_the_same_bytes(
        channels: int, conv_first: bool, products: str, calls: list[str],
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The fused step's bytes are the two steps' and the numpy passes': its requantization and
    the Add computed after the float products (`passes.requantized`), or, where this host's
    build has VNNI, in the epilogue of the integer kernel (the dot products)."""
    if products == "float":
        monkeypatch.setattr(conv_kernel, "_dot_products", lambda *args, **kwargs: None)
    dots: list[bool] = []
    dot_products = conv_kernel._dot_products

    def spied(*args: Any, **kwargs: Any) -> Any:
        found = dot_products(*args, **kwargs)
        if found is not None:
            dots.append(found[1])  # requantized in the kernel's epilogue
        return found

    monkeypatch.setattr(conv_kernel, "_dot_products", spied)
    model, feeds = _residual_model(channels, conv_first)
    session = QuantizedSession(encode(model, feeds))
    fused = [s.label for s in session.plan(("y",)).steps]
    apart = [s.label for s in session.plan(("y", "c")).steps]  # c asked for: not fused
    assert any(" + integer::Add" in label for label in fused) and len(fused) == len(apart) - 1
    assert not any(" + " in label for label in apart)
    in_kernel = products == "dot" and bool(compiled.library().qconv_isa)
    for feed in feeds:
        calls.clear()
        dots.clear()
        native, numpy = _both(lambda f=feed: session.run_quantized(f, ["y"])["y"], monkeypatch)
        assert ("requantize+lookup" in calls) != in_kernel
        assert dots == ([True, True] if in_kernel else [])  # both convolutions, the Add too
        separate = session.run_quantized(feed, ["y", "c"])["y"]
        assert native.dtype == np.uint8 and np.array_equal(native, numpy)
        assert np.array_equal(native, separate)
        assert len(np.unique(native)) > 20


def test_the_float_kernel_runs_int8_convolutions_whose_product_is_one_float32_chunk(
        calls: list[str], float_products: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """One float32 chunk (every partial sum below 2^24): the float path's compiled
    convolution forms the same integers as BLAS (`conv._compiled`); a plan built after the
    session loaded has its weights packed already (workers forked after it share them)."""
    model, feeds = _residual_model(64, True)
    session = QuantizedSession(encode(model, feeds))
    plan = session.plan(("y", "c"))
    convs = [s.kwargs["packed"] for s in plan.steps if "packed" in s.kwargs]
    assert convs and all(len(p.bounds) == 1 for p in convs)
    # packed as the plan was built where the input's shape is known (x's; this hand-made
    # graph gives no shape to the others: they pack on their first run)
    assert conv_kernel._FLOAT_WEIGHTS[convs[0]][0][2]._packings
    ran: list[int] = []
    run_compiled = conv_kernel.run_compiled

    def spied(*args: Any, **kwargs: Any) -> np.ndarray:
        ran.append(1)
        return run_compiled(*args, **kwargs)

    monkeypatch.setattr(conv_kernel, "run_compiled", spied)
    for feed in feeds:
        ran.clear()
        native, numpy = _both(lambda f=feed: session.run_quantized(f, ["y", "c"]), monkeypatch)
        assert len(ran) == len(convs)  # the switch off: none (the numpy products)
        assert all(conv_kernel._FLOAT_WEIGHTS[p][0][2]._packings for p in convs)
        for name in ("y", "c"):
            assert np.array_equal(native[name], numpy[name])


def test_a_plan_packs_the_weights_of_the_kernel_that_will_run_them(calls: list[str]) -> None:
    """Built where the input's shape is known, the plan packs each convolution's weights for
    the kernel that will run them: the integer kernel's int8 packing where this host's build
    has it (VNNI or AVX2), and no float32 copy (four times the int8 weights); else the float
    kernel's."""
    model, feeds = _residual_model(64, True)
    session = QuantizedSession(encode(model, feeds))
    plan = session.plan(("y", "c"))
    first = next(s.kwargs["packed"] for s in plan.steps if "packed" in s.kwargs)
    dots = bool(compiled.library().qconv_isa)
    assert (first in conv_kernel._DOT_WEIGHTS) == dots
    assert (first in conv_kernel._FLOAT_WEIGHTS) != dots
    if dots:
        packing = conv_kernel._DOT_WEIGHTS[first].packing
        assert packing.dtype == np.int8 and packing.size >= 64 * 64 * 9


@pytest.mark.parametrize("conv_first", [True, False])
def test_a_fused_add_computes_its_table_where_the_arithmetic_gives_every_byte(
        conv_first: bool, calls: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The fused Add's table as arithmetic (`passes.sum_form`, checked on all 65536 pairs):
    the fused step computes the bytes the lookup gives; a table that is not that sum (one
    byte changed, or a Mul's) keeps the lookup."""
    from udo_build.runtime.integer import eltwise

    model, feeds = _residual_model(8, conv_first)
    session = QuantizedSession(encode(model, feeds))
    plan = session.plan(("y",))
    fused = [s for s in plan.steps if " + integer::Add" in s.label]
    assert len(fused) == 1 and fused[0].kwargs["sum"] is not None
    add = next(s for s in session.plan(("y", "c")).steps if s.fn is eltwise.add)
    table, requant, zps = add.kwargs["table"], add.kwargs["requant"], add.kwargs["zero_points"]
    q_dtype = fused[0].kwargs["requant"].dtype
    assert passes.sum_form(table, requant, zps, q_dtype, conv_first) is not None
    changed = table.copy()
    changed[12345] ^= 1
    assert passes.sum_form(changed, requant, zps, q_dtype, conv_first) is None
    every = np.arange(256, dtype=np.uint8)
    larger = np.maximum.outer(every, every).reshape(-1)  # a table of no sum
    assert passes.sum_form(larger, requant, zps, q_dtype, conv_first) is None
    step = fused[0]
    for feed in feeds:
        env = dict(plan.constants)
        env.update(session.run_quantized(feed, [n for n in step.inputs if n and n not in env]))
        args = [env[n] if n else None for n in step.inputs]
        computed = step.fn(*args, **step.kwargs)
        calls.clear()
        looked_up = step.fn(*args, **{**step.kwargs, "sum": None})
        assert "requantize+lookup" in calls
        assert np.array_equal(computed, looked_up) and len(np.unique(computed)) > 20


@pytest.mark.parametrize("channels,kernel,split", [(128, 3, True), (1600, 1, True),
                                                   (2, 23, False)],
                         ids=["3x3", "1x1", "no channel split"])
def test_a_product_of_several_float32_chunks_runs_by_ranges_of_channels(
        calls: list[str], float_products: None, monkeypatch: pytest.MonkeyPatch, channels: int,
        kernel: int, split: bool) -> None:
    """Weights whose product needs several float32 chunks: the compiled convolution runs once
    per range of input channels whose bound stays below 2^24 (`exact.float32_parts`), and the
    requantized bytes are those of the BLAS chunks; where one channel alone passes the bound,
    no range can, and the BLAS chunks run."""
    from udo_build.runtime.integer.exact import F32_LIMIT, pack

    rng = np.random.default_rng(channels)
    m = 16
    signs = [-127, 127, 126, -126] if split else [127, 126]  # one channel alone too large
    w = rng.choice(np.array(signs, np.int8), (m, channels, kernel, kernel))
    size = 12 if split else 30  # every window inside the image: its sum near the mean
    x = rng.integers(0, 256, (1, channels, size, size)).astype(np.uint8)
    b = rng.integers(-2 ** 20, 2 ** 20, m).astype(np.int32)
    packed = pack(w.reshape(1, m, -1), 255, (-3, 252))
    assert len(packed.bounds) > 1 and packed.partial_bound >= F32_LIMIT
    typical = np.sqrt(w[0].size) * 127 * 128  # |sum| of random signs: the spread of y
    if not split:  # weights of one sign: the bias takes the mean off, the spread is x's
        b = -(w.reshape(m, -1).sum(axis=1, dtype=np.int64) * 124).astype(np.int32)
        typical = np.sqrt(w[0].size) * 127 * 74
    requant = Requant.make(rng.uniform(20, 60, m) / typical, packed.acc_bound + 2 ** 20,
                           Encoding(8, 0.05, -128), proven=True).reshaped(-1, 1, 1)
    ran: list[tuple[int, ...]] = []
    run_compiled = conv_kernel.run_compiled

    def spied(lib: Any, source: np.ndarray, *args: Any, **kwargs: Any) -> np.ndarray:
        ran.append(source.shape)
        return run_compiled(lib, source, *args, **kwargs)

    monkeypatch.setattr(conv_kernel, "run_compiled", spied)
    pads = [kernel // 2 if split else 0] * 4

    def run() -> np.ndarray:
        return conv_kernel.conv(x, w, b, x_zero_point=3, requant=requant, packed=packed,
                                pads=pads)

    native, numpy = _both(run, monkeypatch)
    assert np.array_equal(native, numpy) and len(np.unique(native)) > 20
    if split:
        assert len(ran) >= len(packed.bounds) and sum(shape[1] for shape in ran) == channels
    else:
        assert ran == []


def test_the_library_is_compiled_once_by_processes_starting_together(tmp_path: Path,
                                                                     calls: list[str]) -> None:
    script = ("from udo_build.kernels import compiled; lib = compiled.library(); "
              "print(lib.path if lib else 'none')")
    env = {**os.environ, compiled.CACHE: str(tmp_path / "cache"), "PYTHONPATH": str(REPO)}
    env.pop(compiled.SWITCH, None)
    procs = [subprocess.Popen([sys.executable, "-c", script], env=env, stdout=subprocess.PIPE,
                              text=True) for _ in range(3)]
    paths = {p.communicate(timeout=120)[0].strip() for p in procs}
    assert all(p.returncode == 0 for p in procs)
    built = sorted(p.name for p in (tmp_path / "cache").iterdir())
    assert len(paths) == 1 and Path(paths.pop()).name in built
    assert [n for n in built if n.endswith(".so")] == [n for n in built if not n.endswith(
        ".lock")]  # one library, no temporary sibling left
    assert len([n for n in built if n.endswith(".so")]) == 1


def test_a_failed_compile_warns_once_and_leaves_the_numpy_passes(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    broken = tmp_path / "cc"
    broken.write_text("#!/bin/sh\n[ \"$1\" = --version ] && { echo broken-cc 1; exit 0; }\n"
                      "echo 'passes.c:1:1: error: no compiler here' >&2; exit 1\n")
    broken.chmod(0o755)
    monkeypatch.setenv("CC", str(broken))
    monkeypatch.setenv(compiled.CACHE, str(tmp_path / "cache"))
    monkeypatch.delenv(compiled.SWITCH, raising=False)
    monkeypatch.setattr(compiled, "_LOADED", {})
    with pytest.warns(RuntimeWarning, match="passes.c:1:1: error: no compiler here"):
        assert compiled.library() is None
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert compiled.library() is None  # no second warning, no second compile
    requant = Requant.make(2.0 ** -4, 2 ** 20, Encoding(8, 0.1, -128))
    assert np.array_equal(requant.apply(np.arange(-50.0, 50.0)),
                          np.clip(np.rint(np.arange(-50.0, 50.0) / 16) + 128, 0, 255))
    assert not any(p.suffix == ".so" for p in (tmp_path / "cache").iterdir())
