"""Generate the Softplus example's model and data, deterministically.

    python examples/softplus/make_example.py

writes, next to this script:
  model/net.onnx      a small CNN: conv, Softplus (custom), conv, Swish (custom), pool, gemm
  data/calib/*.raw    16 calibration inputs (raw little-endian float32, 1x3x32x32)
  data/calib.txt      their SNPE input list
  data/test/*.raw     4 held-out inputs, and data/test.txt

The same script always writes the same bytes (fixed seeds), so the committed files can be checked.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

HERE = Path(__file__).resolve().parent
INPUT_SHAPE = (1, 3, 32, 32)
CUSTOM_DOMAIN = "aisw"


def he(rng: np.random.Generator, shape: tuple[int, ...]) -> np.ndarray:
    fan_in = int(np.prod(shape[1:]))
    return (rng.standard_normal(shape) * np.sqrt(2.0 / fan_in)).astype(np.float32)


def build_model() -> onnx.ModelProto:
    rng = np.random.default_rng(20261121)
    inits = [
        numpy_helper.from_array(he(rng, (8, 3, 3, 3)), "conv1.weight"),
        numpy_helper.from_array((rng.standard_normal(8) * 0.1).astype(np.float32), "conv1.bias"),
        numpy_helper.from_array(he(rng, (16, 8, 3, 3)), "conv2.weight"),
        numpy_helper.from_array((rng.standard_normal(16) * 0.1).astype(np.float32), "conv2.bias"),
        numpy_helper.from_array((rng.standard_normal((10, 16)) / 4).astype(np.float32),
                                "head.weight"),
        numpy_helper.from_array(np.zeros(10, np.float32), "head.bias"),
    ]
    nodes = [
        helper.make_node("Conv", ["input", "conv1.weight", "conv1.bias"], ["conv1_out"],
                         name="conv1", pads=[1, 1, 1, 1], kernel_shape=[3, 3]),
        helper.make_node("Softplus", ["conv1_out"], ["softplus1_out"], name="softplus1",
                         domain=CUSTOM_DOMAIN, beta=1.0),
        helper.make_node("Conv", ["softplus1_out", "conv2.weight", "conv2.bias"], ["conv2_out"],
                         name="conv2", pads=[1, 1, 1, 1], strides=[2, 2], kernel_shape=[3, 3]),
        helper.make_node("Swish", ["conv2_out"], ["swish1_out"], name="swish1",
                         domain=CUSTOM_DOMAIN, beta=1.5),
        helper.make_node("GlobalAveragePool", ["swish1_out"], ["pool_out"], name="pool"),
        helper.make_node("Flatten", ["pool_out"], ["flat_out"], name="flatten", axis=1),
        helper.make_node("Gemm", ["flat_out", "head.weight", "head.bias"], ["logits"],
                         name="head", transB=1),
    ]
    # exporters record the shapes of custom ops' outputs (ONNX cannot infer them)
    custom_shapes = [
        helper.make_tensor_value_info("softplus1_out", TensorProto.FLOAT, [1, 8, 32, 32]),
        helper.make_tensor_value_info("swish1_out", TensorProto.FLOAT, [1, 16, 16, 16]),
    ]
    graph = helper.make_graph(
        nodes, "softplus_net",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, list(INPUT_SHAPE))],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 10])],
        initializer=inits, value_info=custom_shapes,
    )
    model = helper.make_model(
        graph, producer_name="udo-build-example", producer_version="1",
        opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid(CUSTOM_DOMAIN, 1)],
    )
    model.ir_version = 8
    return model


def write_inputs(folder: str, count: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    (HERE / "data" / folder).mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(count):
        x = rng.standard_normal(INPUT_SHAPE).astype("<f4")
        name = f"data/{folder}/input_{i:02d}.raw"
        (HERE / name).write_bytes(x.tobytes())
        lines.append(f"{Path(name).relative_to('data')}\n")
    (HERE / "data" / f"{folder}.txt").write_text("".join(lines))


def main() -> int:
    (HERE / "model").mkdir(exist_ok=True)
    (HERE / "model" / "net.onnx").write_bytes(build_model().SerializeToString())
    write_inputs("calib", 16, seed=1)
    write_inputs("test", 4, seed=2)
    print(f"wrote {HERE / 'model' / 'net.onnx'} and data/ (16 calibration, 4 test inputs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
