"""The rewrite engine on a small graph: patterns, constraints, replacements as data, qualified
names, the iteration cap, a declining replacement, and the dialect a graph speaks."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pytest

from udo_build.rewrite.engine import RuleLoopError, Trace, rewrite
from udo_build.rewrite.graph import Dialect, OpGraph, TType
from udo_build.rewrite.replace import (
    Call,
    ConstScalar,
    CopyAttrs,
    GenShape,
    InputsOf,
    New,
    OpOf,
    RuleError,
    WithSize,
    WithType,
)
from udo_build.rewrite.rules import (
    EARLY,
    MIDDLE,
    All,
    AnyOf,
    AttrOf,
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


def shapes(op: str, given: Sequence[tuple[int, ...] | None],
           attrs: Mapping[str, Any]) -> list[tuple[int, ...]]:
    """A test vocabulary: Reshape to its `shape`, everything else elementwise."""
    if op == "Reshape":
        return [tuple(attrs["shape"])]
    return [tuple(np.broadcast_shapes(*[s for s in given if s is not None]))]


TEST = Dialect("test", shapes=shapes)


F = TType((1, 2, 2, 4), "float32")


def small_graph() -> tuple[OpGraph, dict[str, int]]:
    """x -> Relu -> Add(c) -> Sigmoid, and a second reader of the Relu."""
    g = OpGraph("t", TEST)
    x = g.value(F, "x")
    g.inputs.append(x)
    c = g.const(np.ones((1, 1, 1, 4), np.float32), "c")
    relu = g.add("Relu", [x], [F], names=["r"])
    add = g.add("Add", [relu.outputs[0], c], [F], {"note": 1}, names=["a"])
    sig = g.add("Sigmoid", [add.outputs[0]], [F], names=["s"])
    g.outputs = [("s", sig.outputs[0]), ("r", relu.outputs[0])]
    return g, {"x": x, "c": c, "relu": relu.id, "add": add.id, "sig": sig.id,
               "relu_out": relu.outputs[0]}


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


def test_the_iteration_cap_names_the_rules_that_kept_firing() -> None:
    graph, _ = small_graph()
    rules = [Rule("relu_to_abs", MIDDLE, Op("Relu", "x"), WithType("*", New("Abs", "x"))),
             Rule("abs_to_relu", MIDDLE, Op("Abs", "x"), WithType("*", New("Relu", "x")))]
    with pytest.raises(RuleLoopError) as raw:
        rewrite(graph, rules, None, Trace(), "p", cap=10)
    assert set(raw.value.rules) == {"relu_to_abs", "abs_to_relu"}
    assert "rule pass p did not reach a fixed point after 11 rewrites" in str(raw.value)


def test_a_declining_replacement_leaves_the_graph_and_says_why() -> None:
    g, _ = small_graph()
    before = g.text()
    made = []

    def decline(m: Any, b: Any) -> None:
        made.append(b.op("Neg", [m.value("x")]))  # made, then undone
        return None

    trace = Trace(why=frozenset({"never"}))
    assert not rewrite(g, [Rule("never", EARLY, Op("Relu", "x"), Call(decline))], None, trace)
    assert made and g.text() == before
    assert trace.lines() == ["never: fired 0x; did not match:",
                             "  at Relu#4 (): the replacement declined"]


def test_inputs_of_and_op_of_rebuild_a_captured_op() -> None:
    g, ids = small_graph()
    rules = [Rule("fuse", EARLY, Op("Sigmoid", Op(("Add", "Mul"), ..., name="inner")),
                  WithType("*", New(OpOf("inner"), InputsOf("inner", 3),
                                    attrs=CopyAttrs("inner", activation="Sigmoid"))))]
    trace = Trace()
    assert rewrite(g, rules, None, trace)
    fused = next(op for op in g.ops.values() if op.op == "Add")
    assert fused.inputs == (ids["relu_out"], ids["c"], -1)
    assert fused.kwargs == {"note": 1, "activation": "Sigmoid"}
    assert trace.firings == ["fuse"]


def test_a_dialect_without_shapes_wants_a_size() -> None:
    g, _ = small_graph()
    g.dialect = Dialect("bare")
    with pytest.raises(RuleError, match="the bare dialect cannot infer"):
        rewrite(g, [Rule("r", EARLY, Op("Sigmoid", "y"), New("Tanh", "y"))], None, Trace())
    g, _ = small_graph()
    g.dialect = Dialect("bare")
    assert rewrite(g, [Rule("r", EARLY, Op("Sigmoid", "y"), WithSize("*", New("Tanh", "y")))],
                   None, Trace())
    assert g.op_counts() == {"Add": 1, "Relu": 1, "Tanh": 1}
