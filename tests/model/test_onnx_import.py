"""ONNX import: opset normalization, constants, auto_pad, and validation of custom nodes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from udo_build.errors import Diagnostics, UserError
from udo_build.model.onnx_import import import_onnx, load_onnx
from udo_build.opdef import recipe_package

from ..conftest import EXAMPLES

LIGHT = Path(onnx.__file__).parent / "backend/test/data/light"
OPS = EXAMPLES / "softplus/ops"


def example_defs():  # type: ignore[no-untyped-def]
    return recipe_package(None, None, None, [OPS / "softplus.xml", OPS / "swish.json"],
                          Diagnostics())


def one_node(node: onnx.NodeProto, inputs: list, outputs: list, *, opset: int = 17,
             inits: list | None = None, domains: tuple = ("aisw",)) -> onnx.ModelProto:
    graph = helper.make_graph([node], "g", inputs, outputs, initializer=inits or [])
    imports = [helper.make_opsetid("", opset)] + [helper.make_opsetid(d, 1) for d in domains]
    return helper.make_model(graph, opset_imports=imports)


def vi(name: str, shape: list[int], elem: int = TensorProto.FLOAT) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, elem, shape)


def test_the_example_model_imports_with_its_custom_ops() -> None:
    defs = example_defs()
    model = import_onnx(load_onnx(EXAMPLES / "softplus/model/net.onnx"), opdefs=defs)
    graph = model.graph
    assert [(n.op, n.package) for n in graph.nodes] == [
        ("Conv", "default"), ("Softplus", "SoftplusPackage"), ("Conv", "default"),
        ("Swish", "SoftplusPackage"), ("GlobalAveragePool", "default"),
        ("Flatten", "default"), ("Gemm", "default")]
    assert graph.nodes[1].kwargs == {"beta": 1.0}
    assert graph.nodes[3].kwargs == {"beta": 1.5}
    assert graph.info("swish1_out").shape == (1, 16, 16, 16)
    assert [t.name for t in graph.inputs] == ["input"]
    assert sorted(model.weights) == ["conv1.bias", "conv1.weight", "conv2.bias", "conv2.weight",
                                     "head.bias", "head.weight"]
    again = import_onnx(load_onnx(EXAMPLES / "softplus/model/net.onnx"), opdefs=defs)
    assert again.digest() == model.digest()


def test_custom_node_without_definitions() -> None:
    with pytest.raises(UserError) as info:
        import_onnx(load_onnx(EXAMPLES / "softplus/model/net.onnx"), file="net.onnx")
    assert [p.message for p in info.value.problems] == [
        "node softplus1 (Softplus): no op definition for custom op Softplus (domain 'aisw')",
        "node swish1 (Swish): no op definition for custom op Swish (domain 'aisw')"]


@pytest.mark.parametrize("node, message", [
    (helper.make_node("Softplus", ["x", "x"], ["y"], domain="aisw"),
     "node n (Softplus): has 2 inputs, the op defines 1 (x)"),
    (helper.make_node("Softplus", ["x"], ["y"], domain="aisw", gamma=1.0),
     "node n (Softplus): attribute 'gamma' is not a parameter of op Softplus"),
    (helper.make_node("Softplus", ["x"], ["y"], domain="aisw", beta="big"),
     None),
    (helper.make_node("Softplus", ["x"], ["y"], domain="other"),
     "node n (Softplus): the node's domain is 'other', the op definitions are for domain "
     "'aisw'"),
])
def test_custom_nodes_must_fit_their_definition(node: onnx.NodeProto, message: str | None
                                                ) -> None:
    node.name = "n"
    model = one_node(node, [vi("x", [1, 4])], [vi("y", [1, 4])], domains=(node.domain,))
    with pytest.raises(UserError) as info:
        import_onnx(model, opdefs=example_defs())
    if message is not None:
        assert info.value.problem.message == message


def test_datatypes_of_custom_inputs_are_checked() -> None:
    node = helper.make_node("Softplus", ["x"], ["y"], domain="aisw", name="n")
    model = one_node(node, [vi("x", [1, 4], TensorProto.INT64)], [vi("y", [1, 4])])
    with pytest.raises(UserError) as info:
        import_onnx(model, opdefs=example_defs())
    assert info.value.problem.message.startswith(
        "node n (Softplus): input 'x' is int64, the op allows FLOAT_16, FLOAT_32")


def test_enumerations_mandatory_parameters_and_default_translation(tmp_path: Path) -> None:
    config = tmp_path / "ops.xml"
    config.write_text("""<OpDefCollection PackageName="P" Domain="aisw">
      <OpDefList><OpDef><Name>Relu</Name>
        <Input><Name>x</Name><Datatype>FLOAT_32</Datatype></Input>
        <Output><Name>y</Name><Datatype>FLOAT_32</Datatype></Output>
        <UseDefaultTranslation>true</UseDefaultTranslation>
      </OpDef>
      <OpDef><Name>Clamp</Name>
        <Input><Name>x</Name><Datatype>FLOAT_32</Datatype></Input>
        <Output><Name>y</Name><Datatype>FLOAT_32</Datatype></Output>
        <Parameter><Name>mode</Name><Datatype>UINT_32</Datatype><Default>FAST</Default>
          <Enumeration><Enum>EXACT</Enum><Enum>FAST</Enum></Enumeration></Parameter>
        <Parameter><Name>limit</Name><Mandatory>true</Mandatory>
          <Datatype>FLOAT_32</Datatype></Parameter>
      </OpDef></OpDefList></OpDefCollection>""")
    defs = recipe_package(None, None, None, [config], Diagnostics())
    relu = helper.make_node("Relu", ["x"], ["y"], name="r")  # a native op the UDO overrides
    got = import_onnx(one_node(relu, [vi("x", [2])], [vi("y", [2])]), opdefs=defs)
    assert (got.graph.nodes[0].package, got.graph.nodes[0].op) == ("P", "Relu")
    clamp = helper.make_node("Clamp", ["x"], ["y"], name="c", domain="aisw", mode="EXACT",
                             limit=6)
    got = import_onnx(one_node(clamp, [vi("x", [2])], [vi("y", [2])]), opdefs=defs)
    assert got.graph.nodes[0].kwargs == {"limit": 6.0, "mode": 0}
    clamp = helper.make_node("Clamp", ["x"], ["y"], name="c", domain="aisw")
    with pytest.raises(UserError) as info:
        import_onnx(one_node(clamp, [vi("x", [2])], [vi("y", [2])]), opdefs=defs)
    assert info.value.problem.message == (
        "node c (Clamp): the mandatory parameter 'limit' is missing")


def test_constants_become_weights_and_auto_pad_is_explicit() -> None:
    nodes = [
        helper.make_node("ConstantOfShape", ["wshape"], ["w"], name="fill",
                         value=helper.make_tensor("v", TensorProto.FLOAT, [1], [0.5])),
        helper.make_node("Constant", [], ["b"], name="c",
                         value=helper.make_tensor("b", TensorProto.FLOAT, [2], [1, 2])),
        helper.make_node("Conv", ["x", "w", "b"], ["y"], name="conv", auto_pad="SAME_UPPER",
                         strides=[2, 2]),
    ]
    shape = helper.make_tensor("wshape", TensorProto.INT64, [4], [2, 1, 3, 3])
    graph = helper.make_graph(nodes, "g", [vi("x", [1, 1, 5, 6])], [vi("y", [1, 2, 3, 3])],
                              initializer=[shape])
    model = import_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    (conv,) = model.graph.nodes
    assert conv.kwargs == {"pads": [1, 0, 1, 1], "strides": [2, 2]}
    assert sorted(model.weights) == ["b", "w"]
    np.testing.assert_array_equal(model.weights["w"], np.full((2, 1, 3, 3), 0.5, np.float32))


def test_old_opsets_are_converted_and_dims_overridden() -> None:
    model = import_onnx(load_onnx(LIGHT / "light_squeezenet.onnx"),
                        input_dims={"data_0": [2, 3, 224, 224]})
    ops = {n.op for n in model.graph.nodes}
    assert "ConstantOfShape" not in ops and "Conv" in ops
    assert model.graph.inputs[0].shape == (2, 3, 224, 224)
    assert model.graph.outputs[0].shape == (2, 1000, 1, 1)
    with pytest.raises(UserError) as info:
        import_onnx(load_onnx(LIGHT / "light_squeezenet.onnx"), input_dims={"nope": [1]})
    assert info.value.problem.message == (
        "input_dimensions names 'nope', which is not a model input")


def test_unreadable_models(tmp_path: Path) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\xff\x00garbage" * 10)
    with pytest.raises(UserError) as info:
        load_onnx(bad)
    assert info.value.problem.message.startswith("not an ONNX model")
    with pytest.raises(UserError):
        load_onnx(tmp_path / "missing.onnx")
