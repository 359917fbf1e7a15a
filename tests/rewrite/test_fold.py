"""The folding rules: one definition for every vocabulary (structure), per-channel constants
(cases as data), and numbers: a folded graph computes what the unfolded one does within float32
rounding, with the factors in float64 and the weights scaled once in float32."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pytest

from udo_build.ir.graph import Node
from udo_build.kernels.default import DEFAULT
from udo_build.rewrite.fold import (
    ONNX,
    IntoBatchNorm,
    IntoConv,
    Vocabulary,
    channel_vector,
    fold_rules,
)
from udo_build.rewrite.graph import TType
from udo_build.rewrite.model import rewrite_nodes

rng = np.random.default_rng(3)
C = 4


def run(nodes: Sequence[Node], weights: Mapping[str, np.ndarray], x: np.ndarray,
        out: str) -> np.ndarray:
    """The nodes on the default kernels, in order (the oracle)."""
    env = {**weights, "x": x}
    for n in nodes:
        args = [env[i] if i else None for i in n.inputs]
        fn = DEFAULT.select(n.op, [a.dtype.name for a in args if a is not None]).fn
        result = fn(*args, **n.kwargs)
        env.update(zip(n.outputs, result if isinstance(result, tuple) else (result,),
                       strict=False))
    return env[out]


def f32(*shape: int, low: float = -1.0) -> np.ndarray:
    return rng.uniform(low, low + 2, shape).astype(np.float32)


def chain() -> tuple[list[Node], dict[str, np.ndarray]]:
    """Conv -> BN -> Mul(c) -> Add(c first) -> Relu; BN -> Mul(c) -> Add(c) on another path."""
    weights = {"w": f32(C, 3, 3, 3), "bias": f32(C), "s": f32(C), "b": f32(C), "m": f32(C),
               "v": f32(C, low=0.5), "k": f32(1, C, 1, 1), "t": f32(C, 1, 1),
               "s2": f32(3), "b2": f32(3), "m2": f32(3), "v2": f32(3, low=0.5),
               "k2": f32(3, 1, 1), "t2": np.float32(0.25).reshape(())}
    nodes = [
        Node.make("conv", "Conv", ["x", "w", "bias"], ["c"], {"pads": [1, 1, 1, 1]}),
        Node.make("bn", "BatchNormalization", ["c", "s", "b", "m", "v"], ["n"],
                  {"epsilon": 1e-3}),
        Node.make("mul", "Mul", ["n", "k"], ["p"]),
        Node.make("add", "Add", ["t", "p"], ["q"]),
        Node.make("relu", "Relu", ["q"], ["y"]),
        Node.make("bn2", "BatchNormalization", ["x", "s2", "b2", "m2", "v2"], ["n2"]),
        Node.make("mul2", "Mul", ["k2", "n2"], ["p2"]),
        Node.make("add2", "Add", ["p2", "t2"], ["z"]),
    ]
    return nodes, weights


def test_the_folds_fold_and_keep_the_numbers() -> None:
    nodes, weights = chain()
    shape = (2, 3, 5, 5)
    types = {"x": TType(shape, "float32"), "n2": TType(shape, "float32"),
             "p2": TType(shape, "float32")}
    out, used, fired = rewrite_nodes(nodes, weights, ["y", "z"], types, fold_rules(ONNX))
    assert fired == ["fold_batch_norm", "batch_norm_scale_first", "fold_scale",
                     "batch_norm_shift", "fold_bias_first"]
    assert [(n.name, n.op) for n in out] == [("conv", "Conv"), ("relu", "Relu"),
                                             ("bn2", "BatchNormalization")]
    assert [n.outputs for n in out] == [("q",), ("y",), ("z",)]
    x = rng.standard_normal(shape).astype(np.float32)
    for name in ("y", "z"):
        want = run(nodes, weights, x, name)
        got = run(out, used, x, name)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_weights_are_scaled_once_in_float32() -> None:
    nodes, weights = chain()
    out, used, _ = rewrite_nodes(nodes[:2], weights, ["n"], {}, fold_rules(ONNX))
    mult = weights["s"].astype(np.float64) / np.sqrt(weights["v"].astype(np.float64) + 1e-3)
    want = weights["w"] * mult.astype(np.float32).reshape(-1, 1, 1, 1)
    assert np.array_equal(used[out[0].inputs[1]], want)
    bias = (weights["bias"] - weights["m"].astype(np.float64)) * mult + weights["b"]
    assert np.array_equal(used[out[0].inputs[2]], bias.astype(np.float32))


CHANNELS = [  # (constant shape, rank, axis, folds)
    ((1, C, 1, 1), 4, 1, True),
    ((C, 1, 1), 4, 1, True),
    ((), 4, 1, True),
    ((1,), 4, 1, True),
    ((C,), 4, 1, False),  # broadcasts along the last axis, not the channels
    ((1, 1, 1, C), 4, -1, True),
    ((C,), 4, -1, True),
    ((1, C, 1, 1), 4, -1, False),
    ((2, C, 1, 1), 4, 1, False),
    ((1, 1, C, 1, 1), 4, 1, False),  # of higher rank than the output
    ((1, 3, 1, 1), 4, 1, False),
]


@pytest.mark.parametrize("shape, rank, axis, folds", CHANNELS)
def test_per_channel_constants(shape: tuple[int, ...], rank: int, axis: int,
                               folds: bool) -> None:
    value = f32(*shape)
    got = channel_vector(value, C, rank, axis)
    assert (got is not None) == folds
    if folds:
        assert got.dtype == np.float64 and got.shape == (C,)
        assert np.array_equal(got, np.broadcast_to(value.reshape(-1), (C,)))
    assert channel_vector(value.astype(np.int32), C, rank, axis) is None


def test_one_definition_for_every_vocabulary() -> None:
    last = Vocabulary("last", "Conv2d", "BatchNorm", -1)
    a, b = fold_rules(ONNX), fold_rules(last)
    assert [r.name for r in a] == [r.name for r in b] == [
        "fold_batch_norm", "fold_bias", "fold_bias_first", "fold_scale", "fold_scale_first",
        "batch_norm_scale", "batch_norm_scale_first", "batch_norm_shift",
        "batch_norm_shift_first"]
    assert a[0].match.ops == ("BatchNormalization",) and b[0].match.ops == ("BatchNorm",)
    assert a[0].match.inputs[0].ops == ("Conv",) and b[0].match.inputs[0].ops == ("Conv2d",)
    for x, y in zip(a, b, strict=True):
        assert isinstance(x.replace, (IntoConv, IntoBatchNorm))
        assert type(x.replace) is type(y.replace)
        assert (x.replace.scale, x.replace.shift) == (y.replace.scale, y.replace.shift)
        assert (x.replace.axis, y.replace.axis) == (1, -1)
