"""Generate the encoder example: one pre-norm transformer encoder block with a fused RMSNorm UDO.

    python examples/encoder/make_example.py

The block (D=64, 4 heads of 16, FFN 128), as exporters write it at opset 17:

    h  = RmsNorm(x, g1)                       the custom op (domain aisw), ops/rmsnorm.xml
    q, k, v = h @ Wq + bq, h @ Wk + bk, h @ Wv + bv
    heads: Reshape [0, -1, 4, 16], Transpose (K to [0, 2, 3, 1], i.e. K^T)
    a  = Softmax(q @ k^T * 1/sqrt(16)) @ v, back to [1, T, 64], @ Wo + bo
    x1 = x + a
    y  = x1 + Gelu(LayerNormalization(x1) @ W1 + b1) @ W2 + b2     (Gelu through Erf)

Writes, next to this script:
  model/encoder.onnx            the model, input x [1, 16, 64] (T may be 16 to 32)
  data/calib/*.raw, calib.txt   64 calibration inputs (raw little-endian float32)
  data/test/*.raw, test.txt     4 held-out inputs
  data/test_t32/*, test_t32.txt 2 held-out inputs of 32 tokens (x [1, 32, 64])

`build_model(reference=True)` gives the same block with the RmsNorm node replaced by its
standard-op decomposition, which onnxruntime runs (the tests compare the two). The same script
always writes the same bytes (fixed seeds).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent
DOMAIN = "aisw"
T, D, HEADS, FFN = 16, 64, 4, 128
DH = D // HEADS
EPS = 1e-6
INPUT_SHAPE = (1, T, D)


class Builder:
    """Collects nodes and initializers; each method adds one layer and returns its output."""

    def __init__(self, seed: int) -> None:
        self.rng = np.random.default_rng(seed)
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[onnx.TensorProto] = []

    def const(self, name: str, value: np.ndarray) -> str:
        self.inits.append(numpy_helper.from_array(value, name))
        return name

    def node(self, op: str, inputs: list[str], name: str, domain: str = "", **attrs) -> str:
        self.nodes.append(helper.make_node(op, inputs, [f"{name}_out"], name=name,
                                           domain=domain, **attrs))
        return f"{name}_out"

    def linear(self, x: str, name: str, fan_in: int, fan_out: int, bias: bool = True) -> str:
        w = self.rng.standard_normal((fan_in, fan_out)) / np.sqrt(fan_in)
        y = self.node("MatMul", [x, self.const(f"{name}.weight", w.astype(np.float32))],
                      f"{name}_matmul" if bias else name)
        if not bias:
            return y
        b = (self.rng.standard_normal(fan_out) * 0.02).astype(np.float32)
        return self.node("Add", [y, self.const(f"{name}.bias", b)], name)

    def gain(self, name: str) -> str:
        return self.const(name, (1.0 + 0.1 * self.rng.standard_normal(D)).astype(np.float32))


def rms_norm(b: Builder, x: str, gamma: str, name: str, reference: bool) -> str:
    """The RmsNorm UDO, or (reference) its decomposition: x / sqrt(mean(x^2) + eps) * gamma."""
    if not reference:
        return b.node("RmsNorm", [x, gamma], name, domain=DOMAIN, epsilon=EPS)
    sq = b.node("Mul", [x, x], f"{name}_square")
    mean = b.node("ReduceMean", [sq], f"{name}_mean", axes=[-1], keepdims=1)
    eps = b.const(f"{name}.epsilon", np.array(EPS, np.float32))
    rms = b.node("Sqrt", [b.node("Add", [mean, eps], f"{name}_add_eps")], f"{name}_rms")
    return b.node("Mul", [b.node("Div", [x, rms], f"{name}_div"), gamma], name)


def heads(b: Builder, x: str, name: str, perm: list[int]) -> str:
    shape = b.const(f"{name}.shape", np.array([0, -1, HEADS, DH], np.int64))
    return b.node("Transpose", [b.node("Reshape", [x, shape], f"{name}_reshape")], name,
                  perm=perm)


def attention(b: Builder, h: str) -> str:
    q = heads(b, b.linear(h, "q_proj", D, D), "q_heads", [0, 2, 1, 3])
    k = heads(b, b.linear(h, "k_proj", D, D), "k_heads", [0, 2, 3, 1])
    v = heads(b, b.linear(h, "v_proj", D, D), "v_heads", [0, 2, 1, 3])
    scores = b.node("MatMul", [q, k], "scores")
    scale = b.const("scale", np.array(1.0 / np.sqrt(DH), np.float32))
    probs = b.node("Softmax", [b.node("Mul", [scores, scale], "scaled")], "probs", axis=-1)
    ctx = b.node("Transpose", [b.node("MatMul", [probs, v], "context")], "context_t",
                 perm=[0, 2, 1, 3])
    merged = b.node("Reshape", [ctx, b.const("merge.shape", np.array([0, -1, D], np.int64))],
                    "context_merged")
    return b.linear(merged, "o_proj", D, D)


def gelu(b: Builder, x: str, name: str) -> str:
    """Gelu as exporters write it: x * 0.5 * (1 + erf(x / sqrt(2)))."""
    root2 = b.const(f"{name}.sqrt2", np.array(np.sqrt(2.0), np.float32))
    one = b.const(f"{name}.one", np.array(1.0, np.float32))
    half = b.const(f"{name}.half", np.array(0.5, np.float32))
    erf = b.node("Erf", [b.node("Div", [x, root2], f"{name}_div")], f"{name}_erf")
    inner = b.node("Mul", [x, b.node("Add", [erf, one], f"{name}_add")], f"{name}_mul")
    return b.node("Mul", [inner, half], name)


def build_model(reference: bool = False) -> onnx.ModelProto:
    b = Builder(seed=20260620)
    h = rms_norm(b, "x", b.gain("norm1.weight"), "norm1", reference)
    x1 = b.node("Add", ["x", attention(b, h)], "residual1")
    bias = (0.02 * b.rng.standard_normal(D)).astype(np.float32)
    h2 = b.node("LayerNormalization", [x1, b.gain("norm2.weight"), b.const("norm2.bias", bias)],
                "norm2", axis=-1, epsilon=1e-5)
    f = b.linear(gelu(b, b.linear(h2, "fc1", D, FFN), "gelu"), "fc2", FFN, D)
    b.nodes.append(helper.make_node("Add", [x1, f], ["y"], name="residual2"))
    shape = ["batch", "tokens", D]
    graph = helper.make_graph(
        b.nodes, "encoder_block",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(INPUT_SHAPE))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, shape)],
        initializer=b.inits,
        # exporters record the shapes of custom ops' outputs (ONNX cannot infer them)
        value_info=[] if reference else [
            helper.make_tensor_value_info("norm1_out", TensorProto.FLOAT, list(INPUT_SHAPE))],
    )
    opsets = [helper.make_opsetid("", 17)] + ([] if reference else
                                              [helper.make_opsetid(DOMAIN, 1)])
    model = helper.make_model(graph, producer_name="udo-build-example", producer_version="1",
                              opset_imports=opsets)
    model.ir_version = 8
    return model


def write_inputs(folder: str, count: int, seed: int, tokens: int = T) -> None:
    rng = np.random.default_rng(seed)
    (HERE / "data" / folder).mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(count):
        (HERE / "data" / folder / f"x_{i:02d}.raw").write_bytes(
            rng.standard_normal((1, tokens, D)).astype("<f4").tobytes())
        lines.append(f"{folder}/x_{i:02d}.raw\n")
    (HERE / "data" / f"{folder}.txt").write_text("".join(lines))


def main() -> int:
    (HERE / "model").mkdir(exist_ok=True)
    (HERE / "model" / "encoder.onnx").write_bytes(build_model().SerializeToString())
    write_inputs("calib", 64, seed=1)
    write_inputs("test", 4, seed=2)
    write_inputs("test_t32", 2, seed=3, tokens=32)
    print(f"wrote {HERE / 'model' / 'encoder.onnx'} and data/ (64 calibration, 4 + 2 test "
          "inputs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
