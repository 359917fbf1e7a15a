"""Quantization where tensors hold values outside the reals (udo_build.quant.quantizers' policy):
ranges from the finite values only, no encoding for a tensor without one, -inf saturating to the
encoding's minimum and NaN to its zero point; and inputs read as parameters (Range's bounds,
QuantizeLinear's scale) left float, so quantization changes no shape and no scale. Numbers are
checked against onnx's reference evaluator."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from udo_build.ir import Graph, Model, Node
from udo_build.ir.encodings import Encoding
from udo_build.model.onnx_import import import_onnx
from udo_build.quant.pipeline import float_tensors, quantize_model
from udo_build.quant.quantizers import asymmetric, finite_range, symmetric_weights
from udo_build.quant.report import layer_sqnr
from udo_build.runtime.integer import QuantizedSession
from udo_build.runtime.integer.fixed import quantize, quantize_along

from .qhelpers import f32

INF, NAN = np.inf, np.nan


def test_a_range_is_taken_over_the_finite_values() -> None:
    assert finite_range(np.array([-INF, -2.0, 0.5, NAN, INF], np.float32)) == (-2.0, 0.5)
    assert finite_range(np.array([-INF, -INF], np.float32)) is None  # nothing to encode
    assert finite_range(np.array([NAN], np.float32)) is None
    assert finite_range(np.zeros(0, np.float32)) == (0.0, 0.0)
    with pytest.raises(ValueError, match="must be finite"):
        asymmetric(-INF, 1.0, 8)


def test_weights_scale_from_their_finite_magnitudes() -> None:
    w = np.array([[1.0, -INF, 0.5], [NAN, 2.0, -0.25]], np.float32)
    (one,) = symmetric_weights(w, 8)
    assert one == symmetric_weights(np.array([1.0, 2.0, 0.5], np.float32), 8)[0]
    per_row = symmetric_weights(w, 8, axis=0)
    assert [e.scale for e in per_row] == [symmetric_weights(np.array([1.0]), 8)[0].scale,
                                          symmetric_weights(np.array([2.0]), 8)[0].scale]
    assert all(np.isfinite(e.scale) and e.scale > 0 for e in per_row)


def test_infinities_saturate_and_nan_is_the_zero_point() -> None:
    enc = Encoding(8, 0.02, -100)  # reals [-2, 3.1], zero point 100
    q = quantize(np.array([-INF, INF, NAN, 0.0, -1e30, 1.0], np.float32), enc)
    assert q.dtype == np.uint8 and q.tolist() == [0, 255, 100, 100, 0, 150]
    signed = [Encoding(8, 0.5, 0, signed=True), Encoding(8, 0.25, 0, signed=True)]
    w = np.array([[-INF, NAN], [INF, 1.0]], np.float32)
    assert quantize_along(w, signed, 0).tolist() == [[-127, 0], [127, 4]]


def _mask_model() -> Model:
    """y = Softmax(x + mask), the mask a constant with -inf; z = Max(x, -inf), which is x."""
    mask = np.array([[0.0, -INF, 0.0, -INF]], np.float32)
    nodes = (Node.make("add", "Add", ["x", "mask"], ["s"]),
             Node.make("softmax", "Softmax", ["s"], ["y"], {"axis": -1}),
             Node.make("max", "Max", ["x", "neg_inf"], ["z"]))
    graph = Graph("mask", (f32("x", (1, 4)),), (f32("y"), f32("z")), nodes)
    return Model(graph, {"mask": mask, "neg_inf": np.array([-INF], np.float32)})


def test_a_constant_mask_quantizes_and_a_constant_minus_infinity_stays_float() -> None:
    model = _mask_model()
    x = np.array([[-1.0, 0.5, 2.0, 1.0]], np.float32)
    qmodel = quantize_model(model, {}, [{"x": x}], {"quantizer": "tf"})
    assert "neg_inf" not in qmodel.params  # no finite value: it stays float, -inf
    (mask_enc,) = qmodel.params["mask"]  # the finite values: [0, 0]
    assert np.isfinite(mask_enc.scale)
    got = QuantizedSession(qmodel).run({"x": x})
    np.testing.assert_allclose(got["z"], x, atol=qmodel.activations["z"].scale)  # not Relu(x)
    assert np.all(np.isfinite(got["y"]))


def test_attention_mask_input_with_minus_infinity_quantizes_from_its_finite_values() -> None:
    """A graph input holding -inf: its encoding covers the finite values; the run saturates the
    -inf to the encoding's minimum and the softmax stays finite, close to onnx's."""
    proto = helper.make_model(helper.make_graph(
        [helper.make_node("Add", ["x", "m"], ["s"]),
         helper.make_node("Softmax", ["s"], ["y"], axis=-1)], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 4]),
         helper.make_tensor_value_info("m", TensorProto.FLOAT, [2, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 4])]),
        opset_imports=[helper.make_opsetid("", 17)])
    x = np.array([[0.5, -1.0, 2.0, 1.0], [0.0, 0.25, -0.5, 1.5]], np.float32)
    m = np.array([[0.0, -INF, -4.0, 0.0], [0.0, 0.0, -INF, -8.0]], np.float32)
    qmodel = quantize_model(import_onnx(proto), {}, [{"x": x, "m": m}], {"quantizer": "tf"})
    enc = qmodel.activations["m"]
    assert enc.min == pytest.approx(-8.0, rel=0.02) and enc.max >= 0.0
    (want,) = ReferenceEvaluator(proto).run(None, {"x": x, "m": m})
    got = QuantizedSession(qmodel).run({"x": x, "m": m})["y"]
    assert np.all(np.isfinite(got))
    np.testing.assert_allclose(got, want, atol=0.03)


def test_the_report_measures_the_finite_values() -> None:
    """A layer whose float output holds infinities still has a finite SQNR."""
    proto = helper.make_model(helper.make_graph(
        [helper.make_node("Div", ["x", "d"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6]),
         helper.make_tensor_value_info("d", TensorProto.FLOAT, [6])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [6])]),
        opset_imports=[helper.make_opsetid("", 17)])
    feed = {"x": np.array([1.0, -1.0, 0.5, 2.0, 3.0, -2.0], np.float32),
            "d": np.array([0.0, 0.0, 1.0, 2.0, 4.0, 1.0], np.float32)}  # two infinities
    qmodel = quantize_model(import_onnx(proto), {}, [feed], {"quantizer": "tf"})
    (layer,) = layer_sqnr(qmodel, {}, [feed])
    assert np.isfinite(layer.sqnr_db) and layer.sqnr_db > 20


def _range_model() -> onnx.ModelProto:
    """y = Range(start, limit, delta) * x: float bounds decide y's length."""
    return helper.make_model(helper.make_graph(
        [helper.make_node("Range", ["start", "limit", "delta"], ["r"]),
         helper.make_node("Mul", ["r", "x"], ["y"])], "g",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, []) for n in
         ("start", "limit", "delta", "x")],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])]),
        opset_imports=[helper.make_opsetid("", 17)])


