"""Levels 1-3 compute what the unprepared model computes: float within 1e-5 relative, int8 bit
for bit against the integer path; and they differ as documented (1: no fusions, 3: more
tiling)."""

from __future__ import annotations

import pytest

from udo_build.ir import Model

from .helpers import G, check_float, check_int8, fired, prepare, quantized, softplus_bundle, w

LEVELS = (1, 2, 3)


def residual_net() -> Model:
    g = G()
    x = g.op("Relu", g.bn(g.conv("x", 3, 8, "c1", bias=False), 8, "bn1"), out="r1")
    y = g.op("Relu", g.bn(g.conv(x, 8, 8, "c2"), 8, "bn2"), out="r2")
    s = g.op("Add", y, x, out="res")
    r = g.op("Relu", s, out="r3")
    p = g.op("MaxPool", r, out="mp", kernel_shape=[2, 2], strides=[2, 2])
    c = g.op("Concat", p, g.op("AveragePool", r, out="ap", kernel_shape=[2, 2],
                                 strides=[2, 2]), out="cat", axis=1)
    gp = g.op("GlobalAveragePool", g.conv(c, 16, 8, "c3", k=1), out="gap")
    f = g.op("Flatten", gp, out="flat")
    g.op("Gemm", f, g.const("fc.w", w(5, 8)), out="fc", transB=1)
    return g.model({"x": (2, 3, 16, 16)}, ["fc"])


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("vtcm", [8, 0.0625])
def test_float_levels_equal_the_model(level: int, vtcm: float) -> None:
    model = residual_net()
    compiled = prepare(model, level=level, vtcm_mb=vtcm)
    check_float(model, compiled)
    assert (fired(compiled, "fold_batch_norm") > 0) == (level >= 2)
    assert (fired(compiled, "autosplit_rows") > 0) == (vtcm < 1)


def test_level_3_tiles_more_and_makes_a_larger_record() -> None:
    model = residual_net()
    two, three = (prepare(model, level=n, vtcm_mb=0.125) for n in (2, 3))
    splits = [fired(c, "autosplit_rows") + fired(c, "autosplit_batch") for c in (two, three)]
    assert splits[1] > splits[0] > 0
    assert len(three.graph.ops) > len(two.graph.ops)
    assert len(three.record()) > len(two.record())


@pytest.mark.parametrize("level", LEVELS)
def test_int8_levels_are_bit_exact(level: int) -> None:
    model = residual_net()
    bundle = quantized(model)
    for vtcm, outputs in ((8, "default"), (0.0625, {"tensors": ["r2", "cat", "fc"]})):
        compiled = prepare(bundle, level=level, vtcm_mb=vtcm, outputs=outputs,
                           precision="int8")
        check_int8(bundle, compiled)
        kinds = {c.kind for c in compiled.choices.values()}
        assert "integer" in kinds


@pytest.mark.parametrize("level", LEVELS)
def test_the_softplus_example_at_every_level(level: int) -> None:
    bundle, packages = softplus_bundle()
    for outputs in ("default", {"layers": ["conv2"]}, {"tensors": ["softplus1_out", "logits"]}):
        compiled = prepare(bundle, level=level, outputs=outputs, packages=packages)
        check_float(bundle.model, compiled, packages)
    qbundle = quantized(bundle.model, packages, bundle.opdefs)
    for vtcm, dims in ((8, None), (0.03, {"input": (2, 3, 32, 32)})):
        compiled = prepare(qbundle, level=level, vtcm_mb=vtcm, dims=dims, precision="int8")
        check_int8(qbundle, compiled, packages)
