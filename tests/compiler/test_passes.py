"""The built-in passes: constant propagation (and its flags), common sub-expression elimination,
dead code elimination; each checked for structure and numbers."""

from __future__ import annotations

import numpy as np

from udo_build.kernels.oppkg import Cost, Flags, OpPackage

from .helpers import G, check_float, prepare, w


def flagged(flags: Flags) -> OpPackage:
    pkg = OpPackage("Pkg")

    @pkg.op("Double", flags=flags)
    def double(x: np.ndarray) -> np.ndarray:
        return x * 2

    @pkg.op("Ones", flags=flags, cost=Cost.FREE)
    def ones(x: np.ndarray) -> np.ndarray:
        return np.ones_like(x)
    return pkg


def const_model(op: str = "Double") -> object:
    g = G()
    c = g.op("Transpose", g.const("c", w(1, 3, 4, 4)), out="ct", perm=[0, 1, 3, 2])
    d = g.op(op, c, out="d", package="Pkg")
    ones = g.op("Ones", "x", out="ones", package="Pkg")
    s = g.op("Add", "x", d, out="s")
    g.op("Mul", s, ones, out="y")
    return g.model({"x": (1, 3, 4, 4)}, ["y"], {"Pkg": flagged(Flags.NONE)})


def test_constprop_folds_constants_and_respects_the_flags() -> None:
    for flags, kept in ((Flags.NONE, {"Pkg::Ones"}),
                        (Flags.INHIBIT_CONST_PROP, {"Pkg::Double", "Pkg::Ones"}),
                        (Flags.IS_CONST, set())):
        packages = {"Pkg": flagged(flags)}
        model = const_model()
        compiled = prepare(model, packages=packages)
        ops = set(compiled.graph.op_counts())
        assert "Transpose" not in ops  # a default op on a constant always folds
        assert {o for o in ops if o.startswith("Pkg::")} == kept, flags
        check_float(model, compiled, packages)


def test_constprop_without_the_kernels_keeps_the_op() -> None:
    model = const_model()
    compiled = prepare(model)
    assert "Pkg::Double" in compiled.graph.op_counts()


def test_cse_merges_equal_ops_and_not_different_ones() -> None:
    g = G()
    a, b = g.conv("x", 3, 3, "a"), g.op("Relu", "x", out="r1")
    g.weights["b.w"], g.weights["b.b"] = g.weights["a.w"].copy(), g.weights["a.b"].copy()
    c = g.op("Conv", "x", "b.w", "b.b", out="b", kernel_shape=[3, 3], pads=[1, 1, 1, 1])
    d = g.op("Relu", "x", out="r2")
    e = g.op("Sigmoid", "x", out="sg")
    g.op("Sum", a, b, c, d, e, out="y")
    model = g.model({"x": (1, 3, 6, 6)}, ["y"])
    for level in (1, 2):
        compiled = prepare(model, level=level)
        counts = compiled.graph.op_counts()
        assert counts["Conv2d"] == 1 and counts["Relu"] == 1 and counts["Sigmoid"] == 1
        check_float(model, compiled)
    assert any(p["pass"] == "cse" and p["removed"] > 0 for p in compiled.ctx.log)


def test_dce_keeps_only_what_the_outputs_need() -> None:
    g = G()
    a = g.conv("x", 3, 4, "a")
    b = g.op("Relu", a, out="b")
    g.op("Sigmoid", a, out="dead")
    g.op("Tanh", b, out="y")
    model = g.model({"x": (1, 3, 6, 6)}, ["y"])
    compiled = prepare(model, outputs={"tensors": ["b"]})
    assert "Sigmoid" not in compiled.graph.op_counts()
    assert "Tanh" not in compiled.graph.op_counts()
    assert not any(op.origin == "dead" for op in compiled.graph.ops.values())
    check_float(model, compiled)


def test_dce_removes_a_chain_of_dead_ops() -> None:
    """A dead op reading another dead op's output: both go, in any order (the reader's input
    value was dropped with its maker before: KeyError)."""
    from udo_build.compiler.ops import HTP
    from udo_build.compiler.passes import Context, dce
    from udo_build.rewrite.graph import OpGraph, TType

    g = OpGraph("chain", HTP)
    t = TType((1, 1, 2, 3), "float32")
    x = g.value(t, "x")
    g.inputs.append(x)
    a = g.add("Neg", [x], [t], names=["a"]).outputs[0]
    g.add("Neg", [a], [t], names=["b"])
    y = g.add("Relu", [x], [t], names=["y"]).outputs[0]
    g.outputs = [("y", y)]
    graph, changed = dce(g, Context(2, "fp16", 1 << 20, 1 << 20))
    assert changed and [op.op for op in graph.ops.values()] == ["Relu"]
    assert set(graph.names.values()) == {"x", "y"}
