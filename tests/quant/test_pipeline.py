"""The quantization pipeline: preparation, calibration and the choice of every encoding."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import onnx
import pytest

from udo_build.errors import Diagnostics
from udo_build.ir.bundle import read_bundle
from udo_build.ir.encodings import from_aimet
from udo_build.ir.qmodel import from_bundle, to_bundle
from udo_build.kernels.load import load_kernels
from udo_build.model.onnx_import import import_onnx, load_onnx
from udo_build.opdef import recipe_package
from udo_build.quant.calibrate import calibrate
from udo_build.quant.fold import fold_for_quantization
from udo_build.quant.pipeline import (
    _calibrated_tensors,
    _Chooser,
    quantize_and_measure,
    quantize_model,
)
from udo_build.quant.quantizers import activation_encoding, asymmetric
from udo_build.quant.report import layer_sqnr
from udo_build.quant.settings import QuantizeSettings
from udo_build.runtime.float_session import Session

from ..conftest import EXAMPLES
from ..model.test_udo_end_to_end import LIGHT, randomized

OPS = EXAMPLES / "softplus/ops"


@pytest.fixture(scope="module")
def example():  # type: ignore[no-untyped-def]
    defs = recipe_package(None, None, None, [OPS / "softplus.xml", OPS / "swish.json"],
                          Diagnostics())
    model = import_onnx(load_onnx(EXAMPLES / "softplus/model/net.onnx"), opdefs=defs)
    (package,) = load_kernels(OPS / "kernels.py")
    rng = np.random.default_rng(3)
    feeds = [{"input": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)}
             for _ in range(6)]
    return model, {"SoftplusPackage": package}, feeds


def test_preparation_folds_batch_norms_and_keeps_the_numbers() -> None:
    model = import_onnx(randomized(onnx.load(LIGHT / "light_resnet50.onnx")))
    prepared = fold_for_quantization(model)
    ops = [n.op for n in prepared.graph.nodes]
    assert "BatchNormalization" not in ops and ops.count("Conv") == 53
    assert {n.op for n in prepared.graph.nodes} <= {n.op for n in model.graph.nodes}
    x = np.random.default_rng(0).standard_normal((1, 3, 224, 224)).astype(np.float32)
    (before,) = Session(model).run({"gpu_0/data_0": x}).values()
    (after,) = Session(prepared).run({"gpu_0/data_0": x}).values()
    np.testing.assert_allclose(after, before, rtol=1e-3, atol=1e-5 * np.abs(before).max())


def test_encodings_of_the_example(example) -> None:  # type: ignore[no-untyped-def]
    model, packages, feeds = example
    q = quantize_model(model, packages, feeds, {"per_channel": True})
    acts, params = q.activations, q.params
    assert set(acts) == {"input", "conv1_out", "softplus1_out", "conv2_out", "swish1_out",
                         "pool_out", "flat_out", "logits"}
    assert acts["flat_out"] == acts["pool_out"]  # Flatten moves bytes: one encoding
    assert len(params["conv1.weight"]) == 8 and len(params["conv2.weight"]) == 16
    assert all(e.signed and e.offset == 0 for e in params["conv2.weight"])
    bias = params["conv2.bias"]
    assert [b.scale for b in bias] == pytest.approx(
        [acts["softplus1_out"].scale * w.scale for w in params["conv2.weight"]])
    assert q.settings["calibration_inputs"] == 6
    again = quantize_model(model, packages, feeds, {"per_channel": True})
    assert again.encodings_json() == q.encodings_json()  # deterministic


def test_an_absorbed_relu_and_shared_encodings() -> None:
    model = import_onnx(randomized(onnx.load(LIGHT / "light_squeezenet.onnx")))
    feeds = [{"data_0": np.random.default_rng(i).standard_normal((1, 3, 224, 224))
              .astype(np.float32)} for i in range(2)]
    q = quantize_model(model, {}, feeds, {"quantizer": "enhanced"})
    absorbed = q.absorbed()
    conv = next(n for n in q.model.graph.nodes if n.op == "Conv")
    assert conv.outputs[0] in absorbed and conv.outputs[0] not in q.activations
    relu_out = absorbed[conv.outputs[0]]
    assert q.activations[relu_out].min == 0.0  # a ReLU's output holds no negatives
    pools = [n for n in q.model.graph.nodes if n.op == "MaxPool"]
    assert all(q.activations[p.outputs[0]] == q.activations[p.inputs[0]] for p in pools)


def test_overrides_and_float_fallback(example) -> None:  # type: ignore[no-untyped-def]
    model, packages, feeds = example
    forced = asymmetric(-1.0, 1.0, 8)
    overrides = ({"conv1_out": [forced]}, {})
    q = quantize_model(model, packages, feeds, {}, overrides)
    assert q.activations["conv1_out"] == forced and "logits" in q.activations
    fallback = quantize_model(model, packages, iter(()), {"float_fallback": True}, overrides)
    assert fallback.activations == {"conv1_out": forced} and fallback.params == {}
    assert fallback.settings["calibration_inputs"] == 0


def test_measuring_after_quantizing_runs_calibrations_plan_again(example) -> None:  # type: ignore[no-untyped-def]
    """The per-layer SQNR over the first `report_inputs` inputs, the inputs read again and the
    float tensors made by calibration's plan (not kept from calibration: an LLM's are most of
    a gigabyte), is what a fresh measurement finds; the quantization itself does not change."""
    model, packages, feeds = example
    reads: list[int] = []

    def read() -> list[dict[str, np.ndarray]]:
        reads.append(1)
        return feeds

    settings = QuantizeSettings(quantizer="enhanced", report_inputs=2)
    q, figures = quantize_and_measure(model, packages, read, settings)
    assert figures is not None and figures.inputs == 2 and len(reads) == 2
    fresh = layer_sqnr(q, packages, feeds[:2])
    assert [layer.to_json() for layer in figures.layers] == [f.to_json() for f in fresh]
    assert [(f.op, f.custom) for f in fresh if f.custom] == [
        ("SoftplusPackage::Softplus", True), ("SoftplusPackage::Swish", True)]
    assert all(20 < f.sqnr_db < 60 for f in fresh)
    unmeasured, none = quantize_and_measure(model, packages, read,
                                            QuantizeSettings(quantizer="enhanced",
                                                             report_inputs=0))
    assert none is None and unmeasured == q and "report_inputs" not in q.settings
    _, wide = quantize_and_measure(model, packages, read, QuantizeSettings(report_inputs=99))
    assert wide is not None and wide.inputs == len(feeds)
    assert json.loads(wide.to_bytes())["inputs"] == len(feeds)


def test_measuring_without_calibration(example) -> None:  # type: ignore[no-untyped-def]
    """With float_fallback no calibration runs: the inputs are read again for the measure."""
    model, packages, feeds = example
    overrides = ({"conv1_out": [asymmetric(-1.0, 1.0, 8)]}, {})
    settings = QuantizeSettings(float_fallback=True, report_inputs=3)
    q, figures = quantize_and_measure(model, packages, lambda: iter(feeds), settings, overrides)
    assert figures is not None and figures.inputs == 3
    assert [layer.tensor for layer in figures.layers] == ["conv1_out"]
    assert figures.layers[0].to_json() == layer_sqnr(q, packages, feeds[:3])[0].to_json()


def test_quantized_bundles_round_trip(example, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    model, packages, feeds = example
    q = quantize_model(model, packages, feeds, {"quantizer": "symmetric", "act_bitwidth": 16})
    bundle = read_bundle(to_bundle(q, None, {"producer": "test"}).to_bytes())
    back = from_bundle(bundle)
    assert back.activations == q.activations and back.params == q.params
    assert back.settings["act_bitwidth"] == 16 and bundle.meta["producer"] == "test"
    acts, _ = from_aimet(__import__("json").loads(q.encodings_json()), "e.json")
    assert acts["logits"][0].offset == -(2 ** 15)  # symmetric: zero in the middle


def test_calibrating_only_what_gets_an_encoding_changes_no_encoding() -> None:
    """The pipeline calibrates only the tensors the chooser may read (not those an activation
    absorbs, so the session fuses Conv + Relu), with histograms only for the enhanced
    quantizer: the same statistics for those tensors, the same encodings, as calibrating every
    tensor with histograms."""
    model = fold_for_quantization(import_onnx(randomized(onnx.load(
        LIGHT / "light_squeezenet.onnx"))))
    feeds = [{"data_0": np.random.default_rng(i).standard_normal((1, 3, 224, 224))
              .astype(np.float32)} for i in range(2)]
    everything, _ = calibrate(model, {}, feeds)
    tensors = _calibrated_tensors(model)
    assert 0 < len(tensors) < len(everything)  # the convolutions' outputs are left out
    for quantizer in ("enhanced", "tf"):
        needed, _ = calibrate(model, {}, feeds, tensors, histograms=quantizer == "enhanced")
        assert set(needed) == set(tensors)
        for name, stats in needed.items():
            full = everything[name]
            assert (stats.min, stats.max, stats.count) == (full.min, full.max, full.count)
            assert np.array_equal(stats.hist, full.hist) if stats.histogram else \
                stats.hist.size == 0
        config = QuantizeSettings(quantizer=quantizer).to_params()
        assert _Chooser(model, needed, config).choose() == _Chooser(model, everything,
                                                                    config).choose()


def _conv_with_a_large_bias() -> onnx.ModelProto:
    """A 1x1 convolution whose second channel's bias is large against its small weights: at 16-bit
    activations and weights, bias / (input scale x weight scale) is near 2^33."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(5)
    w = (rng.standard_normal((2, 3, 1, 1)) * 0.01).astype(np.float32)
    b = np.array([1e-4, 40.0], np.float32)
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv")], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 4, 4])],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])


