"""Standard nodes of a bundle from a file, checked against ONNX's op schemas before they run: a
damaged node is the input's error (exit 2) naming the node, never a kernel's crash (exit 3)."""

from __future__ import annotations

import io
from dataclasses import replace
from pathlib import Path

import pytest

from udo_build.cli import main
from udo_build.errors import UserError
from udo_build.ir import Node
from udo_build.ir.bundle import Bundle
from udo_build.model.op_check import check_standard_ops, load_checked_bundle

from ..conftest import EXAMPLES
from ..ir.test_bundle import small_model


def with_node(node: Node, package: str = "") -> Bundle:
    model = small_model()
    if package:
        node = replace(node, package=package)
    return Bundle(replace(model, graph=replace(model.graph, nodes=(node,))))


GEMM = ("fc", "Gemm", ["x", "w", "b"], ["y"])


def test_a_sound_bundle_passes_and_custom_ops_are_left_to_their_kernels() -> None:
    check_standard_ops(Bundle(small_model()), "b.udb")
    check_standard_ops(with_node(Node.make("u", "Anything", ["x"], ["y"], {"k": "v"}),
                                 package="MyPackage"), "b.udb")
    check_standard_ops(with_node(Node.make("fc", "Gemm", ["x", "w", "", ""][:3], ["y"])),
                       "b.udb")  # an omitted optional input


@pytest.mark.parametrize("node, words", [
    (Node.make("fc", "Bogus", ["x"], ["y"]), "Bogus is not an op of ONNX opset 17"),
    (Node.make("fc", "Gemm", ["x"], ["y"]), "1 inputs, where Gemm takes 2 to 3"),
    (Node.make("fc", "Gemm", ["x", "w"], ["y", "z"]), "2 outputs"),
    (Node.make(*GEMM, {"transB": "yes"}), "attribute 'transB' must be an integer"),
    (Node.make(*GEMM, {"alpha": [1.0]}), "attribute 'alpha' must be a number"),
    (Node.make(*GEMM, {"colour": 1}), "Gemm has no attribute 'colour'"),
    (Node.make("t", "Transpose", ["x"], ["y"], {"perm": ["a", "b"]}),
     "attribute 'perm' must be a list of integers"),
])
def test_a_damaged_node_is_named(node: Node, words: str) -> None:
    with pytest.raises(UserError) as info:
        check_standard_ops(with_node(node), "b.udb")
    (problem,) = info.value.problems
    assert words in problem.message and f"node {node.name!r}" in problem.message
    assert (problem.file, problem.field) == ("b.udb", "graph.json.nodes[0]")


def test_the_commands_that_run_a_bundle_refuse_it(tmp_path: Path) -> None:
    path = tmp_path / "bad.udb"
    path.write_bytes(with_node(Node.make(*GEMM, {"transB": "yes"})).to_bytes())
    with pytest.raises(UserError):
        load_checked_bundle(path)
    data = EXAMPLES / "softplus" / "data"
    for argv in (["run", str(path), "--input-list", str(data / "test.txt"), "--output-dir",
                  str(tmp_path / "out")],
                 ["prepare", str(path), "--soc", "sm8550", "--out", str(tmp_path / "r.udr")],
                 ["export", str(path), "--qdq", str(tmp_path / "q.onnx")],
                 ["info", str(path)]):
        assert main(argv, stdout=io.StringIO()) == 2, argv


def at_opset(node: Node, opset: int) -> Bundle:
    bundle = with_node(node)
    return replace(bundle, model=replace(bundle.model, graph=replace(bundle.model.graph,
                                                                     opset=opset)))


REDUCE_WITH_AXES_INPUT = Node.make("r", "ReduceMax", ["x", "axes"], ["y"], {"keepdims": 1})
PAD_WITH_AXES_INPUT = Node.make("p", "Pad", ["x", "pads", "", "axes"], ["y"])
REDUCE_WITH_AXES_ATTRIBUTE = Node.make("r", "ReduceMean", ["x"], ["y"], {"axes": [1]})


@pytest.mark.parametrize("node, opset, words", [
    (REDUCE_WITH_AXES_INPUT, 17, "2 inputs, where ReduceMax takes 1 to 1 at opset 17"),
    (PAD_WITH_AXES_INPUT, 17, "4 inputs, where Pad takes 2 to 3 at opset 17"),
    (REDUCE_WITH_AXES_ATTRIBUTE, 18, "ReduceMean has no attribute 'axes' at opset 18"),
    (Node.make("r", "ReduceMean", ["x"], ["y"], {"axes": 1}), 13,
     "attribute 'axes' must be a list of integers"),
])
def test_each_node_is_checked_at_the_graphs_own_opset(node: Node, opset: int, words: str) -> None:
    later = {17: 18, 18: 17, 13: 13}[opset]  # where the node is sound (13: nowhere)
    if later != opset:
        check_standard_ops(at_opset(node, later), "b.udb")
    with pytest.raises(UserError) as info:
        check_standard_ops(at_opset(node, opset), "b.udb")
    assert words in info.value.problem.message


def test_a_bundle_without_an_opset_reads_as_17_and_a_bad_one_is_refused(tmp_path: Path) -> None:
    from udo_build.ir.bundle import read_bundle

    from ..test_crafted_files import craft_bundle, graph_part

    bundle = at_opset(REDUCE_WITH_AXES_INPUT, 18)
    assert read_bundle(bundle.to_bytes()).model.graph.opset == 18
    graph = bundle.model.graph.to_json()
    del graph["opset"]  # as written before graphs recorded their opset
    legacy = read_bundle(craft_bundle([graph_part(graph)]))
    assert legacy.model.graph.opset == 17
    with pytest.raises(UserError, match="takes 1 to 1 at opset 17"):
        check_standard_ops(legacy, "b.udb")
    with pytest.raises(UserError) as info:
        read_bundle(craft_bundle([graph_part({**graph, "opset": "18"})]), "b.udb")
    assert info.value.problem.field == "graph.json.opset"
    path = tmp_path / "future.udb"
    path.write_bytes(craft_bundle([graph_part({**graph, "opset": 999})]))
    with pytest.raises(UserError, match="ONNX opset 999; the installed onnx knows opsets 1 to"):
        load_checked_bundle(path)
    assert main(["info", str(path)], stdout=io.StringIO(), stderr=io.StringIO()) == 2
