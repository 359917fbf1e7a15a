"""Generate the SqueezeNet example: a real architecture with a custom op inserted.

    python examples/squeezenet/make_example.py

Takes SqueezeNet from the onnx wheel's light models (its weights are all ConstantOfShape(0.02)),
gives it random He-normal weights (fixed seed), and makes the activation after each fire
module's squeeze convolution the Softplus UDO of examples/softplus (domain aisw). Writes, next
to this script:

  model/squeezenet_softplus.onnx   the model (about 5 MB)
  data/calib/*.raw, data/calib.txt 8 calibration inputs (raw little-endian float32, 1x3x224x224)
  data/test/*.raw, data/test.txt   2 held-out inputs

The same script always writes the same bytes.
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper, shape_inference

HERE = Path(__file__).resolve().parent
SOURCE = Path(onnx.__file__).parent / "backend/test/data/light/light_squeezenet.onnx"
INPUT_SHAPE = (1, 3, 224, 224)
DOMAIN = "aisw"


def random_weights(model: onnx.ModelProto, rng: np.random.Generator) -> None:
    """Every ConstantOfShape of a constant shape becomes a random initializer."""
    graph = model.graph
    shapes = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    kept = []
    for node in graph.node:
        if node.op_type == "ConstantOfShape" and node.input[0] in shapes:
            shape = tuple(int(d) for d in shapes[node.input[0]])
            if len(shape) == 4:  # conv weights: He-normal
                value = rng.standard_normal(shape) * np.sqrt(2.0 / np.prod(shape[1:]))
            else:  # biases
                value = rng.standard_normal(shape) * 0.01
            graph.initializer.append(numpy_helper.from_array(value.astype(np.float32),
                                                             node.output[0]))
        else:
            kept.append(node)
    del graph.node[:]
    graph.node.extend(kept)
    constants = {i.name for i in graph.initializer}
    used = {i for n in graph.node for i in n.input}
    drop = [i for i in graph.initializer if i.name not in used]
    for init in drop:
        graph.initializer.remove(init)
    inputs = [i for i in graph.input if i.name not in constants]
    del graph.input[:]
    graph.input.extend(inputs)


def insert_softplus(model: onnx.ModelProto) -> list[str]:
    """The ReLU after each squeeze convolution (its output feeds two convolutions) becomes the
    Softplus UDO; returns the tensors it makes."""
    readers: dict[str, list[onnx.NodeProto]] = {}
    for node in model.graph.node:
        for name in node.input:
            readers.setdefault(name, []).append(node)
    made = []
    for node in model.graph.node:
        users = readers.get(node.output[0], [])
        if node.op_type == "Relu" and len(users) == 2 and all(u.op_type == "Conv" for u in users):
            node.op_type, node.domain = "Softplus", DOMAIN
            node.attribute.append(helper.make_attribute("beta", 2.0))
            made.append(node.output[0])
    model.opset_import.append(helper.make_opsetid(DOMAIN, 1))
    return made


def build_model() -> onnx.ModelProto:
    model = onnx.load(SOURCE)
    model.ir_version = 8
    random_weights(model, np.random.default_rng(20261121))
    shapes = {v.name: v for v in shape_inference.infer_shapes(model).graph.value_info}
    made = insert_softplus(model)
    # exporters record the shapes of custom ops' outputs (ONNX cannot infer them)
    model.graph.value_info.extend(shapes[name] for name in made)
    model.graph.name = "squeezenet_softplus"
    return model


def write_inputs(folder: str, count: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    (HERE / "data" / folder).mkdir(parents=True, exist_ok=True)
    lines = []
    for i in range(count):
        (HERE / "data" / folder / f"input_{i:02d}.raw").write_bytes(
            rng.standard_normal(INPUT_SHAPE).astype("<f4").tobytes())
        lines.append(f"{folder}/input_{i:02d}.raw\n")
    (HERE / "data" / f"{folder}.txt").write_text("".join(lines))


def main() -> int:
    (HERE / "model").mkdir(exist_ok=True)
    (HERE / "model" / "squeezenet_softplus.onnx").write_bytes(
        build_model().SerializeToString())
    write_inputs("calib", 8, seed=1)
    write_inputs("test", 2, seed=2)
    print(f"wrote {HERE / 'model' / 'squeezenet_softplus.onnx'} and data/ "
          "(8 calibration, 2 test inputs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
