"""Shapes past the custom ops: the importer fills what ONNX's shape inference leaves unknown
after a custom node, from the exporter's records or from the op's kernels."""

from __future__ import annotations

import onnx

from udo_build.errors import Diagnostics
from udo_build.ir import Model
from udo_build.ir.bundle import Bundle
from udo_build.kernels.load import packages_for
from udo_build.model.info import describe
from udo_build.model.onnx_import import import_onnx, load_onnx
from udo_build.opdef import recipe_package

from ..conftest import EXAMPLES

NET = EXAMPLES / "softplus/model/net.onnx"
OPS = EXAMPLES / "softplus/ops"
BATCH4 = {"input": [4, 3, 32, 32]}


def defs():  # type: ignore[no-untyped-def]
    return recipe_package(None, None, None, [OPS / "softplus.xml", OPS / "swish.json"],
                          Diagnostics())


def standard_twin() -> onnx.ModelProto:
    """The example with its custom ops replaced by standard ops of the same shapes."""
    model = load_onnx(NET)
    for node in model.graph.node:
        if node.domain == "aisw":
            node.op_type = {"Softplus": "Softplus", "Swish": "Sigmoid"}[node.op_type]
            node.domain = ""
            del node.attribute[:]
    return model


def unknown(model: Model) -> list[str]:
    infos = model.graph.infos()
    return [o for n in model.graph.nodes for o in n.outputs
            if o not in infos or infos[o].static_shape is None]


def macs(model: Model, opdefs: object = None) -> int:
    return describe(Bundle(model, opdefs, {}))["total_macs"]


def test_other_dims_keep_static_shapes_past_the_custom_ops() -> None:
    package = defs()
    model = import_onnx(load_onnx(NET), opdefs=package, input_dims=BATCH4)
    assert unknown(model) == []
    infos = model.graph.infos()
    assert infos["softplus1_out"].static_shape == (4, 8, 32, 32)
    assert infos["swish1_out"].static_shape == (4, 16, 16, 16)
    assert infos["logits"].static_shape == (4, 10)
    twin = import_onnx(standard_twin(), input_dims=BATCH4)
    assert unknown(twin) == []
    # conv1 4x8x32x32x27 + conv2 4x16x16x16x72 + head 4x10x16
    assert macs(model, package.to_json()) == macs(twin) == 884_736 + 1_179_648 + 640


def test_kernels_give_the_shapes_the_exporter_did_not_record() -> None:
    package = defs()
    proto = load_onnx(NET)
    del proto.graph.value_info[:]  # no exporter records: only the kernels can tell
    bare = import_onnx(proto, opdefs=package)
    assert "softplus1_out" in unknown(bare)  # the gap stays without kernels, no failure
    packages = packages_for(Bundle(bare, package.to_json(), {}), [OPS / "kernels.py"])
    model = import_onnx(proto, opdefs=package, input_dims={"input": [2, 3, 20, 20]},
                        packages=packages)
    assert unknown(model) == []
    assert model.graph.infos()["swish1_out"].static_shape == (2, 16, 10, 10)
    twin = import_onnx(standard_twin(), input_dims={"input": [2, 3, 20, 20]})
    assert macs(model, package.to_json()) == macs(twin)
