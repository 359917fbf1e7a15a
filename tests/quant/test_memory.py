"""Quantize's memory stays bounded by the largest weight, not by the model (issue 28, item 1):
the per-layer SQNR measure holds each weight once at its quantized width (no float64 operands,
no dequantized copy a MatMul never reads), and the quantize step returns its bundle as a file of
parts (each large weight a blob of its own, written from the model's arrays one at a time), so
the bundle is never whole in memory."""

from __future__ import annotations

import io
import json
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from udo_build.cli import main
from udo_build.ir import Graph, Model, Node, TensorInfo
from udo_build.ir.bundle import Bundle, bundle_segments, load_bundle, read_bundle
from udo_build.quant.pipeline import quantize_and_measure
from udo_build.quant.settings import QuantizeSettings
from udo_build.store import Store
from udo_build.store.parts import parse_layout

RNG = np.random.default_rng(28)
WIDTH = 1024
LAYERS = 4  # MatMuls of WIDTH x WIDTH float32 weights: 4 MiB each, 16 MiB in all


def chain() -> Model:
    """x -> MatMul -> MatMul -> ... (LAYERS of them, each its own WIDTH x WIDTH weight)."""
    nodes, weights, x = [], {}, "x"
    for i in range(LAYERS):
        weights[f"w{i}"] = (RNG.standard_normal((WIDTH, WIDTH)) / 32).astype(np.float32)
        nodes.append(Node(f"mm{i}", "MatMul", (x, f"w{i}"), (f"h{i}",)))
        x = f"h{i}"
    graph = Graph("chain", (TensorInfo("x", "float32", (1, WIDTH)),),
                  (TensorInfo(x, "float32", (1, WIDTH)),), tuple(nodes))
    return Model(graph, weights)


def feeds() -> list[dict[str, np.ndarray]]:
    return [{"x": RNG.standard_normal((1, WIDTH)).astype(np.float32)} for _ in range(2)]


def traced_peak(work: Any) -> tuple[Any, int]:
    """work()'s result and the most memory it held at once beyond what there was before
    (numpy's arrays are traced)."""
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        result = work()
        return result, tracemalloc.get_traced_memory()[1] - before
    finally:
        tracemalloc.stop()


def test_quantize_and_measure_holds_each_weight_once_at_its_quantized_width() -> None:
    model, inputs = chain(), feeds()
    largest = WIDTH * WIDTH * 4
    settings = QuantizeSettings(act_bitwidth=16, weights_bitwidth=8, per_channel=True,
                                report_inputs=2)
    (qmodel, figures), peak = traced_peak(lambda: quantize_and_measure(
        model, {}, lambda: iter(inputs), settings, count=len(inputs)))
    assert figures is not None and len(figures.layers) == LAYERS
    # the float weights are the caller's; the measure adds their int8 codes (a quarter) and a
    # few temporaries of at most one weight as float64 (its BLAS operand): before, every
    # weight was held as float64 operands (twice the float weights) and dequantized (once more)
    assert peak < LAYERS * largest / 4 + 2 * largest + (4 << 20), peak


def test_the_segments_of_a_bundle_hold_no_copy_of_its_large_weights() -> None:
    model = chain()
    bundle = Bundle(model, None, {"producer": "test"})
    (segments, size), peak = traced_peak(lambda: bundle_segments(bundle))
    assert peak < WIDTH * WIDTH * 4 / 2, peak  # not the weights' bytes: they stay arrays
    # taken one at a time, they make the bundle's bytes: each large weight a segment of its own
    taken = bytearray(size)
    for offset, data in segments:
        taken[offset:offset + len(data)] = data
    assert len(segments) == 1 + LAYERS
    again = read_bundle(bytes(taken))
    for name, w in model.weights.items():
        assert np.array_equal(again.model.weights[name], w)
    assert bytes(taken) == bundle.to_bytes()


RECIPE = """\
recipe: 1
name: quantized-parts
model:
  onnx: model/net.onnx
quantize:
  input_list: data/inputs.txt
  act_bitwidth: 16
  weights_bitwidth: 8
  per_channel: true
"""


