"""The rule engine in the compiler: the cap as a step failure naming the package, user rules
from an op package and their trace, and a worklist that revisits only what a rewrite touches
(the engine itself: tests/rewrite/test_engine.py)."""

from __future__ import annotations

import pytest

from udo_build.compiler import elementwise
from udo_build.errors import StepFailed
from udo_build.kernels.oppkg import OpPackage
from udo_build.rewrite.replace import New, WithType
from udo_build.rewrite.rules import (
    EARLY,
    MIDDLE,
    Check,
    Op,
    Rule,
)

from .helpers import G, check_float, fired, prepare, softplus_bundle


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
