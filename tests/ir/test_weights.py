"""Weights that stay in their files (udo_build.ir.weights, issue 28 item 1): a bundle of
STREAM_FROM bytes of weights or more, read from the store, maps each large weight instead of
reading and keeping it; folding keeps them there; the float and integer sessions give their
pages back after each step; and nothing computed changes.

The thresholds are lowered here (a streaming model of a few MiB), so the tests take seconds."""

from __future__ import annotations

import mmap
from pathlib import Path

import numpy as np
import pytest

from udo_build.ir import Graph, Model, Node, TensorInfo
from udo_build.ir import bundle as bundle_module
from udo_build.ir import weights as weights_module
from udo_build.ir.bundle import Bundle, bundle_segments, read_bundle
from udo_build.ir.weights import Overlay, release, spill, streams
from udo_build.store import Store
from udo_build.store.parts import PartsReader, layout_of

RNG = np.random.default_rng(2028)
WIDTH = 1024  # float32 4 MiB, a part (OWN_PART) of its own; its 8-bit integers 1 MiB (SPILL_FROM)


def _rss_mib() -> float:
    with open("/proc/self/status") as fh:
        line = next(x for x in fh if x.startswith("VmRSS:"))
    return int(line.split()[1]) / 1024


@pytest.fixture
def low(monkeypatch: pytest.MonkeyPatch) -> None:
    """A model of 4 MiB of weights or more streams."""
    monkeypatch.setattr(weights_module, "STREAM_FROM", 4 << 20)
    monkeypatch.setattr(bundle_module, "STREAM_FROM", 4 << 20)


def chain(layers: int = 3) -> Model:
    nodes, weights, x = [], {}, "x"
    for i in range(layers):
        weights[f"w{i}"] = (RNG.standard_normal((WIDTH, WIDTH)) / 28).astype(np.float32)
        nodes.append(Node(f"mm{i}", "MatMul", (x, f"w{i}"), (f"h{i}",)))
        x = f"h{i}"
    weights["bias"] = np.full(WIDTH, 0.5, np.float32)  # small: read and kept
    nodes.append(Node("add", "Add", (x, "bias"), ("y",)))
    graph = Graph("chain", (TensorInfo("x", "float32", (1, WIDTH)),),
                  (TensorInfo("y", "float32", (1, WIDTH)),), tuple(nodes))
    return Model(graph, weights)


def stored(tmp_path: Path, model: Model) -> Bundle:
    """The model as the convert step stores it (a file of parts), read back as a step reads
    its input: through a PartsReader."""
    store = Store(tmp_path / "store")
    segments, size = bundle_segments(Bundle(model, None, {}))
    layout = layout_of([segments[i] for i in range(len(segments))], size, store.cas)
    return read_bundle(PartsReader(store.cas, layout), "bundle")


def test_a_large_bundle_maps_its_weights_afresh_and_keeps_none(tmp_path: Path,
                                                                low: None) -> None:
    model = chain()
    bundle = stored(tmp_path, model)
    weights = bundle.model.weights
    assert streams(weights)
    first, again = weights["w0"], weights["w0"]
    assert isinstance(first, np.memmap) and first is not again  # mapped, not kept
    assert np.array_equal(first, model.weights["w0"])
    assert weights.spec("w1") == (np.dtype("float32"), (WIDTH, WIDTH))  # type: ignore[attr-defined]
    assert not isinstance(weights["bias"], np.memmap)  # a small one is read and kept
    assert weights["bias"] is weights["bias"]


def test_a_small_bundle_reads_and_keeps_its_weights_as_before(tmp_path: Path) -> None:
    bundle = stored(tmp_path, chain())
    weights = bundle.model.weights
    assert not streams(weights)
    assert not isinstance(weights["w0"], np.memmap) and weights["w0"] is weights["w0"]