def project(root: Path) -> None:
    w = (RNG.standard_normal((256, 1536)) / 16).astype(np.float32)  # 1.5 MiB: a part of its own
    graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "net",
                              [helper.make_tensor_value_info("x", 1, [1, 256])],
                              [helper.make_tensor_value_info("y", 1, [1, 1536])],
                              [numpy_helper.from_array(w, "w")])
    made = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    made.ir_version = 8
    (root / "model").mkdir(parents=True)
    (root / ".udo-build-root").write_text("")
    onnx.save(made, root / "model" / "net.onnx")
    (root / "data").mkdir()
    RNG.standard_normal((1, 256)).astype(np.float32).tofile(root / "data" / "x.raw")
    (root / "data" / "inputs.txt").write_text("x:=x.raw\n")
    (root / "recipe.yaml").write_text(RECIPE)


def test_the_quantized_bundle_is_a_file_of_parts_its_large_weight_a_blob(
        tmp_path: Path) -> None:
    project(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    code = main(["build", str(tmp_path / "recipe.yaml"), "quantize", "--store",
                 str(tmp_path / "store"), "--out", str(tmp_path / "out"), "--json"],
                stdout=out, stderr=err, env={})
    assert code == 0, err.getvalue()
    summary = json.loads(out.getvalue())
    store = Store(tmp_path / "store")
    key = next(a["key"] for a in summary["actions"] if a["id"] == "quantize")
    result = store.ac.get(key)
    assert result is not None
    output = result.outputs["bundle"]
    layout = parse_layout(store.cas.get(output.digest) or b"")
    assert output.type == "tree" and layout is not None
    published = tmp_path / "out" / "model" / "net_quantized.udb"
    w = load_bundle(published).model.weights["w"]
    blob = next(p for p in layout.parts if p.size == w.nbytes)
    assert store.cas.get(blob.digest) == w.tobytes()  # the weight, a blob of its own
    assert layout.size == published.stat().st_size


ACTIVATION = 1 << 18  # float32 elements of each activation of `deep`: 1 MiB
DEPTH = 32


def deep() -> Model:
    """x -> Tanh -> Neg -> Tanh -> ... (DEPTH nodes): an activation of 1 MiB each, all of them
    observed by calibration and measured by the per-layer SQNR."""
    nodes, x = [], "x"
    for i in range(DEPTH):
        nodes.append(Node(f"n{i}", "Tanh" if i % 2 == 0 else "Neg", (x,), (f"a{i}",)))
        x = f"a{i}"
    graph = Graph("deep", (TensorInfo("x", "float32", (1, ACTIVATION)),),
                  (TensorInfo(x, "float32", (1, ACTIVATION)),), tuple(nodes))
    return Model(graph, {})


@pytest.mark.parametrize("quantizer", ["tf", "enhanced"])
def test_calibration_and_the_measure_hold_a_few_activations_not_all(quantizer: str) -> None:
    """Calibration takes each activation's statistics as the float session makes it, and the
    measure compares each float and integer activation as both sessions make it: neither
    holds an inference's activations at once (DEPTH MiB in float32, twice that as float64
    for the measure's sums), only their temporaries (float64 of one activation, a histogram's
    indices)."""
    model = deep()
    inputs = [{"x": RNG.standard_normal((1, ACTIVATION)).astype(np.float32)}]
    settings = QuantizeSettings(act_bitwidth=16, quantizer=quantizer, report_inputs=1)
    (_, figures), peak = traced_peak(lambda: quantize_and_measure(
        model, {}, lambda: iter(inputs), settings, count=1))
    assert figures is not None and len(figures.layers) == DEPTH
    # measured: 14 activations' bytes (the integer kernels' temporaries of one step: 9); when
    # calibration kept its float tensors for the measure and the measure ran each session
    # whole, 85
    assert peak < 20 * ACTIVATION * 4, peak / (ACTIVATION * 4)
