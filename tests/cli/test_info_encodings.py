"""`udo-build info` on a quantized bundle shows each tensor's encoding."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
from onnx import TensorProto, helper, numpy_helper

from udo_build.cli import main
from udo_build.ir.encodings import Encoding
from udo_build.ir.qmodel import QuantizedModel, to_bundle
from udo_build.model.onnx_import import import_onnx


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), stdout=out, stderr=err), out.getvalue(), err.getvalue()


def quantized_bundle(path: Path) -> None:
    w = numpy_helper.from_array(np.ones((2, 3, 1, 1), np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Conv", ["x", "w"], ["y"], name="conv")], "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 4, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 2, 4, 4])], [w])
    model = import_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    qmodel = QuantizedModel(model, {"x": Encoding(8, 0.02, -128), "y": Encoding(16, 0.001, 0)},
                            {"w": [Encoding(8, 0.01, 0, signed=True),
                                   Encoding(8, 0.04, 0, signed=True)]})
    path.write_bytes(to_bundle(qmodel, None, {}).to_bytes())


def test_info_lists_every_encoded_tensor(tmp_path: Path) -> None:
    bundle = tmp_path / "q.udb"
    quantized_bundle(bundle)
    code, out, err = cli("info", str(bundle), "--json")
    assert code == 0, err
    rows = {r["tensor"]: r for r in json.loads(out)["encodings"]}
    assert rows["x"] == {"tensor": "x", "kind": "activation", "bitwidth": 8, "signed": False,
                         "channels": 1, "scale": [0.02, 0.02], "offset": -128,
                         "range": [-2.56, 0.02 * 127]}
    assert (rows["w"]["kind"], rows["w"]["channels"], rows["w"]["scale"], rows["w"]["offset"],
            rows["w"]["range"]) == ("parameter", 2, [0.01, 0.04], -128, [-0.04 * 127, 0.04 * 127])
    code, text, err = cli("info", str(bundle))
    assert code == 0, err
    line = next(row for row in text.splitlines() if row.split()[:2] == ["w", "parameter"])
    assert line.split()[2:7] == ["8", "yes", "2", "0.01..0.04", "-128"]


def test_a_float_bundle_has_no_encodings(tmp_path: Path) -> None:
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")], "tiny",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])])
    bundle = tmp_path / "f.udb"
    from udo_build.ir.bundle import Bundle

    model = import_onnx(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]))
    bundle.write_bytes(Bundle(model).to_bytes())
    code, out, err = cli("info", str(bundle), "--json")
    assert code == 0 and json.loads(out)["encodings"] == [], err
    assert "encodings" not in cli("info", str(bundle))[1]
