"""Resize 10 converted up to opset 17 keeps its meaning (asymmetric coordinates, nearest rounded
down): onnx's adapter leaves Resize 11's half_pixel default in (model/converter_gaps.py)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from udo_build.model.onnx_import import import_onnx
from udo_build.runtime.float_session import Session


def resize(opset: int, mode: str, **attrs: str):  # type: ignore[no-untyped-def]
    scales = numpy_helper.from_array(np.array([1, 1, 1.5, 0.6], np.float32), "scales")
    inputs = ["x", "scales"] if opset == 10 else ["x", "", "scales"]  # roi optional from 13
    node = helper.make_node("Resize", inputs, ["y"], mode=mode, **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 1, 3, 5])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 1, 4, 3])], initializer=[scales])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_10_computes_as_resize_11_asymmetric_rounding_down(mode: str) -> None:
    x = np.arange(15, dtype=np.float32).reshape(1, 1, 3, 5) ** 2
    model = import_onnx(resize(10, mode))
    (node,) = model.graph.nodes
    assert node.kwargs["coordinate_transformation_mode"] == "asymmetric"
    same = resize(13, mode, coordinate_transformation_mode="asymmetric", nearest_mode="floor")
    (want,) = ReferenceEvaluator(same).run(None, {"x": x})
    np.testing.assert_allclose(Session(model).run({"x": x})["y"], want, rtol=1e-6)
    (half_pixel,) = ReferenceEvaluator(resize(13, mode)).run(None, {"x": x})
    assert not np.allclose(half_pixel, want)  # the default the converter left computes others


def test_an_attribute_the_model_sets_is_kept() -> None:
    model = import_onnx(resize(13, "nearest", nearest_mode="ceil"))
    assert model.graph.nodes[0].kwargs.get("nearest_mode") == "ceil"
    assert "coordinate_transformation_mode" not in model.graph.nodes[0].kwargs
