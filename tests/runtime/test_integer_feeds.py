"""The integer path's feeds (udo_build.runtime.integer.session): real values of any float type
quantized at entry from their values, codes taken as they are, other types refused; and float
kernels outside their domain giving NaN and infinities as onnx's reference does, under numpy
settings that would raise (kernels/default/elementwise.py `ieee`)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx.reference import ReferenceEvaluator

from udo_build.errors import UserError
from udo_build.ir import Graph, Model, Node, TensorInfo
from udo_build.ir.encodings import Encoding
from udo_build.ir.qmodel import QuantizedModel
from udo_build.model.onnx_import import import_onnx
from udo_build.runtime.float_session import Session
from udo_build.runtime.integer import QuantizedSession

X_ENC = Encoding(8, 4.0 / 255, -128)  # reals about [-2, 2]


def _tanh(dtype: str) -> QuantizedSession:
    """y = Tanh(x) with x of `dtype`, both encoded."""
    graph = Graph("t", (TensorInfo("x", dtype, (5,)),), (TensorInfo("y", dtype, (5,)),),
                  (Node.make("tanh", "Tanh", ["x"], ["y"]),))
    acts = {"x": X_ENC, "y": Encoding(8, 2.0 / 255, -128)}
    return QuantizedSession(QuantizedModel(Model(graph, {}), acts, {}))


@pytest.mark.parametrize("model_type", ["float16", "float32", "float64"])
@pytest.mark.parametrize("given", [np.float16, np.float32, np.float64])
def test_real_values_of_any_float_type_quantize_from_their_values(model_type: str,
                                                                  given: type) -> None:
    x = np.array([-1.5, -0.25, 0.0, 0.75, 1.9921875], given)  # exact in float16
    session = _tanh(model_type)
    got = session.run_quantized({"x": x}, ["x", "y"])
    assert got["x"].tolist() == [32, 112, 128, 176, 255]  # rint(x * 255 / 4) + 128
    want = _tanh("float32").run_quantized({"x": x.astype(np.float32)}, ["y"])["y"]
    np.testing.assert_array_equal(got["y"], want)


@pytest.mark.parametrize("model_type", ["float16", "float32", "float64"])
def test_outputs_are_real_values_of_the_model_type(model_type: str) -> None:
    x = np.array([-1.5, -0.25, 0.0, 0.75, 1.9921875], np.float32)
    session = _tanh(model_type)
    codes = session.run_quantized({"x": x}, ["y"])["y"]
    y = session.run({"x": x})["y"]
    exact = 2.0 / 255 * (codes.astype(np.float64) - 128)  # scale x (q + offset), in float64
    assert y.dtype == np.dtype(model_type)
    np.testing.assert_array_equal(y, exact.astype(model_type))
    np.testing.assert_allclose(y, np.tanh(x), atol=2.0 / 255)


def test_codes_are_taken_as_they_are_and_other_types_refused() -> None:
    session = _tanh("float32")
    codes = np.array([0, 64, 128, 192, 255], np.uint8)
    assert session.run_quantized({"x": codes}, ["x"])["x"].tolist() == codes.tolist()
    with pytest.raises(UserError, match=r"expected float32 \(or uint8, quantized\), given int32"):
        session.run({"x": codes.astype(np.int32)})


def test_an_unencoded_float_input_takes_any_float_type() -> None:
    graph = Graph("t", (TensorInfo("x", "float32", (3,)),), (TensorInfo("y", "float32", (3,)),),
                  (Node.make("neg", "Neg", ["x"], ["y"]),))
    session = QuantizedSession(QuantizedModel(Model(graph, {}), {}, {}))  # float fallback
    x = np.array([0.1, -2.5, 3.0], np.float64)
    got = session.run({"x": x})["y"]
    assert got.dtype == np.float32 and got.tolist() == (-x.astype(np.float32)).tolist()


def _unary(op: str, x: np.ndarray) -> tuple[object, Model]:
    proto = helper.make_model(helper.make_graph(
        [helper.make_node(op, ["x"], ["y"])], "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(x.shape))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, list(x.shape))]),
        opset_imports=[helper.make_opsetid("", 17)])
    return proto, import_onnx(proto)


@pytest.mark.parametrize("op,values", [
    ("Acosh", [0.5, 1.0, 2.0, -3.0]), ("Atanh", [2.0, -1.0, 1.0, 0.5]),
    ("Log", [0.0, -1.0, 1.0, np.inf]), ("Sqrt", [-1.0, 0.0, 4.0, np.nan]),
    ("Reciprocal", [0.0, -0.0, 2.0, np.inf]), ("Asin", [1.5, -2.0, 0.5, 1.0]),
])
def test_float_kernels_outside_their_domain_give_what_onnx_gives(op: str,
                                                                 values: list[float]) -> None:
    x = np.array(values, np.float32)
    proto, model = _unary(op, x)
    with np.errstate(all="ignore"):
        (want,) = ReferenceEvaluator(proto).run(None, {"x": x})
    old = np.seterr(all="raise")  # a caller's setting: the kernels must not raise under it
    try:
        got = Session(model).run({"x": x})["y"]
        quantized = QuantizedSession(QuantizedModel(model, {}, {})).run({"x": x})["y"]
    finally:
        np.seterr(**old)
    np.testing.assert_array_equal(got, want)  # NaN where onnx has NaN, same infinities
    np.testing.assert_array_equal(quantized, want)


def test_a_calibration_outside_a_domain_gives_no_error_and_a_finite_encoding() -> None:
    from udo_build.quant.pipeline import quantize_model

    x = np.array([0.5, 1.0, 2.0, 4.0], np.float32)  # Acosh(0.5) is NaN
    _, model = _unary("Acosh", x)
    old = np.seterr(all="raise")
    try:
        qmodel = quantize_model(model, {}, [{"x": x}], {"quantizer": "tf"})
    finally:
        np.seterr(**old)
    enc = qmodel.activations["y"]
    assert enc.max == pytest.approx(float(np.arccosh(4.0)), rel=0.02)
