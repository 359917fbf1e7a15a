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
