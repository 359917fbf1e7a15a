"""The runtime's load-time fusions: which rules fire (structure) and that results do not change
beyond float32 rounding (numbers, against the ONNX reference on the same graph)."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from udo_build.ir import Graph, Model, Node, TensorInfo
from udo_build.rewrite.engine import RuleLoopError
from udo_build.rewrite.replace import CopyAttrs, New, WithSize, WithType
from udo_build.rewrite.rules import MIDDLE, Op, Rule
from udo_build.runtime.float_session import Session, tensor_types
from udo_build.runtime.fusion import RULES, fuse

rng = np.random.default_rng(7)


def w(*shape: int, low: float | None = None) -> np.ndarray:
    if low is not None:
        return rng.uniform(low, low + 1, shape).astype(np.float32)
    return rng.standard_normal(shape).astype(np.float32)


def f32(name: str, *shape: int) -> TensorInfo:
    return TensorInfo(name, "float32", shape)


def bn(name: str, x: str, out: str, weights: dict, channels: int) -> Node:
    for suffix, value in (("s", w(channels)), ("b", w(channels)), ("m", w(channels)),
                          ("v", w(channels, low=0.5))):
        weights[f"{name}.{suffix}"] = value
    return Node.make(name, "BatchNormalization", [x] + [f"{name}.{s}" for s in "sbmv"], [out],
                     {"epsilon": 1e-3})


def conv_bn_relu() -> Model:
    """x -> Conv(3x3, bias) -> BN -> Relu -> y; plus Conv(1x1) -> Mul(c) -> Add(c) -> z."""
    weights = {"w1": w(4, 3, 3, 3), "b1": w(4), "w2": w(2, 4, 1, 1),
               "scale": w(2, 1, 1), "shift": w(1, 2, 1, 1)}
    nodes = (
        Node.make("conv1", "Conv", ["x", "w1", "b1"], ["c1"], {"pads": [1, 1, 1, 1]}),
        bn("bn1", "c1", "n1", weights, 4),
        Node.make("relu1", "Relu", ["n1"], ["y"]),
        Node.make("conv2", "Conv", ["y", "w2"], ["c2"]),
        Node.make("mul", "Mul", ["c2", "scale"], ["m2"]),
        Node.make("add", "Add", ["shift", "m2"], ["z"]),
    )
    values = (f32("c1", 1, 4, 6, 6), f32("n1", 1, 4, 6, 6), f32("c2", 1, 2, 6, 6),
              f32("m2", 1, 2, 6, 6))
    graph = Graph("g", (f32("x", 1, 3, 6, 6),), (f32("y", 1, 4, 6, 6), f32("z", 1, 2, 6, 6)),
                  nodes, values)
    return Model(graph, weights)


def residual() -> Model:
    """x -> [Conv -> BN -> Relu -> Conv -> BN] + [Conv -> BN] -> Sum -> Relu -> y (as in the
    light ResNet-50): the Sum and the Relu fuse into the conv whose addend is made first."""
    weights = {"wa": w(4, 2, 1, 1), "wb": w(4, 4, 3, 3), "ws": w(4, 2, 1, 1)}
    nodes = (
        Node.make("conv_a", "Conv", ["x", "wa"], ["a"]),
        bn("bn_a", "a", "an", weights, 4),
        Node.make("relu_a", "Relu", ["an"], ["ar"]),
        Node.make("conv_b", "Conv", ["ar", "wb"], ["b"], {"pads": [1, 1, 1, 1]}),
        bn("bn_b", "b", "bn", weights, 4),
        Node.make("conv_s", "Conv", ["x", "ws"], ["s"]),
        bn("bn_s", "s", "sn", weights, 4),
        Node.make("sum", "Sum", ["bn", "sn"], ["r"]),
        Node.make("relu", "Relu", ["r"], ["y"]),
    )
    shape = (1, 4, 5, 5)
    values = tuple(f32(n, *shape) for n in ("a", "an", "ar", "b", "bn", "s", "sn", "r"))
    graph = Graph("g", (f32("x", 1, 2, 5, 5),), (f32("y", *shape),), nodes, values)
    return Model(graph, weights)


def reference(model: Model, feeds: dict[str, np.ndarray], outputs: list[str]) -> list:
    nodes = [helper.make_node(n.op, list(n.inputs), list(n.outputs), name=n.name, **n.kwargs)
             for n in model.graph.nodes]
    graph = helper.make_graph(
        nodes, "g",
        [helper.make_tensor_value_info(t.name, 1, t.shape) for t in model.graph.inputs],
        [helper.make_empty_tensor_value_info(name) for name in outputs],
        [numpy_helper.from_array(v, k) for k, v in model.weights.items()])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    return list(ReferenceEvaluator(proto).run(outputs, feeds))


@pytest.mark.parametrize("build, fired, ops", [
    (conv_bn_relu, ["fold_batch_norm", "fuse_relu", "fold_scale", "fold_bias_first"],
     ["FusedConv", "Conv"]),
    (residual, ["fold_batch_norm", "fold_batch_norm", "fuse_relu", "fold_batch_norm",
                "fuse_add", "fuse_relu"], ["FusedConv", "Conv", "FusedConv"]),
])
def test_fusions_fire_and_keep_the_results(build, fired: list[str], ops: list[str]) -> None:
    model = build()
    x = model.graph.inputs[0]
    feeds = {x.name: rng.standard_normal(x.shape).astype(np.float32)}
    outputs = [t.name for t in model.graph.outputs]
    session = Session(model)
    plan = session.plan(tuple(outputs))
    assert list(plan.rules) == fired
    assert [s.label.split()[0].split("::")[1] for s in plan.steps] == ops
    got = session.run(feeds)
    for name, want in zip(outputs, reference(model, feeds, outputs), strict=True):
        np.testing.assert_allclose(got[name], want, rtol=1e-5, atol=1e-5)
        assert got[name].dtype == np.float32


def test_a_requested_tensor_is_never_fused_away() -> None:
    model = residual()
    x = rng.standard_normal((1, 2, 5, 5)).astype(np.float32)
    session = Session(model)
    plan = session.plan(("y", "bn", "s"))
    assert "Sum" in [s.label.split()[0].split("::")[1] for s in plan.steps]
    got = session.run({"x": x}, ["y", "bn", "s"])
    want = reference(model, {"x": x}, ["y", "bn", "s"])
    for g, r in zip(got.values(), want, strict=True):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)


def test_the_model_weights_are_not_touched_and_new_ones_are_fresh_names() -> None:
    model = conv_bn_relu()
    before = {k: v.copy() for k, v in model.weights.items()}
    nodes, used, _ = fuse(model.graph.nodes, model.weights, ["y", "z"],
                          tensor_types(model.graph.infos()))
    added = {k: v for k, v in used.items() if k not in model.weights}
    assert set(added) == {"conv1::w", "conv1::b", "conv2::w.1", "conv2::b.1"}  # folded twice
    assert all(np.array_equal(before[k], v) for k, v in model.weights.items())
    assert {a.dtype for a in added.values()} == {np.dtype(np.float32)}
    assert [n.op for n in nodes] == ["FusedConv", "Conv"]
    # the folded nodes keep the convolutions' names and the replaced tensors' names
    assert [(n.name, n.outputs) for n in nodes] == [("relu1", ("y",)), ("conv2", ("z",))]


def test_a_non_constant_scale_or_shared_output_declines() -> None:
    model = conv_bn_relu()
    graph = model.graph
    # c1 read twice: nothing may fuse into conv1
    extra = Node.make("peek", "Neg", ["c1"], ["p"])
    shared = Graph(graph.name, graph.inputs, graph.outputs + (f32("p", 1, 4, 6, 6),),
                   graph.nodes + (extra,), graph.values)
    nodes, _, fired = fuse(shared.nodes, model.weights, ["y", "z", "p"],
                           tensor_types(shared.infos()))
    assert [n.op for n in nodes][:3] == ["Conv", "BatchNormalization", "Relu"]
    assert fired == ["fold_scale", "fold_bias_first"]


def test_rules_that_keep_firing_stop_with_an_error() -> None:
    """A rule whose replacement matches it again (a Conv rebuilt as itself)."""
    forever = Rule("forever", MIDDLE, Op("Conv", "x", "w", ...),
                   WithSize("*", WithType("*", New("Conv", "x", "w", attrs=CopyAttrs("*")))))
    model = conv_bn_relu()
    with pytest.raises(RuleLoopError, match=r"forever \(\d+x\)"):
        fuse(model.graph.nodes, model.weights, [], {}, [forever])


def test_rules_are_named_values() -> None:
    assert [r.name for r in RULES] == [
        "fold_batch_norm", "fold_bias", "fold_bias_first", "fold_scale", "fold_scale_first",
        "batch_norm_scale", "batch_norm_scale_first", "batch_norm_shift",
        "batch_norm_shift_first", "fuse_add", "fuse_add_first", "fuse_relu"]


def pre_activation() -> Model:
    """DenseNet's pre-activation: x -> BN -> Mul(Unsqueeze(s)) -> Add(Unsqueeze(t)) -> Relu
    -> Conv -> y. The Unsqueezes of constants fold at load, then Mul and Add into the BN."""
    weights = {"s": w(3), "t": w(3), "axes": np.array([1, 2], np.int64), "wc": w(2, 3, 1, 1)}
    nodes = (
        bn("bn", "x", "n", weights, 3),
        Node.make("us", "Unsqueeze", ["s", "axes"], ["s3"]),
        Node.make("mul", "Mul", ["n", "s3"], ["m"]),
        Node.make("ut", "Unsqueeze", ["t", "axes"], ["t3"]),
        Node.make("add", "Add", ["m", "t3"], ["a"]),
        Node.make("relu", "Relu", ["a"], ["r"]),
        Node.make("conv", "Conv", ["r", "wc"], ["y"]),
    )
    values = tuple(f32(n, 1, 3, 4, 4) for n in ("n", "m", "a", "r")) + (
        f32("s3", 3, 1, 1), f32("t3", 3, 1, 1))
    graph = Graph("g", (f32("x", 1, 3, 4, 4),), (f32("y", 1, 2, 4, 4),), nodes, values)
    return Model(graph, weights)


def test_constants_fold_then_feed_the_rules() -> None:
    model = pre_activation()
    x = rng.standard_normal((1, 3, 4, 4)).astype(np.float32)
    session = Session(model)
    plan = session.plan(("y",))
    assert [s.label.split()[0].split("::")[1] for s in plan.steps] == [
        "BatchNormalization", "Relu", "Conv"]
    assert list(plan.rules) == ["batch_norm_scale", "batch_norm_shift"]
    assert {"s3", "t3"} <= set(plan.constants)
    want = reference(model, {"x": x}, ["y"])[0]
    np.testing.assert_allclose(session.run({"x": x})["y"], want, rtol=1e-5, atol=1e-5)
