"""The nine light CNNs of the onnx wheel with random, well-conditioned weights (bench/emulator.py).

The shipped models fill every weight with ConstantOfShape(0.02) (and a few real initializers),
so every shipped expected output is a constant. `randomized(path, seed)` returns the model with
each parameter an initializer drawn by role, seeded:

- Conv weights He-normal, std sqrt(2 / fan_in); Conv biases N(0, 0.01^2);
- Gemm weights N(0, 1/K) (K the reduction size); Gemm biases N(0, 0.01^2);
- per-channel Mul factors U(0.5, 1.5) and Add terms N(0, 0.1^2) (DenseNet, Inception v2 scale and
  shift their batch norms' outputs that way);
- batch norms: gamma 1, beta 0, and mean / variance measured from the data layer by layer: a
  forward pass over N(0, 1) samples (one at a time: some graphs hard-code batch 1) that sets each
  batch norm's statistics to those of its input before running it. The last batch norm of each
  residual branch (the deeper operand of a two-tensor Add/Sum) gets gamma 0.2, as in trained
  ResNets, so that the network is not chaotic.

The forward pass runs the emulator's default kernels node by node on the imported model; the
calibrated statistics are written back into the ONNX model, which both runtimes then load.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import helper, numpy_helper

LIGHT = Path(onnx.__file__).parent / "backend" / "test" / "data" / "light"
NAMES = ("bvlc_alexnet", "densenet121", "inception_v1", "inception_v2", "resnet50",
         "shufflenet", "squeezenet", "vgg19", "zfnet512")
RESIDUAL_GAMMA = 0.2
CALIBRATION_SAMPLES = 4

Importer = Callable[[onnx.ModelProto], object]


def path_of(name: str) -> Path:
    return LIGHT / f"light_{name}.onnx"


def randomized(name: str, seed: int, import_onnx: Importer) -> onnx.ModelProto:
    """The light model `name` with random weights by role and calibrated batch norms."""
    proto = onnx.load(os.fspath(path_of(name)))
    rng = np.random.default_rng(seed)
    _constants_to_initializers(proto)
    params = _draw(proto, rng)
    _set_initializers(proto, params)
    if any(node.op_type == "BatchNormalization" for node in proto.graph.node):
        _set_initializers(proto, _calibrate(import_onnx(proto), rng))
    return proto


def _constants_to_initializers(proto: onnx.ModelProto) -> None:
    """Every ConstantOfShape of a constant shape becomes an initializer (values drawn later);
    initializers leave the graph inputs (IR version 4 allows it), so they are constants."""
    g = proto.graph
    inits = {i.name: numpy_helper.to_array(i) for i in g.initializer}
    constants = set(inits) | {n.output[0] for n in g.node if n.op_type == "ConstantOfShape"}
    keep = []
    for node in g.node:
        if node.op_type == "ConstantOfShape" and node.input[0] in inits:
            value = numpy_helper.to_array(helper.get_attribute_value(node.attribute[0]))
            array = np.full(tuple(int(d) for d in inits[node.input[0]]), value.reshape(-1)[0])
            g.initializer.append(numpy_helper.from_array(array, node.output[0]))
        else:
            keep.append(node)
    del g.node[:]
    g.node.extend(keep)
    used = {i for n in g.node for i in n.input}
    alive = [i for i in g.initializer if i.name in used]
    del g.initializer[:]
    g.initializer.extend(alive)
    inputs = [i for i in g.input if i.name not in constants]
    del g.input[:]
    g.input.extend(inputs)
    proto.ir_version = max(proto.ir_version, 4)


def _consumers(proto: onnx.ModelProto) -> dict[str, list[tuple[onnx.NodeProto, int]]]:
    out: dict[str, list[tuple[onnx.NodeProto, int]]] = {}
    for node in proto.graph.node:
        for k, name in enumerate(node.input):
            out.setdefault(name, []).append((node, k))
    return out


def _draw(proto: onnx.ModelProto, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """A random value for every float initializer that is a parameter, by its role."""
    consumers = _consumers(proto)
    params = {}
    for init in proto.graph.initializer:
        shape = tuple(init.dims)
        if init.data_type != onnx.TensorProto.FLOAT or not consumers.get(init.name):
            continue
        node, k = consumers[init.name][0]
        while node.op_type == "Unsqueeze" and consumers.get(node.output[0]):
            node, k = consumers[node.output[0]][0]  # DenseNet's per-channel scale and shift
        value = _by_role(node, k, shape, rng)
        if value is not None:
            params[init.name] = value.astype(np.float32)
    return params


def _by_role(node: onnx.NodeProto, k: int, shape: tuple[int, ...],
             rng: np.random.Generator) -> np.ndarray | None:
    op = node.op_type
    if op == "Conv" and k == 1:
        fan_in = int(np.prod(shape[1:]))
        return rng.standard_normal(shape, np.float32) * np.float32(np.sqrt(2 / fan_in))
    if op == "Gemm" and k == 1:
        trans_b = any(a.name == "transB" and a.i for a in node.attribute)
        reduced = shape[1] if trans_b else shape[0]
        return rng.standard_normal(shape, np.float32) / np.float32(np.sqrt(reduced))
    if op in ("Conv", "Gemm") and k == 2:
        return rng.standard_normal(shape) * 0.01
    if op == "BatchNormalization":
        return np.ones(shape) if k in (1, 4) else np.zeros(shape)
    if op == "Mul":
        return rng.uniform(0.5, 1.5, shape)
    if op in ("Add", "Sum"):
        return rng.standard_normal(shape) * 0.1
    return None


def _set_initializers(proto: onnx.ModelProto, values: dict[str, np.ndarray]) -> None:
    for i, init in enumerate(proto.graph.initializer):
        if init.name in values:
            proto.graph.initializer[i].CopyFrom(numpy_helper.from_array(values[init.name],
                                                                        init.name))


def _calibrate(model, rng: np.random.Generator) -> dict[str, np.ndarray]:
    """Batch-norm statistics measured layer by layer; the new values of the BN parameters."""
    from udo_build.kernels.default import DEFAULT

    graph, weights = model.graph, dict(model.weights)
    residual = _residual_batch_norms(graph)
    x = graph.inputs[0]
    envs = [{x.name: rng.standard_normal(x.static_shape).astype(np.float32)}
            for _ in range(CALIBRATION_SAMPLES)]
    changed: dict[str, np.ndarray] = {}
    last = {i: k for k, node in enumerate(graph.nodes) for i in node.inputs}
    for k, node in enumerate(graph.nodes):
        if node.op == "BatchNormalization":
            channels = np.concatenate([np.moveaxis(env[node.inputs[0]], 1, 0).reshape(
                env[node.inputs[0]].shape[1], -1) for env in envs], axis=1)
            scale, bias, mean, var = node.inputs[1:5]
            gamma = RESIDUAL_GAMMA if node.name in residual else 1.0
            updates = {scale: np.full(channels.shape[0], gamma), bias: np.zeros(channels.shape[0]),
                       mean: channels.mean(axis=1, dtype=np.float64),
                       var: channels.var(axis=1, dtype=np.float64)}
            for name, value in updates.items():
                weights[name] = changed[name] = value.astype(np.float32)
        dtypes = [str((weights.get(i) if i in weights else envs[0][i]).dtype)
                  for i in node.inputs if i]
        fn = DEFAULT.select(node.op, dtypes).fn
        for env in envs:
            args = [weights[i] if i in weights else env[i] if i else None for i in node.inputs]
            result = fn(*args, **node.kwargs)
            env.update(zip(node.outputs, result if isinstance(result, tuple) else (result,),
                           strict=False))
            for name in [i for i in node.inputs if last.get(i) == k and i in env]:
                del env[name]
    return changed


def _residual_batch_norms(graph) -> set[str]:
    """The batch norm ending each residual branch: the deeper BN operand of a residual add."""
    producer = {o: n for n in graph.nodes for o in n.outputs}
    depth: dict[str, int] = {}
    for node in graph.nodes:
        d = max((depth.get(i, 0) for i in node.inputs), default=0) + (node.op == "Conv")
        for o in node.outputs:
            depth[o] = d
    found = set()
    for node in graph.nodes:
        if node.op not in ("Add", "Sum") or len(node.inputs) != 2:
            continue
        operands = [producer.get(i) for i in node.inputs]
        bns = [(depth[i], p.name) for i, p in zip(node.inputs, operands, strict=True)
               if p is not None and p.op == "BatchNormalization"]
        if bns and all(p is not None for p in operands):
            found.add(max(bns)[1])
    return found
