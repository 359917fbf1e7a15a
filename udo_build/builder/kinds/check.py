"""`check`: a run's checks over its stored metrics -> the verdict.

Input `metrics` (the run's metrics against the float model, JSON). Parameters: the bounds
(udo_build.runtime.metrics.RunCheck: `min_sqnr_db`, `max_abs_error`, `min_top1_agreement`;
on a decode run `min_sqnr_db` also bounds every step, and `max_drift_db` the drift), which
alone enter the key with the metrics (changing a threshold runs this step and nothing else),
and `run`, the run's name, for messages. A bound the metrics miss fails the step with the
numbers (StepFailed); a pass publishes the verdict, check.json (the bounds, the metrics they
were held against, and that they passed), next to the run's results.
"""

from __future__ import annotations

from dataclasses import fields
from typing import TYPE_CHECKING

from ...runtime.metrics import RunCheck
from ..actions import ActionContext, action_kind

if TYPE_CHECKING:
    from ..action_io import Produced

CHECK_KEY_PARAMS = tuple(f.name for f in fields(RunCheck))


@action_kind("check", version=1, params=CHECK_KEY_PARAMS)
def check(ctx: ActionContext) -> Produced:
    import json

    from ...errors import StepFailed
    from ..action_io import Produced

    name = ctx.params.get("run")
    bounds = RunCheck.from_params(ctx.params)
    metrics = json.loads(ctx.input_bytes("metrics"))
    failures = bounds.failures(metrics)
    if failures:
        raise StepFailed("check", f"{name}: check failed: " + "; ".join(failures))
    verdict = {"checks": bounds.to_params(), "metrics": metrics, "passed": True}
    data = (json.dumps(verdict, indent=1, sort_keys=True) + "\n").encode()
    stated = ", ".join(f"{k} {v}" for k, v in sorted(bounds.to_params().items()))
    return Produced({"verdict": data}, description=f"checks passed ({stated})")
