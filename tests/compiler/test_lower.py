"""Lowering to the HTP form: 4-D tensors, transposes around channel-last ops, requested outputs,
input dimension overrides (shape inference, custom ops without kernels)."""

from __future__ import annotations

import numpy as np
import pytest

from udo_build.errors import UserError
from udo_build.kernels.oppkg import OpPackage
from udo_build.rewrite.graph import BHWC, MODEL

from .helpers import G, check_float, prepare, softplus_bundle, w


def mixed_ranks() -> object:
    g = G()
    c = g.conv("x", 3, 4, "c")
    p = g.op("MaxPool", c, out="p", kernel_shape=[2, 2], strides=[2, 2])
    f = g.op("Flatten", p, out="f", axis=1)
    h = g.op("Gemm", f, g.const("hw", w(5, 64)), g.const("hb", w(5)), out="h", transB=1)
    s = g.op("Softmax", h, out="s", axis=1)
    g.op("Split", s, out="a", outputs=["b"], axis=1)
    return g.model({"x": (2, 3, 8, 8)}, ["a", "b"])


def test_every_tensor_is_4d_and_channel_last_ops_are_wrapped_in_transposes() -> None:
    model = mixed_ranks()
    compiled = prepare(model, level=1, outputs={"tensors": ["s"]})
    g = compiled.graph
    assert all(len(t.shape) == 4 for t in g.types.values() if t not in [
        g.types[v] for v in g.consts])
    spatial = [op for op in g.ops.values() if op.layout == BHWC]
    assert {op.op for op in spatial} == {"Conv2d", "MaxPool2d"}
    assert g.op_counts()["Transpose"] == 2 * len(spatial)
    assert [op.op for op in g.ops.values() if op.layout == MODEL] == ["Gemm"]
    softmax = next(op for op in g.ops.values() if op.op == "Softmax")
    assert softmax.attr("axis") == 3  # axis 1 of a rank-2 tensor, backfilled
    check_float(model, compiled)
    optimized = prepare(model, level=2, outputs={"tensors": ["s"]})
    assert optimized.graph.op_counts()["Transpose"] == 2  # in and before the flatten
    check_float(model, optimized)


OUTPUTS = [
    ("default", ["a", "b"]),
    ({"layers": ["a"]}, ["a", "b"]),
    ({"tensors": ["h", "c"]}, ["h", "c"]),
    ({"layers": ["h"], "tensors": ["x"]}, ["h", "x"]),
]


@pytest.mark.parametrize("spec,tensors", OUTPUTS)
def test_outputs(spec: object, tensors: list[str]) -> None:
    model = mixed_ranks()
    compiled = prepare(model, outputs=spec)
    assert compiled.output_tensors == tensors
    assert [n for n, _ in compiled.graph.outputs] == tensors
    got = check_float(model, compiled)
    assert {k: v.shape for k, v in got.items()} == {
        t: model.graph.info(t).shape if model.graph.info(t) else None for t in tensors}
    assert ("Split" in compiled.graph.op_counts()) == ("a" in tensors)  # DCE


@pytest.mark.parametrize("spec,message", [
    ({"layers": ["nope"]}, "the model has no layer 'nope'; its layers: c, p, f, h, s, a"),
    ({"tensors": ["c.w"]}, "no tensor 'c.w'; its tensors: x, c, p, f, h, s, a, b"),
])
def test_unknown_outputs_are_user_errors(spec: object, message: str) -> None:
    with pytest.raises(UserError) as info:
        prepare(mixed_ranks(), outputs=spec)
    assert message in str(info.value)


def test_input_dimension_overrides_reinfer_shapes() -> None:
    model = mixed_ranks()
    compiled = prepare(model, dims={"x": (5, 3, 16, 16)}, outputs={"tensors": ["p"]})
    assert compiled.io.outputs == {"p": (5, 4, 8, 8)}
    check_float(model, compiled)
    for dims, message in (({"y": (1, 3, 8, 8)}, "not an input"),
                          ({"x": (1, 3, 8)}, "has rank 4")):
        with pytest.raises(UserError, match=message):
            prepare(model, dims=dims)


def test_custom_ops_keep_the_bundles_shapes_or_preserve_their_input_shape() -> None:
    bundle, packages = softplus_bundle()
    compiled = prepare(bundle, dims={"input": (3, 3, 16, 16)})
    assert compiled.notes == [
        "custom op SoftplusPackage::Softplus assumed shape-preserving at the new input "
        "dimensions", "custom op SoftplusPackage::Swish assumed shape-preserving at the new "
        "input dimensions"]
    assert compiled.io.outputs == {"logits": (3, 10)}
    check_float(bundle.model, compiled, packages)
    with_kernels = prepare(bundle, dims={"input": (3, 3, 16, 16)}, packages=packages)
    assert with_kernels.notes == []


def shrinking() -> tuple[object, OpPackage]:
    pkg = OpPackage("Pkg")

    @pkg.op("Half")
    def half(x: np.ndarray) -> np.ndarray:
        return x[:, :, ::2]
    g = G()
    g.op("Half", g.op("Relu", "x", out="r"), out="h", package="Pkg")
    return g.model({"x": (1, 2, 8, 8)}, ["h"], {"Pkg": pkg}), pkg


def test_a_shape_changing_custom_op_needs_its_kernels_at_other_dimensions() -> None:
    model, pkg = shrinking()
    assert prepare(model).io.outputs == {"h": (1, 2, 4, 8)}
    with pytest.raises(UserError, match="changes the shape of its input"):
        prepare(model, dims={"x": (1, 2, 16, 8)})
    compiled = prepare(model, dims={"x": (1, 2, 16, 8)}, packages={"Pkg": pkg})
    assert compiled.io.outputs == {"h": (1, 2, 8, 8)}
    check_float(model, compiled, {"Pkg": pkg})
