"""The rule engine: patterns, constraints, replacements as data, qualified names, the worklist
driver's fixed point and its cap, user rules from an op package, and the trace."""

from __future__ import annotations

import numpy as np
import pytest

from udo_build.compiler import Trace, elementwise
from udo_build.compiler.ops import HTP
from udo_build.errors import StepFailed
from udo_build.kernels.oppkg import OpPackage
from udo_build.rewrite.engine import RuleLoopError, rewrite
from udo_build.rewrite.graph import OpGraph, TType
from udo_build.rewrite.replace import ConstScalar, GenShape, New, WithSize, WithType
from udo_build.rewrite.rules import (
    EARLY,
    MIDDLE,
    All,
    AnyOf,
    AttrOf,
    Check,
    Const,
    Dim,
    Eq,
    Gt,
    Not,
    OneUse,
    Op,
    Rule,
    match,
    qualify,
)

from .helpers import G, check_float, fired, prepare, softplus_bundle

F = TType((1, 2, 2, 4), "float32")


def small_graph() -> tuple[OpGraph, dict[str, int]]:
    """x -> Relu -> Add(c) -> Sigmoid, and a second reader of the Relu."""
    g = OpGraph("t", HTP)
    x = g.value(F, "x")
    g.inputs.append(x)
    c = g.const(np.ones((1, 1, 1, 4), np.float32), "c")
    relu = g.add("Relu", [x], [F], names=["r"])
    add = g.add("Add", [relu.outputs[0], c], [F], {"note": 1}, names=["a"])
    sig = g.add("Sigmoid", [add.outputs[0]], [F], names=["s"])
    g.outputs = [("s", sig.outputs[0]), ("r", relu.outputs[0])]
    return g, {"x": x, "c": c, "relu": relu.id, "add": add.id, "sig": sig.id}


PATTERNS = [
    (Op("Sigmoid", Op("Add", Op("Relu", "x"), Const("c"))), ""),
    (Op("Sigmoid", Op("Add", "y", "_")), ""),
    (Op(("Tanh", "Sigmoid"), ...), ""),
    (Op("*", Op("Add", "a", "a")), "is not the same value as 'a'"),
    (Op("Sigmoid", Op("Add", Op("Relu", "x"), Op("Relu", "x"))), "graph input or constant"),
    (Op("Sigmoid", Op("Mul", ...)), "expected Mul, found Add"),
    (Op("Sigmoid", Op("Add", Const("c"), "_")), "input 0 of Add#"),
    (Op("Sigmoid", Op("Add", "a")), "has 2 inputs, the pattern wants 1"),
    (Op("Sigmoid", Op("Add", "a", "b", None)), ""),
]


@pytest.mark.parametrize("pattern,why", PATTERNS)
def test_patterns(pattern: object, why: str) -> None:
    g, ids = small_graph()
    m, reason = match(pattern, g.ops[ids["sig"]], g, None)  # type: ignore[arg-type]
    assert (m is None) == bool(why) and why in reason


CONSTRAINTS = [
    (Eq(Dim("x", 3), 4), None),
    (Gt(Dim("x", 1), 2), "dim 1 of x > 2 is false (2 vs 2)"),
    (All(OneUse("add"), Eq(AttrOf("add", "note"), 1)), None),
    (OneUse("relu"), "not: relu has one use"),
    (AnyOf(OneUse("relu"), Eq(AttrOf("add", "note"), 2)), "relu has one use"),
    (Not(OneUse("add")), "add has one use holds"),
]


@pytest.mark.parametrize("constraint,why", CONSTRAINTS)
def test_constraints(constraint: object, why: str | None) -> None:
    g, ids = small_graph()
    m, _ = match(Op("Sigmoid", Op("Add", Op("Relu", "x", name="relu"), Const("c"), name="add")),
                 g.ops[ids["sig"]], g, None)
    got = constraint.check(m)  # type: ignore[attr-defined]
    assert got == why if why is None else why in got


