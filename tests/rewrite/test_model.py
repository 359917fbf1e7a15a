"""A model's nodes as an OpGraph and back: names, omitted outputs, constants as they are (a 0-d
one stays 0-d, equal ones stay two), the model's order, and a rewrite's ops in the place of the
node whose name they keep."""

from __future__ import annotations

import numpy as np

from udo_build.ir.graph import Node
from udo_build.rewrite.fold import ONNX, fold_rules
from udo_build.rewrite.graph import UNKNOWN, TType
from udo_build.rewrite.model import rewrite_nodes, to_graph, to_nodes

F = TType((1, 2, 3, 3), "float32")


def nodes() -> list[Node]:
    return [
        Node.make("a", "Relu", ["x"], ["r"]),
        Node.make("drop", "Dropout", ["r", "ratio"], ["d", ""]),
        Node.make("split", "Split", ["d"], ["s0", "", "s2"], {"axis": 1}),
        Node.make("b", "Add", ["s0", "one"], ["y"]),
        Node.make("c", "Mul", ["s2", "also_one"], ["z"]),
    ]


CONSTANTS = {"ratio": np.array(0.5, np.float32), "one": np.ones(1, np.float32),
             "also_one": np.ones(1, np.float32)}


def test_there_and_back_is_the_identity() -> None:
    graph, omitted = to_graph(nodes(), CONSTANTS, ["y", "z"], {"x": F, "r": F})
    assert len(omitted) == 1  # the middle output of the split (a trailing one is dropped)
    assert graph.types[graph.inputs[0]] == F and graph.types[graph.outputs[0][1]].shape == UNKNOWN
    back, used = to_nodes(graph, {n.name: i for i, n in enumerate(nodes())}, omitted)
    assert back == [n if n.name != "drop" else Node.make("drop", "Dropout", ["r", "ratio"],
                                                         ["d"]) for n in nodes()]
    assert list(used) == ["ratio", "one", "also_one"]  # equal constants are not merged
    assert used["ratio"].shape == () and used["ratio"] is not CONSTANTS["ratio"]
    assert np.shares_memory(used["ratio"], CONSTANTS["ratio"])


def conv_bn() -> tuple[list[Node], dict[str, np.ndarray]]:
    rng = np.random.default_rng(0)
    weights = {"w": rng.standard_normal((2, 2, 1, 1)).astype(np.float32),
               **{k: rng.uniform(0.5, 1.5, 2).astype(np.float32) for k in "sbmv"}}
    return [
        Node.make("early", "Neg", ["x"], ["n"]),
        Node.make("conv", "Conv", ["x", "w"], ["c"]),
        Node.make("late", "Abs", ["x"], ["a"]),
        Node.make("bn", "BatchNormalization", ["c", "s", "b", "m", "v"], ["y"]),
    ], weights


def test_a_folded_op_keeps_the_place_and_name_of_its_node_and_the_tensor_name() -> None:
    graph_nodes, weights = conv_bn()
    out, used, fired = rewrite_nodes(graph_nodes, weights, ["y", "n", "a"], {"x": F},
                                     fold_rules(ONNX))
    assert fired == ["fold_batch_norm"]
    assert [(n.name, n.op, n.inputs, n.outputs) for n in out] == [
        ("early", "Neg", ("x",), ("n",)),
        ("conv", "Conv", ("x", "conv::w", "conv::b"), ("y",)),
        ("late", "Abs", ("x",), ("a",))]
    assert set(used) == {"conv::w", "conv::b"}


def test_a_requested_tensor_stays() -> None:
    graph_nodes, weights = conv_bn()
    out, used, fired = rewrite_nodes(graph_nodes, weights, ["y", "c"], {"x": F},
                                     fold_rules(ONNX))
    assert fired == [] and out == graph_nodes
    assert set(used) == set(weights)
