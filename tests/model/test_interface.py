"""A standard node against its kernel's signature (model/interface.py): a parameter that is both
an input and an attribute (the reductions' `axes`) binds either way; the graph records the
model's ONNX opset; an opset the installed onnx does not know is refused at convert."""

from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from udo_build.cli import main
from udo_build.errors import UserError
from udo_build.model.interface import adapt_node, kernel_interface
from udo_build.model.onnx_import import import_onnx
from udo_build.runtime.float_session import Session

REDUCTIONS = ["ReduceMean", "ReduceMax", "ReduceMin", "ReduceSum", "ReduceL2", "ReduceProd",
              "ReduceLogSumExp"]


def reduction(op: str, opset: int, axes: list[int], keepdims: int = 1) -> onnx.ModelProto:
    """`op` over `axes`: the attribute up to opset 17 (ReduceSum: 12), a constant input after."""
    inits = []
    if opset >= (13 if op == "ReduceSum" else 18):
        inits.append(numpy_helper.from_array(np.array(axes, np.int64), "axes"))
        node = helper.make_node(op, ["x", "axes"], ["y"], keepdims=keepdims)
    else:
        node = helper.make_node(op, ["x"], ["y"], axes=axes, keepdims=keepdims)
    rank = 3 if keepdims else 3 - len(axes)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [2, 3, 4])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [None] * rank)], initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


@pytest.mark.parametrize("opset", [11, 13, 17, 18])
@pytest.mark.parametrize("op", REDUCTIONS)
def test_reductions_take_axes_as_an_attribute_or_an_input(op: str, opset: int) -> None:
    x = np.random.default_rng(3).standard_normal((2, 3, 4)).astype(np.float32)
    for axes, keepdims in (([1], 1), ([0, -1], 0)):
        proto = reduction(op, opset, axes, keepdims)
        model = import_onnx(proto)
        (node,) = model.graph.nodes
        as_attribute = len(node.inputs) == 1  # the converter to 17 made ReduceSum's an input
        assert (node.kwargs.get("axes") == axes) == as_attribute
        (want,) = ReferenceEvaluator(proto).run(None, {"x": x})
        got = Session(model).run({"x": x})["y"]
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_an_attribute_beside_the_input_it_would_bind_is_refused() -> None:
    assert {"axes", "keepdims", "data"} <= kernel_interface("ReduceMean").attributes
    weights = {"axes": np.array([1])}
    node = helper.make_node("ReduceMean", ["x", "axes"], ["y"], axes=[1])
    _, _, refused = adapt_node(node, 18, {"axes": [1]}, weights)
    assert refused == ["attribute axes beside input 1"]
    node = helper.make_node("ReduceMean", ["x"], ["y"], axes=[1])
    inputs, attrs, refused = adapt_node(node, 13, {"axes": [1], "keepdims": 0}, weights)
    assert (inputs, attrs, refused) == (["x"], {"axes": [1], "keepdims": 0}, [])


@pytest.mark.parametrize("opset, recorded", [(11, 17), (13, 17), (17, 17), (18, 18), (21, 21)])
def test_the_graph_records_the_opset_its_nodes_are_at(opset: int, recorded: int) -> None:
    assert import_onnx(reduction("ReduceMax", opset, [1])).graph.opset == recorded


def test_an_opset_newer_than_onnx_knows_is_refused_at_convert(tmp_path: Path) -> None:
    newest = onnx.defs.onnx_opset_version()
    proto = reduction("ReduceMax", 18, [1])
    proto.opset_import[0].version = 99
    with pytest.raises(UserError) as info:
        import_onnx(proto, file="m.onnx")
    assert info.value.problem.message == (
        f"ONNX opset 99 not supported: the installed onnx knows opsets 1 to {newest}")
    onnx.save(proto, tmp_path / "m.onnx")
    err = io.StringIO()
    code = main(["convert", str(tmp_path / "m.onnx"), "--out", str(tmp_path / "m.udb")],
                stdout=io.StringIO(), stderr=err, env={})
    assert code == 2 and "ONNX opset 99" in err.getvalue() and f"1 to {newest}" in err.getvalue()
    assert not (tmp_path / "m.udb").exists()
