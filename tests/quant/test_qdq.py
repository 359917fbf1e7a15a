"""The QDQ export (udo_build.quant.qdq) and `udo-build export BUNDLE --qdq OUT.onnx`: where the
QuantizeLinear/DequantizeLinear pairs go, the types and values of quantized weights and biases,
absorbed activations, float fallback, custom ops, 16-bit encodings, and onnxruntime running the
result. Its numbers are checked against the exact evaluation of the export (oracle.py), and
against onnxruntime's only where its integer kernels are exact on this machine (a probe decides;
per-op numbers against the integer path are in test_integer.py)."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from udo_build.cli import main
from udo_build.ir import Graph, Model, Node
from udo_build.ir.bundle import Bundle, load_bundle
from udo_build.ir.qmodel import QuantizedModel, to_bundle
from udo_build.quant.qdq import to_qdq
from udo_build.runtime.integer import QuantizedSession

from .oracle import ExactQdq, onnxruntime_if_exact
from .qhelpers import encode, f32

ort = pytest.importorskip("onnxruntime")
_rng = np.random.default_rng(7)


def _model() -> Model:
    """conv(+bias) -> relu (absorbed) -> maxpool -> sigmoid -> flatten -> gemm (K, N) -> y,
    and a side Sum of two convs' outputs."""
    nodes = (Node.make("conv", "Conv", ["x", "w", "b"], ["c"], {"pads": [1, 1, 1, 1]}),
             Node.make("relu", "Relu", ["c"], ["r"]),
             Node.make("pool", "MaxPool", ["r"], ["p"], {"kernel_shape": [2, 2],
                                                         "strides": [2, 2]}),
             Node.make("sig", "Sigmoid", ["p"], ["s"]),
             Node.make("sum", "Sum", ["s", "p"], ["u"]),
             Node.make("flat", "Flatten", ["u"], ["f"], {"axis": 1}),
             Node.make("fc", "Gemm", ["f", "fc_w", "fc_b"], ["y"]))
    weights = {"w": _rng.standard_normal((4, 3, 3, 3)).astype(np.float32) * 0.3,
               "b": _rng.standard_normal(4).astype(np.float32) * 0.1,
               "fc_w": _rng.standard_normal((64, 5)).astype(np.float32) * 0.2,
               "fc_b": _rng.standard_normal(5).astype(np.float32) * 0.1}
    return Model(Graph("g", (f32("x", (1, 3, 8, 8)),), (f32("y", (1, 5)),), nodes), weights)


def _samples(n: int) -> list[dict[str, np.ndarray]]:
    return [{"x": _rng.standard_normal((1, 3, 8, 8)).astype(np.float32)} for _ in range(n)]


def _by_output(proto: onnx.ModelProto) -> dict[str, onnx.NodeProto]:
    return {o: n for n in proto.graph.node for o in n.output}


def _initializers(proto: onnx.ModelProto) -> dict[str, np.ndarray]:
    return {i.name: numpy_helper.to_array(i) for i in proto.graph.initializer}


def test_activations_weights_and_biases_get_their_qdq() -> None:
    qmodel = encode(_model(), _samples(3), unencoded=["s"])
    proto = to_qdq(qmodel)
    onnx.checker.check_model(proto, full_check=True)
    assert proto.ir_version == 8 and [(o.domain, o.version) for o in proto.opset_import] == [
        ("", 17)]
    nodes, inits = _by_output(proto), _initializers(proto)
    # an encoded activation: producer -> T_float -> Q -> DQ -> T, zero point = -offset (uint8)
    for name in ("x", "r", "p", "u", "f", "y"):
        enc = qmodel.activations[name]
        dq = nodes[name] if name != "x" else nodes["x_dequantized"]
        q = nodes[dq.input[0]]
        assert (q.op_type, dq.op_type) == ("QuantizeLinear", "DequantizeLinear")
        assert inits[q.input[1]] == np.float32(enc.scale)
        assert inits[q.input[2]].dtype == np.uint8 and int(inits[q.input[2]]) == -enc.offset
    # the conv's weights int8 per output channel (axis 0), its bias int32 at s_x * s_w[c]
    w_dq = nodes["w"]
    w_q = inits[w_dq.input[0]]
    encs = qmodel.params["w"]
    assert w_q.dtype == np.int8 and np.abs(w_q).max() == 127
    np.testing.assert_array_equal(inits[w_dq.input[1]], np.float32([e.scale for e in encs]))
    assert [a.i for a in w_dq.attribute if a.name == "axis"] == [0]
    b_dq = nodes["b"]
    assert inits[b_dq.input[0]].dtype == np.int32
    np.testing.assert_allclose(inits[b_dq.input[1]], [qmodel.activations["x"].scale * e.scale
                                                      for e in encs], rtol=1e-7)
    # Gemm's B is (K, N): one scale per output column, axis 1
    assert [a.i for a in nodes["fc_w"].attribute if a.name == "axis"] == [1]


