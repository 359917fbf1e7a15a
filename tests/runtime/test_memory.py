"""The runtimes hold a model's weights once (issue 28, item 1): the integer session keeps
quantized weights at their integer width (BLAS operands made per product, by slices of rows,
the same bits), and a bundle read from the store's parts reads a weight when first asked for,
so a step that never reads a bundle's weights holds none of them."""

from __future__ import annotations

import pickle
import tracemalloc
from typing import Any

import numpy as np
import pytest

from udo_build.ir import Graph, Model, Node, TensorInfo
from udo_build.ir.bundle import Bundle, BundleWeights, MemoryReader, read_bundle
from udo_build.ir.encodings import Encoding
from udo_build.ir.qmodel import QuantizedModel
from udo_build.runtime.integer import exact
from udo_build.runtime.integer.exact import pack, product
from udo_build.runtime.integer.session import QuantizedSession

RNG = np.random.default_rng(2028)
WIDTH = 1024
LAYERS = 4


def traced(work: Any) -> tuple[Any, int, int]:
    """work()'s result, the memory it kept and the most it held at once (numpy's arrays are
    traced)."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = work()
        now, peak = tracemalloc.get_traced_memory()
        return result, now - before, peak - before
    finally:
        tracemalloc.stop()


def quantized_chain() -> QuantizedModel:
    """LAYERS MatMuls by WIDTH x WIDTH weights, 16-bit activations, 8-bit weights per channel
    (their products take float64 operands)."""
    nodes, weights, params, acts, x = [], {}, {}, {}, "x"
    acts["x"] = Encoding(16, 4.0 / 65535, -32768)
    for i in range(LAYERS):
        w = (RNG.standard_normal((WIDTH, WIDTH)) / 32).astype(np.float32)
        weights[f"w{i}"] = w
        params[f"w{i}"] = [Encoding(8, float(s) / 127, 0, signed=True)
                           for s in np.abs(w).max(axis=0)]
        nodes.append(Node(f"mm{i}", "MatMul", (x, f"w{i}"), (f"h{i}",)))
        x = f"h{i}"
        acts[x] = Encoding(16, 8.0 / 65535, -32768)
    graph = Graph("chain", (TensorInfo("x", "float32", (1, WIDTH)),),
                  (TensorInfo(x, "float32", (1, WIDTH)),), tuple(nodes))
    return QuantizedModel(Model(graph, weights), acts, params, {})


def test_the_integer_session_holds_weights_at_their_integer_width() -> None:
    qmodel = quantized_chain()
    floats = LAYERS * WIDTH * WIDTH * 4
    session, kept, peak = traced(lambda: QuantizedSession(qmodel))
    # int8 codes: a quarter of the float weights (before: float64 operands, twice them, and
    # each weight dequantized, once more), and temporaries of no more than a weight at once
    assert kept < floats / 4 + (1 << 20), kept
    assert peak < floats / 4 + 3 * WIDTH * WIDTH * 4, peak
    x = RNG.uniform(-2, 2, (1, WIDTH)).astype(np.float32)
    _, _, running = traced(lambda: session.run({"x": x}))
    assert running < WIDTH * WIDTH * 8 + (1 << 20), running  # one weight as float64 at most


def test_the_integer_session_streams_what_run_gives_as_it_is_made() -> None:
    """`stream` hands each requested tensor over as its step makes it (the feeds first), the
    values `run` gives (the quant report compares them with the float session's one at a time,
    udo_build.quant.report)."""
    session = QuantizedSession(quantized_chain())
    x = RNG.uniform(-2, 2, (1, WIDTH)).astype(np.float32)
    names = ["h2", "x", "h0", f"h{LAYERS - 1}"]
    ran = session.run({"x": x}, names)
    streamed = list(session.stream({"x": x}, names))
    assert [name for name, _ in streamed] == ["x", "h0", "h2", f"h{LAYERS - 1}"]
    for name, value in streamed:
        assert value.dtype == ran[name].dtype and np.array_equal(value, ran[name]), name


def test_a_product_by_slices_of_rows_gives_the_same_bits(
        monkeypatch: pytest.MonkeyPatch) -> None:
    w = RNG.integers(-127, 128, (1, 300, 257), dtype=np.int8)
    cols = RNG.integers(-32768, 32768, (257, 5)).astype(np.float64)
    packed = pack(w, 65535)
    assert packed.dtype == np.float64 and packed.operands[0].dtype == np.int8
    whole = product(packed, cols)
    monkeypatch.setattr(exact, "OPERAND_ROWS", 257 * 7)  # slices of 7 rows
    sliced = product(packed, cols)
    assert sliced.dtype == whole.dtype and np.array_equal(sliced, whole)
    assert np.array_equal(whole, w[0].astype(np.int64) @ cols.astype(np.int64))


class PartsLike:
    """Byte ranges of a bundle file that is not in memory (as the store's parts reader)."""

    def __init__(self, data: bytes) -> None:
        self.data, self.size, self.reads = data, len(data), 0

    def read(self, offset: int, size: int) -> bytes:
        self.reads += 1
        return self.data[offset:offset + size]


def test_a_bundle_read_from_parts_reads_each_weight_when_first_asked_for() -> None:
    weights = {f"w{i}": RNG.standard_normal((512, 512)).astype(np.float32) for i in range(3)}
    graph = Graph("g", (TensorInfo("x", "float32", (1, 512)),),
                  (TensorInfo("y", "float32", (1, 512)),),
                  (Node("mm", "MatMul", ("x", "w0"), ("y",)),))
    data = Bundle(Model(graph, weights)).to_bytes()
    bundle, kept, _ = traced(lambda: read_bundle(PartsLike(data), "parts"))
    assert kept < 512 * 512 * 4, kept  # checked, none of them kept
    assert isinstance(bundle.model.weights, BundleWeights) and "w1" in bundle.model.weights
    assert sorted(bundle.model.weights) == ["w0", "w1", "w2"]
    assert np.array_equal(bundle.model.weights["w1"], weights["w1"])
    assert all(np.array_equal(a, weights[n]) for n, a in pickle.loads(pickle.dumps(
        bundle.model.weights)).items())  # another process gets them all
    assert Bundle(bundle.model).to_bytes() == data  # written again from the parts: the same
    # a bundle in memory (bytes or a mapped file) has its weights as views, as before
    assert isinstance(read_bundle(MemoryReader(data)).model.weights, dict)
