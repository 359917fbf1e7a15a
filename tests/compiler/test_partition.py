"""udo_build.compiler.partition: which runtimes a node may use, and the subnets they make."""

from __future__ import annotations

import numpy as np
import pytest

from udo_build.compiler.partition import (
    RuntimeChoice,
    RuntimeChoices,
    node_runtimes,
    op_runtimes,
    partition,
)
from udo_build.errors import UserError
from udo_build.ir.graph import Graph, Model, Node, TensorInfo
from udo_build.kernels.oppkg import OpPackage, OpPackageError


def _model() -> Model:
    """conv -> Cpu op -> relu -> add(relu, conv) -> out: the add reads a tensor of subnet 0."""
    nodes = (Node.make("conv", "Conv", ["x", "w"], ["a"]),
             Node.make("cpu", "OnCpu", ["a"], ["b"], package="Pkg"),
             Node.make("relu", "Relu", ["b"], ["c"]),
             Node.make("add", "Add", ["c", "a"], ["y"]),
             Node.make("tail", "Relu", ["y"], ["z"]))
    graph = Graph("g", (TensorInfo("x", "float32", (1, 2, 4, 4)),),
                  (TensorInfo("z", "float32", (1, 2, 4, 4)),), nodes)
    return Model(graph, {"w": np.zeros((2, 2, 1, 1), np.float32)})


OPDEFS = {"ops": [{"name": "OnCpu", "backends": ["CPU"]},
                  {"name": "Nowhere", "backends": ["GPU"]}]}


def test_an_op_runs_where_its_definition_or_the_default_package_says() -> None:
    model = _model()
    nodes = {n.name: n for n in model.graph.nodes}
    assert op_runtimes(nodes["cpu"], OPDEFS) == ("CPU",)
    assert op_runtimes(nodes["conv"], OPDEFS) == ("HTP", "CPU")
    gpu = Node.make("n", "Nowhere", ["a"], ["b"], package="Pkg")
    assert op_runtimes(gpu, OPDEFS) == ()


def test_cpu_only_marks_an_op_the_htp_lacks() -> None:
    package = OpPackage("P")
    package.op("Foo")(lambda x: x)
    package.op("Bar")(lambda x: x)
    package.cpu_only("Foo")
    assert (package.on_htp("Foo"), package.on_htp("Bar"), package.on_htp("Baz")) == (
        False, True, False)
    with pytest.raises(OpPackageError, match="Baz"):
        package.cpu_only("Baz")


def test_default_package_runs_on_the_htp_what_the_htp_op_set_lists() -> None:
    from udo_build.kernels.default import DEFAULT
    from udo_build.kernels.default.htp import HTP_OPS

    assert DEFAULT.on_htp("Conv") and DEFAULT.on_htp("Softmax") and DEFAULT.on_htp("Gelu")
    assert not DEFAULT.on_htp("Det") and not DEFAULT.on_htp("Trilu")
    assert {op for op in DEFAULT.ops() if DEFAULT.on_htp(op)} == HTP_OPS & set(DEFAULT.ops())


def test_consecutive_nodes_of_one_runtime_are_one_subnet() -> None:
    model = _model()
    part = partition(model, node_runtimes(model, OPDEFS), ["z"])
    assert [(s.runtime, s.nodes) for s in part.subnets] == [
        ("HTP", ("conv",)), ("CPU", ("cpu",)), ("HTP", ("relu", "add", "tail"))]
    first, cpu, last = part.subnets
    assert first.inputs == ("x",)  # the weight is no input
    assert first.outputs == ("a",)  # read by the CPU subnet and by `add`, two subnets on
    assert (cpu.inputs, cpu.outputs) == (("a",), ("b",))
    assert (last.inputs, last.outputs) == (("b", "a"), ("z",))
    assert part.split and part.switches == 2
    assert last.identifier(model.graph.name) == "g:subnet2"


def test_requested_outputs_are_outputs_of_the_subnet_that_makes_them() -> None:
    model = _model()
    part = partition(model, node_runtimes(model, OPDEFS), ["z", "c"])
    assert part.subnets[2].outputs == ("c", "z")
    only = partition(model, node_runtimes(model, OPDEFS), ["a"])  # what `a` needs: conv
    assert [s.nodes for s in only.subnets] == [("conv",)] and not only.split


def test_all_htp_is_one_subnet() -> None:
    model = _model()
    allowed = node_runtimes(model, {"ops": [{"name": "OnCpu", "backends": ["CPU", "HTP"]}]})
    part = partition(model, allowed, ["z"])
    assert len(part.subnets) == 1 and not part.split and part.switches == 0


def test_the_recipe_narrows_by_op_type_and_node_name() -> None:
    model = _model()
    choices = RuntimeChoices((RuntimeChoice("Add", ("CPU",), "model.runtimes.Add"),
                              RuntimeChoice("tail", ("CPU", "HTP"), "model.runtimes.tail")))
    allowed = node_runtimes(model, OPDEFS, choices)
    assert allowed["add"] == ("CPU",) and allowed["tail"] == ("HTP", "CPU")
    part = partition(model, allowed, ["z"])
    assert [s.nodes for s in part.subnets] == [("conv",), ("cpu",), ("relu",), ("add",),
                                               ("tail",)]
    assert RuntimeChoices.from_json(choices.to_json()) == choices


def test_a_node_that_may_run_nowhere_is_a_user_error_naming_it() -> None:
    model = _model()
    choices = RuntimeChoices((RuntimeChoice("OnCpu", ("HTP",), "package.ops[0].runtimes"),))
    with pytest.raises(UserError) as caught:
        node_runtimes(model, OPDEFS, choices)
    problem = caught.value.problems[0]
    assert problem.message == ("node cpu (OnCpu) may run on no runtime: its op definition "
                               "allows CPU; package.ops[0].runtimes allows HTP")
    assert problem.field == "package.ops[0].runtimes"
    gpu = Model(Graph("g", model.graph.inputs, model.graph.outputs,
                      (Node.make("n", "Nowhere", ["x"], ["z"], package="Pkg"),)))
    with pytest.raises(UserError, match="node n .Nowhere. may run on no runtime"):
        node_runtimes(gpu, OPDEFS)