@pytest.mark.parametrize("per_channel", [True, False])
def test_a_32_bit_bias_fits_by_widening_its_weight_scale(per_channel: bool) -> None:
    """A bias that would saturate int32 at input scale x weight scale widens that channel's
    weight scale just enough (per tensor: the one scale); the layer keeps 16-bit accuracy
    instead of losing its bias (it was 6 dB here: 40.0 saturated near 19)."""
    from udo_build.quant.quantizers import symmetric_weights

    model = import_onnx(_conv_with_a_large_bias())
    rng = np.random.default_rng(6)
    feeds = [{"x": (rng.standard_normal((1, 3, 4, 4)) * 0.05).astype(np.float32)}
             for _ in range(3)]
    settings = {"act_bitwidth": 16, "weights_bitwidth": 16, "bias_bitwidth": 32,
                "per_channel": per_channel}
    q = quantize_model(model, {}, feeds, settings)
    x = q.activations["x"]
    w, b = q.params["w"], q.params["b"]
    plain = symmetric_weights(model.weights["w"], 16, 0 if per_channel else None)
    scales = [e.scale for e in b] * (2 if len(b) == 1 else 1)
    codes = [round(float(v) / s) for v, s in zip(model.weights["b"], scales, strict=True)]
    assert all(abs(c) <= 2 ** 31 - 1 for c in codes), codes
    assert [e.scale for e in b] == pytest.approx([x.scale * e.scale for e in w])
    assert w[-1].scale > plain[-1].scale  # the large bias's channel (or the one scale) widened
    if per_channel:
        assert w[0] == plain[0]  # the other channel keeps its grid
    (layer,) = layer_sqnr(q, {}, feeds)
    assert layer.sqnr_db > 60, layer
    eight = quantize_model(model, {}, feeds, {**settings, "act_bitwidth": 8,
                                              "weights_bitwidth": 8})
    assert eight.params["w"] == symmetric_weights(model.weights["w"], 8,
                                                  0 if per_channel else None)


def test_a_tensor_read_only_by_a_relu_is_rounded_once_onto_its_grid() -> None:
    from udo_build.quant.pipeline import one_grid
    from udo_build.runtime.integer import QuantizedSession

    from .algo_models import concat_model, feeds

    model = concat_model()
    q = quantize_model(model, {}, feeds(8), {"quantizer": "enhanced"})
    assert one_grid(q.model.graph) == {"k": "r"}  # the branches keep their own
    assert q.activations["k"] == q.activations["r"] and q.activations["r"].min == 0.0
    # the Concat's own encoding, as before: on a range below zero, then again on the Relu's
    stats, _ = calibrate(q.model, {}, feeds(8), ["k"], histograms=True)
    own = activation_encoding(stats["k"], 8, "enhanced")
    assert own.min < 0.0
    twice = replace(q, activations={**q.activations, "k": own})
    held, exact = feeds(4, seed=9), Session(q.model)
    errors = []
    for qmodel in (q, twice):
        session = QuantizedSession(qmodel)
        errors.append(sum(float(np.sum((session.run(f, ["r"])["r"] - exact.run(f, ["r"])["r"])
                                       ** 2)) for f in held))
    assert errors[0] < 0.9 * errors[1]  # rounded once, on a grid with no codes below zero
