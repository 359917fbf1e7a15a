"""Custom ops through the whole model path: convert -> bundle -> float runtime with the user's
kernels, against onnxruntime running the same network with standard ops in their place."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
import pytest
from onnx import TensorProto, helper, numpy_helper

from udo_build.cli import main
from udo_build.errors import Diagnostics
from udo_build.ir.bundle import load_bundle
from udo_build.kernels.load import load_kernels
from udo_build.model.onnx_import import import_onnx
from udo_build.opdef import recipe_package
from udo_build.runtime.float_session import Session

from ..conftest import EXAMPLES

LIGHT = Path(onnx.__file__).parent / "backend/test/data/light"
OPS = EXAMPLES / "softplus/ops"


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), stdout=out, stderr=err, env={}), out.getvalue(), err.getvalue()


def randomized(model: onnx.ModelProto, seed: int = 0) -> onnx.ModelProto:
    """The light model with its ConstantOfShape weights replaced by scaled random values."""
    rng = np.random.default_rng(seed)
    shapes = {i.name: numpy_helper.to_array(i) for i in model.graph.initializer}
    nodes, inits = [], list(model.graph.initializer)
    for node in model.graph.node:
        if node.op_type == "ConstantOfShape" and node.input[0] in shapes:
            shape = tuple(int(d) for d in shapes[node.input[0]])
            fan_in = int(np.prod(shape[1:])) if len(shape) > 1 else 1
            value = rng.standard_normal(shape) * np.sqrt(1.0 / fan_in)
            if len(shape) == 1:  # biases, batch-norm vectors: small positive
                value = 0.1 + 0.05 * np.abs(value)
            inits.append(numpy_helper.from_array(value.astype(np.float32), node.output[0]))
        else:
            nodes.append(node)
    names = {i.name for i in inits}
    inputs = [i for i in model.graph.input if i.name not in names]
    graph = helper.make_graph(nodes, model.graph.name, inputs, model.graph.output, inits)
    out = helper.make_model(graph, opset_imports=model.opset_import)
    out.ir_version = 8
    return out


def with_softplus(model: onnx.ModelProto, custom: bool) -> onnx.ModelProto:
    """Every Relu of the model becomes a Softplus: the UDO (domain aisw) or the ONNX op."""
    model = onnx.ModelProto.FromString(model.SerializeToString())
    for node in model.graph.node:
        if node.op_type == "Relu":
            node.op_type = "Softplus"
            if custom:
                node.domain = "aisw"
    if custom:
        model.opset_import.append(helper.make_opsetid("aisw", 1))
    return model


def test_softplus_inside_squeezenet_matches_onnxruntime() -> None:
    base = randomized(onnx.load(LIGHT / "light_squeezenet.onnx"))
    defs = recipe_package(None, None, None, [OPS / "softplus.xml"], Diagnostics())
    model = import_onnx(with_softplus(base, custom=True), opdefs=defs)
    assert sum(n.op == "Softplus" and n.package == "SoftplusPackage"
               for n in model.graph.nodes) == 26
    (package,) = load_kernels(OPS / "kernels.py")
    x = np.random.default_rng(1).standard_normal((1, 3, 224, 224)).astype(np.float32)
    ours = Session(model, {"SoftplusPackage": package}).run({"data_0": x})
    reference = ort.InferenceSession(with_softplus(base, custom=False).SerializeToString(),
                                     providers=["CPUExecutionProvider"])
    (expected,) = reference.run(None, {"data_0": x})
    (got,) = ours.values()
    scale = float(np.abs(expected).max())
    assert np.abs(got.reshape(expected.shape) - expected).max() <= 1e-4 * scale


def example_reference(x: np.ndarray) -> np.ndarray:
    """The example network with standard ops in place of Softplus and Swish, on onnxruntime."""
    model = onnx.load(EXAMPLES / "softplus/model/net.onnx")
    nodes = []
    for node in model.graph.node:
        if node.op_type == "Softplus":
            nodes.append(helper.make_node("Softplus", node.input, node.output))
        elif node.op_type == "Swish":
            beta = helper.make_tensor("beta", TensorProto.FLOAT, [], [1.5])
            nodes += [helper.make_node("Constant", [], ["b15"], value=beta),
                      helper.make_node("Mul", [node.input[0], "b15"], ["bx"]),
                      helper.make_node("Sigmoid", ["bx"], ["sig"]),
                      helper.make_node("Mul", [node.input[0], "sig"], node.output)]
        else:
            nodes.append(node)
    graph = helper.make_graph(nodes, "ref", model.graph.input, model.graph.output,
                              model.graph.initializer)
    ref = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    ref.ir_version = 8  # what every onnxruntime reads
    session = ort.InferenceSession(ref.SerializeToString(), providers=["CPUExecutionProvider"])
    return session.run(None, {"input": x})[0]


def test_convert_info_and_run_commands(tmp_path: Path) -> None:
    bundle = tmp_path / "net.udb"
    code, out, err = cli("convert", str(EXAMPLES / "softplus/model/net.onnx"), "--opdef",
                         str(OPS / "softplus.xml"), "--opdef", str(OPS / "swish.json"),
                         "--out", str(bundle), "--json")
    assert code == 0, err
    assert json.loads(out)["udos"] == ["SoftplusPackage::Softplus", "SoftplusPackage::Swish"]
    code, out, err = cli("info", str(bundle), "--json")
    info = json.loads(out)
    assert [layer["type"] for layer in info["layers"]][:2] == ["Conv",
                                                              "SoftplusPackage::Softplus"]
    assert info["inputs"] == [{"name": "input", "dims": [1, 3, 32, 32], "type": "float32"}]
    assert info["total_macs"] == 8 * 32 * 32 * 27 + 16 * 16 * 16 * 72 + 10 * 16
    results = tmp_path / "results"
    code, out, err = cli("run", str(bundle), "--input-list",
                         str(EXAMPLES / "softplus/data/test.txt"), "--output-dir", str(results),
                         "--kernels", str(OPS / "kernels.py"), "--outputs", "logits,pool_out")
    assert code == 0, err
    assert sorted(p.name for p in (results / "Result_3").iterdir()) == [
        "logits.npy", "logits.raw", "pool_out.npy", "pool_out.raw"]
    x = np.fromfile(EXAMPLES / "softplus/data/test/input_02.raw", "<f4").reshape(1, 3, 32, 32)
    got = np.fromfile(results / "Result_2" / "logits.raw", "<f4").reshape(1, 10)
    np.testing.assert_allclose(got, example_reference(x), rtol=1e-5, atol=1e-6)
    assert np.load(results / "Result_2" / "pool_out.npy").shape == (1, 16, 1, 1)


def test_run_without_kernels_or_with_failing_kernels(tmp_path: Path) -> None:
    bundle = tmp_path / "net.udb"
    assert cli("convert", str(EXAMPLES / "softplus/model/net.onnx"), "--opdef",
               str(OPS / "softplus.xml"), "--opdef", str(OPS / "swish.json"),
               "--out", str(bundle))[0] == 0
    args = ["run", str(bundle), "--input-list", str(EXAMPLES / "softplus/data/test.txt"),
            "--output-dir", str(tmp_path / "r")]
    code, out, err = cli(*args)
    assert code == 2
    assert "give their numpy kernels (kernels: in the recipe, or --kernels FILE)" in err
    broken = tmp_path / "broken.py"
    broken.write_text("from udo_build.kernels.oppkg import OpPackage\npackage = OpPackage('P')\n"
                      "@package.op('Softplus')\ndef softplus(x, *, beta=1.0):\n"
                      "    raise ValueError('oops')\n"
                      "@package.op('Swish')\ndef swish(x, *, beta=1.0):\n    return x\n")
    code, out, err = cli(*args, "--kernels", str(broken))
    assert code == 1
    assert "SoftplusPackage::Softplus (node softplus1) raised ValueError: oops" in err
    assert load_bundle(bundle).model.graph.nodes[1].op == "Softplus"


@pytest.mark.parametrize("name", ["light_resnet50.onnx", "light_shufflenet.onnx"])
def test_bundles_of_real_architectures_round_trip(name: str, tmp_path: Path) -> None:
    bundle = tmp_path / "m.udb"
    assert cli("convert", str(LIGHT / name), "--out", str(bundle))[0] == 0
    model = load_bundle(bundle).model
    assert model.digest() == import_onnx(onnx.load(LIGHT / name)).digest()