def test_absorbed_relus_stay_between_their_conv_and_its_q_and_float_tensors_stay_float() -> None:
    qmodel = encode(_model(), _samples(3), unencoded=["s"])
    assert "c" not in qmodel.activations and "s" not in qmodel.activations
    nodes = _by_output(to_qdq(qmodel))
    assert nodes["c"].op_type == "Conv"  # no QDQ on the absorbed conv output
    relu = nodes[nodes[nodes["r"].input[0]].input[0]]
    assert relu.op_type == "Relu" and list(relu.input) == ["c"]
    assert nodes["s"].op_type == "Sigmoid"  # float fallback: no QDQ after it
    assert nodes["u_float"].op_type == "Add" and list(nodes["u_float"].input) == ["s", "p"]


def _check_numbers(proto: onnx.ModelProto, qmodel: QuantizedModel,
                   feed: dict[str, np.ndarray], theirs: np.ndarray) -> None:
    """The integer path within 1 LSB of the export's exact result (roundings 1 apart in an
    early layer may carry), and of onnxruntime's where its kernels are exact here."""
    ours = QuantizedSession(qmodel).run_quantized(feed)["y"]
    exact = ExactQdq(proto).quantized(feed, ["y"])["y"]
    assert np.abs(ours.astype(int) - exact).max() <= 1
    if onnxruntime_if_exact()[0] is not None:
        assert np.abs(ours.astype(int) - qmodel.activations["y"].quantize(theirs)).max() <= 1


