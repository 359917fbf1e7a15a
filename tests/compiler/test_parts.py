"""udo_build.compiler.parts: cutting a graph into parts under a record-byte limit (the cuts,
the estimate, the check after prepare), and running the parts chained against the whole."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from udo_build.compiler.partition import node_runtimes, partition
from udo_build.compiler.parts import (
    PartsPlan,
    PartTooLarge,
    check_records,
    constant_sizes,
    cuts_for,
    estimate,
    plan_parts,
)
from udo_build.compiler.serve import record_for_run
from udo_build.errors import StepFailed
from udo_build.ir.bundle import Bundle
from udo_build.model.onnx_import import import_onnx
from udo_build.runtime.records import RunSettings
from udo_build.soc.target import CompileTarget

from ..builder.parts_project import FP16_LIMIT, WIDTH, stack_model


def _bundle(layers: int = 3) -> Bundle:
    return Bundle(import_onnx(stack_model(layers), file="stack.onnx"), None, {})


def _plan(bundle: Bundle, limit: int, precision: str = "fp16") -> PartsPlan:
    allowed = node_runtimes(bundle.model, None)
    whole = partition(bundle.model, allowed, ["y"])
    return plan_parts(bundle.model, whole, constant_sizes(bundle, precision), limit,
                      precision, ["y"])


def test_cuts_fall_between_layers_where_only_the_hidden_state_crosses() -> None:
    plan = _plan(_bundle(), FP16_LIMIT)
    assert plan.cuts == ("mm1", "mm2")
    assert [(p.first, p.last, p.inputs, p.outputs) for p in plan.parts] == [
        ("mm0", "res0", ("x",), ("h0",)), ("mm1", "res1", ("h0",), ("h1",)),
        ("mm2", "res2", ("h1",), ("y",))]
    assert all(p.estimated_bytes <= FP16_LIMIT for p in plan.parts)
    assert PartsPlan.from_json(plan.to_json()) == plan
    # two layers fit 25,000 bytes: two parts, the cut again where h crosses
    sizes = constant_sizes(_bundle(), "fp16")
    two = _plan(_bundle(), 25_000)
    assert two.cuts == ("mm2",) and len(two.parts) == 2
    assert two.parts[0].estimated_bytes == estimate(
        [n for n in _bundle().model.graph.nodes if n.name[-1] in "01"], sizes)


def test_the_widths_follow_the_precision() -> None:
    bundle = _bundle()
    fp16 = constant_sizes(bundle, "fp16")
    assert fp16["w0"] == WIDTH * WIDTH * 2 and fp16["b0"] == WIDTH * 2
    # int8 widths come from the encodings: a float bundle has none
    with pytest.raises(Exception, match="not quantized"):
        constant_sizes(bundle, "int8")


def test_a_limit_too_small_for_one_node_names_it() -> None:
    with pytest.raises(PartTooLarge) as caught:
        _plan(_bundle(), 6000)
    assert caught.value.node == "mm0" and caught.value.needed > 6000
    assert "mm0 (MatMul)" in str(caught.value)


def test_a_model_within_the_limit_is_not_cut() -> None:
    plan = _plan(_bundle(), 1 << 30)
    assert plan.cuts == () and len(plan.parts) == 1


def test_a_record_over_the_limit_after_prepare_is_the_step_failing() -> None:
    plan = _plan(_bundle(), FP16_LIMIT)
    check_records(plan, [(0, 100), (1, FP16_LIMIT), (2, 5)])
    with pytest.raises(StepFailed) as caught:
        check_records(plan, [(0, 100), (1, FP16_LIMIT + 1)])
    message = str(caught.value)
    assert "part 1 (mm1 .. res1, 4 nodes): 20,001 bytes" in message
    assert "prepare.max_record_bytes" in message


def test_a_run_picks_the_cuts_of_its_precision_and_outputs() -> None:
    meta = {"parts": [{"precision": "fp16", "outputs": ["y"], "cuts": ["mm2"]},
                      {"precision": "int8", "outputs": ["h0"], "cuts": ["bias0"]},
                      {"precision": "int8", "outputs": ["y"], "cuts": ["mm1"]}]}
    assert cuts_for(meta, "int8", ["y"]) == ("mm1",)
    assert cuts_for(meta, "fp16", ["h1"]) == ("mm2",)
    assert cuts_for({}, "fp16", ["y"]) == ()


@pytest.mark.parametrize("precision", ["fp16", "fp32"])
def test_the_parts_chained_equal_the_whole_graph(precision: str) -> None:
    """Each part prepared online (no records) and run in order: the same bits as the whole."""
    bundle = _bundle()
    target = CompileTarget("v73", 8, 2, {}, {"tensors": ["y"]}, precision)
    settings = RunSettings("t", "sm8550", target)
    whole, _, _ = record_for_run(bundle, settings, {})
    cut = replace(bundle, meta={"parts": [{"precision": precision, "outputs": ["y"],
                                           "cuts": ["mm1", "mm2"]}]})
    chained, selection, _ = record_for_run(cut, settings, {})
    assert [p["inputs"] for p in selection["partition"]] == [["x"], ["h0"], ["h1"]]
    assert selection["switches"] == 0
    x = np.random.default_rng(3).standard_normal((1, WIDTH)).astype(np.float32)
    a = whole.runner({}).run({"x": x})["y"]
    b = chained.runner({}).run({"x": x})["y"]
    assert np.array_equal(a, b)



def test_cuts_stay_inside_the_htp_subnets() -> None:
    """relu1 on the CPU alone: the HTP subnets around it are cut, the CPU subnet never."""
    bundle = _bundle()
    allowed = {**node_runtimes(bundle.model, None), "relu1": ("CPU",)}
    whole = partition(bundle.model, allowed, ["y"])
    plan = plan_parts(bundle.model, whole, constant_sizes(bundle, "fp16"), FP16_LIMIT,
                      "fp16", ["y"])
    assert plan.cuts == ("mm1",)  # the last HTP subnet (res1 .. res2) holds one weight
    cut = partition(bundle.model, allowed, ["y"], plan.cuts)
    assert [(s.runtime, s.nodes[0], s.nodes[-1]) for s in cut.subnets] == [
        ("HTP", "mm0", "res0"), ("HTP", "mm1", "bias1"), ("CPU", "relu1", "relu1"),
        ("HTP", "res1", "res2")]
    assert cut.switches == 2 and [p.index for p in plan.parts] == [0, 1, 3]
    assert cut.to_json()["cuts"] == ["mm1"]
    assert "cuts" not in whole.to_json()  # a partition without parts: its JSON as before
