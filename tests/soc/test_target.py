"""The compile target as action parameters: what goes in comes back, byte for byte."""

from __future__ import annotations

from udo_build.canonical import canonical_json
from udo_build.soc.target import CompileTarget


def test_params_round_trip_and_keep_the_vtcm_type() -> None:
    params = {"arch": "v73", "vtcm_mb": 8, "optimization_level": 3,
              "input_dimensions": {"input": [4, 3, 32, 32]}, "outputs": {"tensors": ["logits"]},
              "precision": "int8"}
    target = CompileTarget.from_params(params)
    assert target == CompileTarget("v73", 8, 3, {"input": [4, 3, 32, 32]},
                                   {"tensors": ["logits"]}, "int8")
    assert canonical_json(target.to_params()) == canonical_json(params)
    assert canonical_json(CompileTarget("v73", 8.0).to_params()) != canonical_json(
        CompileTarget("v73", 8).to_params())  # 8 and 8.0 key differently: kept as given


def test_absent_and_empty_values_take_the_defaults() -> None:
    target = CompileTarget.from_params({"arch": "v75", "vtcm_mb": 8, "optimization_level": None,
                                        "input_dimensions": None, "outputs": None})
    assert target == CompileTarget("v75", 8, 2, {}, "default", "fp16")
    assert tuple(target.to_params()) == CompileTarget.KEY_PARAMS


def test_tuples_become_json_lists() -> None:
    target = CompileTarget("v73", 2, 1, {"x": (1, 2)}, {"layers": ("head",)})
    assert target.to_params()["input_dimensions"] == {"x": [1, 2]}
    assert target.to_params()["outputs"] == {"layers": ["head"]}
    assert (target.vtcm_bytes, target.budget) == (2 << 20, 2 << 20)
    assert CompileTarget("v73", 2, 3).budget == (2 << 20) // 4