def test_spilled_arrays_keep_their_values_and_give_their_pages_back() -> None:
    a = RNG.standard_normal((3000, 1500)).astype(np.float32)  # 17 MiB
    mapped = spill(a.T)
    assert isinstance(mapped, np.memmap) and np.array_equal(mapped, a.T)
    assert not mapped.flags.writeable
    assert _base_map(spill(mapped)) is _base_map(mapped)  # already mapped: as it is
    assert _base_map(spill(a[:10])) is None  # small: as it is
    release(mapped)  # compared above: its pages read
    before = _rss_mib()
    total = float(np.sum(mapped, dtype=np.float64))  # every page read: resident
    touched = _rss_mib()
    release(mapped.T[::2])  # a view is enough to find its map
    assert touched - before > 12, (before, touched)
    assert touched - _rss_mib() > 12
    assert float(np.sum(mapped, dtype=np.float64)) == total  # still readable, the same


def test_an_overlay_reads_its_base_lazily_and_writes_it_streamed(tmp_path: Path,
                                                                 low: None) -> None:
    model = chain()
    base = stored(tmp_path, model).model.weights
    made = np.ones((2, 2), np.float32)
    view = Overlay(base, {"w1": made, "extra": made}, names=["w0", "w1", "extra", "bias"])
    assert list(view) == ["bias", "w0", "w1", "extra"] and "w2" not in view  # the base's order
    assert view["w1"] is made and np.array_equal(view["w0"], model.weights["w0"])
    assert view.streamed("w0") is not None and view.streamed("w1") is None
    assert view.spec("extra") == (np.dtype("float32"), (2, 2)) and view.streams
    # written into another bundle: the same bytes as the arrays would give
    folded = Model(model.graph, dict(view))
    assert Bundle(Model(model.graph, view), None, {}).to_bytes() == \
        Bundle(folded, None, {}).to_bytes()


def test_folding_keeps_a_streaming_model_s_weights_in_their_files(tmp_path: Path,
                                                                  low: None) -> None:
    from udo_build.quant.fold import fold_for_quantization

    bundle = stored(tmp_path, chain())
    folded = fold_for_quantization(bundle.model)
    assert isinstance(folded.weights, Overlay) and folded.weights.streamed("w2") is not None
    assert isinstance(folded.weights["w2"], np.memmap)


def test_sessions_of_a_streaming_model_compute_the_same_bits(tmp_path: Path,
                                                             low: None) -> None:
    from udo_build.quant.pipeline import quantize_model
    from udo_build.runtime.float_session import Session
    from udo_build.runtime.integer import QuantizedSession

    model = chain()
    bundle = stored(tmp_path, model)
    feeds = [{"x": RNG.standard_normal((1, WIDTH)).astype(np.float32)}]
    settings = {"act_bitwidth": 16, "weights_bitwidth": 4, "weights_block_size": 64,
                "lpbq": True}
    held = quantize_model(model, {}, feeds, settings)
    streamed = quantize_model(bundle.model, {}, feeds, settings)
    assert streamed.params == held.params and streamed.activations == held.activations
    assert np.array_equal(Session(bundle.model).run(feeds[0])["y"],
                          Session(model).run(feeds[0])["y"])
    session = QuantizedSession(streamed)
    plan = session.plan(("y",))
    big = [a for a in plan.constants.values() if a.nbytes >= weights_module.SPILL_FROM]
    assert big and all(isinstance(_base_map(a), mmap.mmap) for a in big)  # spilled, mapped
    assert np.array_equal(session.run_quantized(feeds[0])["y"],
                          QuantizedSession(held).run_quantized(feeds[0])["y"])


def _base_map(array: np.ndarray) -> object:
    base: object = array
    while base is not None and not isinstance(base, mmap.mmap):
        base = getattr(base, "base", None)
    return base


def test_weights_in_memory_never_stream_whatever_their_size(low: None) -> None:
    model = chain()  # 12 MiB in memory, over the lowered STREAM_FROM
    assert not streams(model.weights)
    assert streams({name: spill(a) for name, a in model.weights.items()})
    from udo_build.runtime.float_session import Session

    assert not Session(model)._streams  # nothing given back: a benchmark's speed unchanged