def test_parameter_inputs_keep_their_float_values() -> None:
    """Range's bounds stay float: the quantized output has onnx's length and values close to
    onnx's (quantized bounds 1 / 255 off would give 3 values instead of 2 here)."""
    proto = _range_model()
    feed = {"start": np.array(1.0, np.float32), "limit": np.array(5.0, np.float32),
            "delta": np.array(2.0, np.float32), "x": np.array(0.75, np.float32)}
    model = import_onnx(proto)
    assert float_tensors(model.graph) == {"start", "limit", "delta"}
    qmodel = quantize_model(model, {}, [feed], {"quantizer": "tf"})
    assert not {"start", "limit", "delta"} & set(qmodel.activations)
    assert {"r", "x", "y"} <= set(qmodel.activations)
    (want,) = ReferenceEvaluator(proto).run(None, feed)
    got = QuantizedSession(qmodel).run(feed)["y"]
    assert got.shape == want.shape == (2,)
    np.testing.assert_allclose(got, want, atol=qmodel.activations["y"].scale)


def test_a_quantize_linear_scale_stays_float() -> None:
    proto = helper.make_model(helper.make_graph(
        [helper.make_node("DequantizeLinear", ["q", "s"], ["y"])], "g",
        [helper.make_tensor_value_info("q", TensorProto.UINT16, [4]),
         helper.make_tensor_value_info("s", TensorProto.FLOAT, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])]),
        opset_imports=[helper.make_opsetid("", 21)])
    feed = {"q": np.array([0, 3, 128, 65535], np.uint16), "s": np.array(0.3, np.float32)}
    qmodel = quantize_model(import_onnx(proto), {}, [feed], {"quantizer": "tf"})
    assert "s" not in qmodel.activations
    (want,) = ReferenceEvaluator(proto).run(None, feed)
    got = QuantizedSession(qmodel).run(feed)["y"]
    np.testing.assert_allclose(got, want, atol=qmodel.activations["y"].scale / 2 + 1e-3)


def test_inputs_read_for_nan_and_infinities_stay_float() -> None:
    """IsNaN and IsInf see the values no encoding holds: their input keeps its float values,
    and the results are onnx's."""
    proto = helper.make_model(helper.make_graph(
        [helper.make_node("IsNaN", ["x"], ["nan"]), helper.make_node("IsInf", ["x"], ["inf"]),
         helper.make_node("Abs", ["x"], ["a"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6])],
        [helper.make_tensor_value_info(n, TensorProto.BOOL, [6]) for n in ("nan", "inf")]
        + [helper.make_tensor_value_info("a", TensorProto.FLOAT, [6])]),
        opset_imports=[helper.make_opsetid("", 20)])
    feed = {"x": np.array([-1.2, NAN, INF, 0.0, -INF, 2.5], np.float32)}
    qmodel = quantize_model(import_onnx(proto), {}, [feed], {"quantizer": "tf"})
    assert "x" not in qmodel.activations and "a" in qmodel.activations
    want = ReferenceEvaluator(proto).run(None, feed)
    got = QuantizedSession(qmodel).run(feed)
    assert got["nan"].tolist() == want[0].tolist() and got["inf"].tolist() == want[1].tolist()