def test_data_replacements_carry_size_and_type_and_make_constants() -> None:
    g, ids = small_graph()
    rules = [Rule("relu_to_clip", EARLY, Op("Relu", "x"),
                  WithType("x", WithSize("*", New("Clip", "x", ConstScalar(0.0),
                                                  ConstScalar(6.0))))),
             Rule("shape_of", EARLY, Op("Sigmoid", "y"),
                  New("Reshape", "y", attrs={"shape": [1, 1, 4, 4]})),
             Rule("unused_gen", EARLY, Op("Tanh", "y"), New("Add", "y", GenShape(Dim("y", 0))))]
    assert rewrite(g, rules, None, Trace())
    counts = g.op_counts()
    assert counts == {"Add": 1, "Clip": 1, "Reshape": 1}
    clip = next(op for op in g.ops.values() if op.op == "Clip")
    assert g.types[clip.outputs[0]] == F
    assert [float(g.consts[v].reshape(-1)[0]) for v in clip.inputs[1:]] == [0.0, 6.0]
    assert g.types[g.outputs[0][1]].shape == (1, 1, 4, 4)


def test_qualified_names() -> None:
    rule = Rule("r", EARLY, Op("Softplus", Op("Relu", "x"), Op("default::Mul", "y"),
                               Op("Other::Op", "z")), "x")
    q = qualify(rule, "SoftplusPackage", ["Softplus", "Swish"])
    assert q.match.ops == ("SoftplusPackage::Softplus",)
    assert [p.ops for p in q.match.inputs] == [("Relu",), ("Mul",), ("Other::Op",)]
    assert q.package == "SoftplusPackage"


def looping_package() -> OpPackage:
    pkg = OpPackage("Loopy")
    pkg.rule(Rule("relu_to_abs", MIDDLE, Op("Relu", "x"), WithType("*", New("Abs", "x"))))
    pkg.rule(Rule("abs_to_relu", MIDDLE, Op("Abs", "x"), WithType("*", New("Relu", "x"))))
    return pkg


def test_the_iteration_cap_names_the_rules_that_kept_firing() -> None:
    g = G()
    g.op("Relu", "x", out="r")
    model = g.model({"x": (1, 4, 4, 4)}, ["r"])
    with pytest.raises(StepFailed) as info:
        prepare(model, packages={"Loopy": looping_package()})
    text = str(info.value)
    assert "did not reach a fixed point" in text and "relu_to_abs" in text \
        and "abs_to_relu" in text and "Loopy" in text
    graph, _ = small_graph()
    with pytest.raises(RuleLoopError) as raw:
        rewrite(graph, looping_package().rules(), None, Trace(), "p", cap=10)
    assert set(raw.value.rules) == {"relu_to_abs", "abs_to_relu"}


def test_rules_from_an_op_package_apply_and_are_traced() -> None:
    bundle, packages = softplus_bundle()
    plain = prepare(bundle, packages=packages)
    package = OpPackage("SoftplusPackage")
    package.merge(packages["SoftplusPackage"])
    package.rule(elementwise("Softplus"))
    package.rule(elementwise("Swish"))
    with pytest.raises(Exception, match="two rules"):
        package.rule(elementwise("Swish"))
    mine = {"SoftplusPackage": package}
    ruled = prepare(bundle, packages=mine, why=["sink_transpose_Swish"])
    assert fired(ruled, "sink_transpose_Softplus") == 1
    assert plain.graph.op_counts()["Transpose"] == 6
    assert ruled.graph.op_counts()["Transpose"] == 2
    assert any("sink_transpose_Swish: fired 1x" in line for line in ruled.ctx.trace.lines())
    check_float(bundle.model, ruled, mine)


def test_the_worklist_revisits_only_what_a_rewrite_touches() -> None:
    g = G()
    x = "x"
    for i in range(60):
        x = g.op("Relu", x, out=f"r{i}")
    model = g.model({"x": (1, 2, 2, 2)}, [x])
    calls = []
    pkg = OpPackage("P")
    pkg.rule(Rule("double_relu", EARLY, Op("Relu", Op("Relu", "x", name="inner")), "inner",
                  Check("counted", lambda m: calls.append(1) or True)))
    compiled = prepare(model, packages={"P": pkg})
    assert compiled.graph.op_counts() == {"Relu": 1}
    assert fired(compiled, "double_relu") == 59
    assert len(calls) <= 2 * 60  # a rescan after each rewrite would be ~60 * 60 / 2
    check_float(model, compiled)