def test_onnxruntime_runs_the_export_like_the_integer_path() -> None:
    qmodel = encode(_model(), _samples(3), unencoded=["s"])
    options = ort.SessionOptions()
    options.log_severity_level = 3
    proto = to_qdq(qmodel)
    session = ort.InferenceSession(proto.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    feed = _samples(1)[0]
    theirs = session.run(["y"], feed)[0]
    assert theirs.shape == (1, 5)
    _check_numbers(proto, qmodel, feed, theirs)


def test_sixteen_bit_encodings_use_the_onnxruntime_qdq() -> None:
    qmodel = encode(_model(), _samples(3), act_bits=16)
    proto = to_qdq(qmodel)
    nodes, inits = _by_output(proto), _initializers(proto)
    q = nodes[nodes["r"].input[0]]
    assert q.domain == "com.microsoft" and inits[q.input[2]].dtype == np.uint16
    assert ("com.microsoft", 1) in [(o.domain, o.version) for o in proto.opset_import]
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(proto.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    assert session.run(["y"], _samples(1)[0])[0].shape == (1, 5)


def test_custom_ops_stay_nodes_of_their_domain() -> None:
    from udo_build.kernels.load import load_kernels

    root = Path(__file__).resolve().parents[2]
    package = load_kernels(root / "examples" / "softplus" / "ops" / "kernels.py")[0]
    nodes = (Node.make("sp", "Softplus", ["x"], ["y"], {"beta": 2.0}, package=package.name),)
    model = Model(Graph("g", (f32("x", (2, 8)),), (f32("y", (2, 8)),), nodes))
    samples = [{"x": _rng.standard_normal((2, 8)).astype(np.float32)} for _ in range(2)]
    qmodel = encode(model, samples, packages={package.name: package})
    proto = to_qdq(qmodel, {package.name: "aisw"})
    node = _by_output(proto)["y_float"]
    assert (node.domain, node.op_type) == ("aisw", "Softplus")
    assert [a.f for a in node.attribute] == [2.0]
    assert ("aisw", 1) in [(o.domain, o.version) for o in proto.opset_import]
    onnx.checker.check_model(proto)


# -- the command ---------------------------------------------------------------------------------


def _bundle(tmp_path: Path) -> Path:
    qmodel = encode(_model(), _samples(3))
    path = tmp_path / "net_quantized.udb"
    path.write_bytes(to_bundle(qmodel, None, {"producer": "test"}).to_bytes())
    return path


def test_export_writes_a_model_onnxruntime_runs(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path)
    out, err = io.StringIO(), io.StringIO()
    code = main(["export", str(bundle), "--qdq", str(tmp_path / "net.onnx"), "--json"],
                stdout=out, stderr=err)
    assert code == 0, err.getvalue()
    report = json.loads(out.getvalue())
    assert report["ok"] and report["quantize_linear"] == 7 and report["custom_ops"] == []
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(str(tmp_path / "net.onnx"), options,
                                   providers=["CPUExecutionProvider"])
    from udo_build.ir.qmodel import from_bundle

    qmodel = from_bundle(load_bundle(bundle))
    feed = _samples(1)[0]
    theirs = session.run(["y"], feed)[0]
    assert theirs.shape == (1, 5)
    _check_numbers(onnx.load(str(tmp_path / "net.onnx")), qmodel, feed, theirs)


def test_exporting_a_float_bundle_is_a_user_error(tmp_path: Path) -> None:
    path = tmp_path / "net.udb"
    path.write_bytes(Bundle(_model()).to_bytes())
    err = io.StringIO()
    code = main(["export", str(path), "--qdq", str(tmp_path / "out.onnx")],
                stdout=io.StringIO(), stderr=err)
    assert code == 2 and "not quantized" in err.getvalue()
    assert not (tmp_path / "out.onnx").exists()


def test_a_dropout_ratio_read_back_from_a_bundle_is_exported_as_a_scalar() -> None:
    """SqueezeNet of the onnx wheel (random weights): its Dropout's ratio is a scalar constant
    (a bundle keeps it 0-d); its QDQ export dequantizes it into a scalar, as onnxruntime needs
    a ratio."""
    import sys

    from udo_build.ir.bundle import read_bundle
    from udo_build.ir.qmodel import from_bundle
    from udo_build.model.onnx_import import import_onnx

    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
    try:
        import _light_models as light
    finally:
        sys.path.pop(0)
    model = import_onnx(light.randomized("squeezenet", 0, import_onnx))
    x = model.graph.inputs[0]
    feeds = [{x.name: _rng.standard_normal(x.static_shape).astype(np.float32)} for _ in range(3)]
    bundle = read_bundle(to_bundle(encode(model, feeds[:2]), None, {}).to_bytes())
    qmodel = from_bundle(bundle)
    dropout = next(n for n in qmodel.model.graph.nodes if n.op == "Dropout")
    ratio = dropout.inputs[1]
    assert qmodel.model.weights[ratio].shape == () and ratio in qmodel.params
    proto = to_qdq(qmodel)
    ratio_q = _initializers(proto)[_by_output(proto)[ratio].input[0]]
    assert ratio_q.shape == ()  # the quantized ratio, dequantized into a scalar
    options = ort.SessionOptions()
    options.log_severity_level = 3
    session = ort.InferenceSession(proto.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    y = qmodel.model.graph.outputs[0].name
    theirs = session.run([y], feeds[2])[0]
    ours = QuantizedSession(qmodel).run_quantized(feeds[2], [y])[y]
    exact = ExactQdq(proto).quantized(feeds[2], [y])[y]
    assert theirs.shape == ours.shape == (1, 1000, 1, 1)
    assert np.abs(ours.astype(int) - exact).max() <= 2  # as in test_integer's SqueezeNet test
    if onnxruntime_if_exact()[0] is not None:
        theirs_q = qmodel.activations[y].quantize(theirs)
        assert np.abs(ours.astype(int) - theirs_q).max() <= 2
