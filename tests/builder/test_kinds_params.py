"""Each kind's parameters are one typed value: the planner writes `to_params()`, the kind reads
`from_params`, and what enters the key is exactly what the plan says."""

from __future__ import annotations

from typing import Any

import pytest

from udo_build.builder.actions import get_kind, load_kinds
from udo_build.builder.plan import plan_recipe
from udo_build.opdef.params import OpdefParams
from udo_build.package.params import PackageParams
from udo_build.quant.settings import QuantizeSettings
from udo_build.recipe import load_recipe
from udo_build.recipe.model import OutputRequests
from udo_build.runtime.metrics import RunCheck
from udo_build.runtime.records import RunSettings
from udo_build.soc.target import CompileTarget

from ..conftest import RECIPES

TYPES: dict[str, Any] = {"opdef": OpdefParams, "package": PackageParams,
                         "quantize": QuantizeSettings, "prepare": CompileTarget,
                         "run": RunSettings, "outputs": OutputRequests, "check": RunCheck}
MESSAGE_ONLY = {"prepare": {"soc"},  # the SoC's name is not part of a compile target
                "check": {"run"},  # nor is the run's name part of its checks
                "run": {"decode_at"}}  # where a decode run's fields are, for its errors
# a prepare's outputs enter its key as the resolved names (its input `outputs`), not as written;
# a run's checks are its check step's
NOT_KEYED = {"prepare": {"outputs"}, "run": {"check"}}


@pytest.fixture(scope="module")
def plan() -> Any:
    load_kinds()
    return plan_recipe(load_recipe(RECIPES / "softplus.yaml"))


def test_every_kind_keys_the_params_of_its_type(plan: Any) -> None:
    for name, params_type in TYPES.items():
        keyed = getattr(params_type, "KEY_PARAMS", None) or tuple(vars(params_type()))
        assert get_kind(name).params == tuple(  # type: ignore[union-attr]
            p for p in keyed if p not in NOT_KEYED.get(name, ()))
    assert {a.kind for a in plan.actions.values()} - set(TYPES) == {"convert", "assemble"}
    assert all(not a.params for a in plan.actions.values() if a.kind not in TYPES)


def test_the_plan_s_params_round_trip_through_their_type(plan: Any) -> None:
    for action in plan.actions.values():
        if action.kind not in TYPES:
            continue
        typed = TYPES[action.kind].from_params(action.params)
        dropped = MESSAGE_ONLY.get(action.kind, set())
        assert typed.to_params() == {k: v for k, v in action.params.items() if k not in dropped}


def test_a_prepare_gets_its_target_s_compile_target(plan: Any) -> None:
    action = plan.actions["prepare:sm8550/O3/input=4x3x32x32/layers=head/int8"]
    assert action.params == {"soc": "sm8550", "arch": "v73", "vtcm_mb": 8,
                             "optimization_level": 3, "input_dimensions": {"input": [4, 3, 32, 32]},
                             "outputs": {"layers": ["head"]}, "precision": "int8"}


def test_the_run_and_quantize_params(plan: Any) -> None:
    assert plan.actions["run:smoke"].params == {
        "name": "smoke", "soc": "sm8550", "arch": "v73", "vtcm_mb": 8, "optimization_level": 2,
        "input_dimensions": {}, "outputs": {"tensors": ["logits"]}, "precision": "int8",
        "mode": "permissive", "check": {"min_sqnr_db": 25}, "decode": None, "generate": None}
    assert plan.actions["check:smoke"].params == {"run": "smoke", "min_sqnr_db": 25}
    assert plan.actions["quantize"].params == {
        "act_bitwidth": 8, "weights_bitwidth": 8, "bias_bitwidth": 32, "per_channel": True,
        "quantizer": "enhanced", "float_fallback": False, "report_inputs": 1}
    assert plan.actions["package:HTP"].params == {
        "backend": "HTP", "archs": ["v68", "v69", "v73", "v75", "v79"],
        "with_kernels": [True, True], "config_names": ["softplus.xml", "swish.json"]}
