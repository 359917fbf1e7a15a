"""Every default rule, one case each (data): the rule fires, the ops it removes are gone, and the
prepared graph computes what the unprepared model computes. Plus cases where a rule must not
fire, with the reason the trace gives."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

from udo_build.ir import Model

from .helpers import G, check_float, fired, prepare, w


def conv_chain(mid: Callable[[G, str], str]) -> Model:
    g = G()
    x = g.conv("x", 3, 4, "c1")
    y = mid(g, x)
    g.conv(y, 4, 4, "c2")
    return g.model({"x": (1, 3, 8, 8)}, ["c2"])


def after_conv(op: str, *consts: np.ndarray, **attrs: object) -> Model:
    def mid(g: G, x: str) -> str:
        names = [g.const(f"k{i}", c) for i, c in enumerate(consts)]
        return g.op(op, x, *names, out="mid", **attrs)
    return conv_chain(mid)


def two_transposes(p: list[int], q: list[int]) -> Model:
    g = G()
    t = g.op("Transpose", "x", out="t1", perm=p)
    g.op("Transpose", t, out="t2", perm=q)
    return g.model({"x": (2, 3, 4, 5)}, ["t2"])


def reshapes(*shapes: tuple[int, ...]) -> Model:
    g = G()
    x = g.op("Relu", "x", out="r")
    for i, s in enumerate(shapes):
        x = g.op("Reshape", x, g.const(f"s{i}", np.array(s, np.int64)), out=f"y{i}")
    return g.model({"x": (2, 3, 4, 5)}, [x])


def concat_of_convs() -> Model:
    g = G()
    a, b = g.conv("x", 3, 4, "a"), g.conv("x", 3, 2, "b")
    cat = g.op("Concat", a, b, out="cat", axis=1)
    g.conv(cat, 6, 4, "c")
    return g.model({"x": (1, 3, 8, 8)}, ["c"])


def shuffle() -> Model:
    g = G()
    x = g.conv("x", 3, 8, "c1")
    r = g.op("Reshape", x, g.const("s1", np.array([1, 2, 4, 8, 8])), out="r1")
    t = g.op("Transpose", r, out="t", perm=[0, 2, 1, 3, 4])
    y = g.op("Reshape", t, g.const("s2", np.array([1, 8, 8, 8])), out="r2")
    g.conv(y, 8, 4, "c2", group=2)
    return g.model({"x": (1, 3, 8, 8)}, ["c2"])


def bn_affine() -> Model:
    g = G()
    x = g.op("Relu", "x", out="r")
    y = g.bn(x, 4, "bn")
    y = g.op("Mul", y, g.const("m", w(4, 1, 1, low=0.5)), out="mul")
    y = g.op("Add", y, g.const("a", w(4, 1, 1)), out="add")
    g.conv(y, 4, 4, "c")
    return g.model({"x": (1, 4, 8, 8)}, ["c"])


def residual() -> Model:
    g = G()
    a = g.conv("x", 4, 4, "a")
    s = g.op("Add", a, "x", out="sum")
    g.op("Relu", s, out="r")
    return g.model({"x": (1, 4, 8, 8)}, ["r"])


def big_conv() -> Model:
    g = G()
    g.conv("x", 3, 8, "c")
    return g.model({"x": (1, 3, 64, 64)}, ["c"])


def batch_pool() -> Model:
    g = G()
    g.op("GlobalAveragePool", "x", out="p")
    return g.model({"x": (4, 32, 4, 4)}, ["p"])


@dataclass(frozen=True)
class Case:
    rule: str
    build: Callable[[], Model]
    gone: tuple[str, ...] = ()  # ops the rule removes
    transposes: int | None = None  # transposes left
    vtcm_mb: float = 8


CASES = [
    Case("remove_identity", lambda: after_conv("Identity"), ("Identity",), 2),
    Case("cancel_transposes", lambda: conv_chain(lambda g, x: x), (), 2),
    Case("merge_transposes", lambda: two_transposes([0, 2, 1, 3], [0, 1, 3, 2]), (), 1),
    Case("identity_transpose", lambda: two_transposes([0, 1, 2, 3], [0, 1, 3, 2]), (), 1),
    Case("identity_reshape", lambda: reshapes((2, 3, 4, 5)), ("Reshape",)),
    Case("reshape_chain", lambda: reshapes((6, 20), (2, 60)), ()),
    Case("sink_transpose_unary", lambda: after_conv("Sigmoid"), (), 2),
    Case("sink_transpose_binary", lambda: after_conv("Sub", w(4, 1, 1)), (), 2),
    Case("sink_transpose_concat", concat_of_convs, (), 2),
    Case("sink_transpose_axis", lambda: after_conv("Softmax", axis=1), (), 2),
    Case("channel_shuffle", shuffle, (), 2),
    Case("fold_batch_norm", lambda: conv_chain(lambda g, x: g.bn(x, 4, "bn")), ("BatchNorm",)),
    Case("fold_bias", lambda: after_conv("Add", w(4, 1, 1)), ("Add",)),
    Case("fold_scale", lambda: after_conv("Mul", w(4, 1, 1)), ("Mul",)),
    Case("batch_norm_scale", bn_affine, ("Mul",)),
    Case("batch_norm_shift", bn_affine, ("Add",)),
    Case("conv_relu", lambda: after_conv("Relu"), ("Relu",)),
    Case("conv_clip", lambda: after_conv("Clip", np.float32(-0.5), np.float32(0.5)), ("Clip",)),
    Case("add_relu", residual, ("Relu",)),
    Case("autosplit_rows", big_conv, (), None, 0.25),
    Case("autosplit_batch", batch_pool, (), None, 0.04),
]


@pytest.mark.parametrize("case", CASES, ids=[c.rule for c in CASES])
def test_rule(case: Case) -> None:
    model = case.build()
    compiled = prepare(model, vtcm_mb=case.vtcm_mb)
    assert fired(compiled, case.rule) >= 1, compiled.ctx.trace.lines()
    counts = compiled.graph.op_counts()
    for op in case.gone:
        assert op not in counts, compiled.graph.text()
    if case.transposes is not None:
        assert counts.get("Transpose", 0) == case.transposes, compiled.graph.text()
    check_float(model, compiled)
    unfused = prepare(model, level=1, vtcm_mb=case.vtcm_mb)
    assert fired(unfused, case.rule) == 0 or case.rule.startswith("autosplit")
    check_float(model, unfused)


def test_autosplit_pieces_fit_and_cover_the_rows() -> None:
    compiled = prepare(big_conv(), vtcm_mb=0.25)
    pieces = [op for op in compiled.graph.ops.values() if op.op == "Conv2d"]
    assert len(pieces) > 1
    rows = sorted(compiled.graph.types[op.outputs[0]].shape[1] for op in pieces)
    assert sum(rows) == 64 and rows[-1] % 8 == 0
    assert not compiled.memory.over_budget or all(
        compiled.graph.ops[i].op == "Concat" for i in compiled.memory.over_budget)


def shared_conv() -> Model:
    g = G()
    x = g.conv("x", 3, 4, "c1")
    g.op("Relu", x, out="r")
    g.conv(x, 4, 4, "c2")
    return g.model({"x": (1, 3, 8, 8)}, ["r", "c2"])


NOT_FIRING = [
    ("conv_relu", shared_conv, "conv has one use"),
    ("fold_bias", lambda: after_conv("Add", w(4, 8, 8)), "replacement declined"),
    ("cancel_transposes", lambda: two_transposes([0, 2, 1, 3], [0, 1, 3, 2]),
     "the permutations cancel"),
    ("channel_shuffle", lambda: reshapes((2, 3, 20), (2, 60)), "expected Transpose"),
]


@pytest.mark.parametrize("rule,build,reason", NOT_FIRING, ids=[c[0] for c in NOT_FIRING])
def test_why_a_rule_did_not_fire(rule: str, build: Callable[[], Model], reason: str) -> None:
    model = build()
    outputs = {"tensors": [t.name for t in model.graph.outputs]}
    compiled = prepare(model, why=[rule], outputs=outputs)
    assert fired(compiled, rule) == 0
    text = "\n".join(compiled.ctx.trace.lines())
    assert reason in text, text
    check_float(model, compiled)
