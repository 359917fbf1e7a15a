"""Small models for the quantization algorithms' tests (CLE, bias correction, AdaRound): a
convolution chain with batch norms, unbalanced channel ranges (what CLE fixes), a depthwise
convolution, PRelu, ReLU6 and a Gemm head; seeded, built in the ONNX op vocabulary."""

from __future__ import annotations

import numpy as np

from udo_build.ir import Graph, Model, Node, TensorInfo

SHAPE = (1, 4, 8, 8)


def chain_model(seed: int = 0, relu6: bool = False) -> Model:
    """x -> Conv(4->8, 3x3) -> BN -> Relu -> depthwise Conv(8, 3x3) -> Conv(8->6, 1x1)
    -> PRelu|Clip(0, 6) -> Conv(6->6, 1x1) -> Relu -> GlobalAveragePool -> Flatten
    -> Gemm(6->5)."""
    rng = np.random.default_rng(seed)
    spread = np.exp(rng.uniform(-2.5, 2.5, 8)).astype(np.float32)  # unbalanced channel ranges
    w = {
        "w0": (rng.standard_normal((8, 4, 3, 3)) * 0.3).astype(np.float32),
        "b0": (rng.standard_normal(8) * 0.1).astype(np.float32),
        "gamma": spread, "beta": (rng.uniform(0.5, 2.0, 8) * spread).astype(np.float32),
        "mean": (rng.standard_normal(8) * 0.1).astype(np.float32),
        "var": rng.uniform(0.5, 2.0, 8).astype(np.float32),
        "w1": (rng.standard_normal((8, 1, 3, 3)) / spread[:, None, None, None]).astype(
            np.float32),
        "b1": (rng.standard_normal(8) * 0.1).astype(np.float32),
        "w2": (rng.standard_normal((6, 8, 1, 1)) * 0.4).astype(np.float32),
        "b2": (rng.standard_normal(6) * 0.1).astype(np.float32),
        "slope": rng.uniform(0.05, 0.3, (6, 1, 1)).astype(np.float32),
        "w3": (rng.standard_normal((6, 6, 1, 1)) * 0.4).astype(np.float32),
        "b3": (rng.standard_normal(6) * 0.1).astype(np.float32),
        "w4": (rng.standard_normal((5, 6)) * 0.4).astype(np.float32),
        "b4": (rng.standard_normal(5) * 0.1).astype(np.float32),
        "six_lo": np.array(0.0, np.float32), "six_hi": np.array(6.0, np.float32),
    }
    act = (Node.make("act", "Clip", ["c2", "six_lo", "six_hi"], ["p2"]) if relu6
           else Node.make("prelu", "PRelu", ["c2", "slope"], ["p2"]))
    conv3 = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    nodes = (
        Node.make("conv0", "Conv", ["x", "w0", "b0"], ["c0"], conv3),
        Node.make("bn", "BatchNormalization", ["c0", "gamma", "beta", "mean", "var"], ["n0"]),
        Node.make("relu0", "Relu", ["n0"], ["r0"]),
        Node.make("dw", "Conv", ["r0", "w1", "b1"], ["c1"], {**conv3, "group": 8}),
        Node.make("conv2", "Conv", ["c1", "w2", "b2"], ["c2"], {"kernel_shape": [1, 1]}),
        act,
        Node.make("conv3", "Conv", ["p2", "w3", "b3"], ["c3"], {"kernel_shape": [1, 1]}),
        Node.make("relu3", "Relu", ["c3"], ["a3"]),
        Node.make("pool", "GlobalAveragePool", ["a3"], ["g"]),
        Node.make("flat", "Flatten", ["g"], ["f"]),
        Node.make("fc", "Gemm", ["f", "w4", "b4"], ["y"], {"transB": 1}),
    )
    graph = Graph("chain", (TensorInfo("x", "float32", SHAPE),),
                  (TensorInfo("y", "float32", (1, 5)),), nodes)
    return Model(graph, w)


def feeds(count: int, seed: int = 1) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(seed)
    return [{"x": rng.standard_normal(SHAPE).astype(np.float32)} for _ in range(count)]


def absorbing_model(seed: int = 0) -> Model:
    """x -> Conv(4->8, 3x3, padded) -> BN (beta = 10 gamma, output deviation gamma / 2) -> Relu
    -> Conv(8->3, 1x1): a high bias that absorption moves into the second convolution (its
    pre-activation never falls below beta - 3 gamma on N(0, 1) inputs)."""
    rng = np.random.default_rng(seed)
    gamma = rng.uniform(0.5, 2.0, 8).astype(np.float32)
    w = {
        "w0": (rng.standard_normal((8, 4, 3, 3)) * 0.3).astype(np.float32),
        "gamma": gamma, "beta": (10 * gamma).astype(np.float32),
        "mean": np.zeros(8, np.float32), "var": np.full(8, 13.0, np.float32),
        "w1": (rng.standard_normal((3, 8, 1, 1)) * 0.4).astype(np.float32),
        "b1": (rng.standard_normal(3) * 0.1).astype(np.float32),
    }
    nodes = (
        Node.make("conv0", "Conv", ["x", "w0"], ["c0"], {"kernel_shape": [3, 3],
                                                        "pads": [1, 1, 1, 1]}),
        Node.make("bn", "BatchNormalization", ["c0", "gamma", "beta", "mean", "var"], ["n0"]),
        Node.make("relu0", "Relu", ["n0"], ["r0"]),
        Node.make("conv1", "Conv", ["r0", "w1", "b1"], ["y"], {"kernel_shape": [1, 1]}),
    )
    graph = Graph("absorbing", (TensorInfo("x", "float32", SHAPE),),
                  (TensorInfo("y", "float32", (1, 3, 8, 8)),), nodes)
    return Model(graph, w)


def concat_model(seed: int = 0) -> Model:
    """x -> [Conv(4->4, 3x3, padded) | AveragePool(3x3, padded)] -> Concat -> Relu
    -> Conv(8->3, 1x1) -> y: ShuffleNet's downsampling unit, whose Concat is read only by a Relu
    and whose branches only by the Concat."""
    rng = np.random.default_rng(seed)
    w = {"w0": (rng.standard_normal((4, 4, 3, 3)) * 0.3).astype(np.float32),
         "b0": (rng.standard_normal(4) * 0.1).astype(np.float32),
         "w1": (rng.standard_normal((3, 8, 1, 1)) * 0.4).astype(np.float32),
         "b1": (rng.standard_normal(3) * 0.1).astype(np.float32)}
    same = {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}
    nodes = (
        Node.make("conv0", "Conv", ["x", "w0", "b0"], ["c0"], same),
        Node.make("pool", "AveragePool", ["x"], ["p0"], {**same, "count_include_pad": 1}),
        Node.make("cat", "Concat", ["c0", "p0"], ["k"], {"axis": 1}),
        Node.make("relu", "Relu", ["k"], ["r"]),
        Node.make("conv1", "Conv", ["r", "w1", "b1"], ["y"], {"kernel_shape": [1, 1]}),
    )
    graph = Graph("concat", (TensorInfo("x", "float32", SHAPE),),
                  (TensorInfo("y", "float32", (1, 3, 8, 8)),), nodes)
    return Model(graph, w)
