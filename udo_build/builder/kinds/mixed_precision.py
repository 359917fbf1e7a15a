"""The steps of `quantize.target` (mixed precision), each its own cached action (the plan,
udo_build.builder.plan, names them):

    quantize:reference     the `quantize` kind at the recipe's widths, over the calibration list
    quantize:alternate     the `quantize` kind at the other widths (activations 16 <-> 8,
                           weights 8 <-> 4), same calibration list
    mixed-sensitivity:<g>  both models + the held-out list and files (+ kernels) -> the output
                           SQNR with each unit of group g (units i with i % groups == g) alone at
                           its low width, every other unit at its high width
                           (udo_build.quant.mixed_search)
    mixed-search           both models + every group's sensitivities + the held-out list ->
                           the widths (udo_build.quant.settings.Widths) and the document
                           published as quant/mixed.json (udo_build.quant.mixed_search)
    quantize               the float bundle at the chosen widths (input `widths`): the
                           recipe's quantized model

Only the search's key holds the target (`min_sqnr_db`): a new target runs the search again,
and the final quantize when the widths it chooses differ; the sensitivities are cached. All
measures run over the first `inputs` inferences of the held-out list. A target out of reach is
the user's error, at quantize.target.min_sqnr_db, naming the best SQNR the widths reach.
"""

from __future__ import annotations

import json
from itertools import islice
from typing import TYPE_CHECKING, Any

from ...quant.settings import TARGET_PARAMS
from ..actions import ActionContext, action_kind
from .inputs import input_list, kernel_files, numbered

if TYPE_CHECKING:
    from ...quant.mixed_precision import Candidates
    from ..action_io import Produced

SENSITIVITY_PARAMS = ("group", "groups", "inputs")


# version 4 (both kinds): a tensor rounded onto its reader's output encoding is that unit's
# (udo_build.quant.pipeline.one_grid)
@action_kind("mixed-sensitivity", version=4, params=SENSITIVITY_PARAMS)
def mixed_sensitivity(ctx: ActionContext) -> Produced:
    from ...quant.mixed_precision import OutputNoise
    from ..action_io import Produced

    candidates, packages, feeds = _read(ctx)
    group, groups = int(ctx.params["group"]), int(ctx.params["groups"])
    units = [u for i, u in enumerate(candidates.units) if i % groups == group]
    measure = OutputNoise(candidates, packages, feeds)
    figures = measure.sqnr_db([candidates.low_alone(u) for u in units], ctx.cores,
                              ctx.progress("width choices", len(units)))
    doc = {"inputs": len(feeds), "units": [
        {"kind": u.kind, "name": u.name, "bits": u.low, "sqnr_db": _rounded(f)}
        for u, f in zip(units, figures, strict=True)]}
    return Produced({"sensitivity": _json(doc)},
                    description=(f"sensitivity of {len(units)} of {len(candidates.units)} units "
                                 f"(group {group + 1} of {groups}, each alone at its low width) "
                                 f"over {len(feeds)} inputs"))


@action_kind("mixed-search", version=4, params=TARGET_PARAMS)
def mixed_search(ctx: ActionContext) -> Produced:
    from ...quant.algorithm_settings import TargetSettings
    from ...quant.mixed_precision import OutputNoise, elements
    from ...quant.mixed_search import Unreachable, document, search
    from ..action_io import Produced

    target = TargetSettings.from_params(ctx.params)
    candidates, packages, feeds = _read(ctx)
    sensitivity = _sensitivities(ctx, candidates)
    measure = OutputNoise(candidates, packages, feeds)
    reference_db = _rounded_db(measure.sqnr_db([candidates.widths({})])[0])
    sizes = elements(candidates, packages, feeds[0])

    def measured(bits: dict[Any, int]) -> float:
        return _rounded_db(measure.sqnr_db([candidates.widths(bits)], ctx.cores)[0])

    try:
        result = search(candidates.units, sensitivity, reference_db, sizes, target.min_sqnr_db,
                        measured)
    except Unreachable as exc:
        raise _unreachable(ctx, exc, len(feeds), candidates) from None
    widths = candidates.widths(result.chosen.bits)
    doc = document(candidates, sizes, sensitivity, reference_db, result, target.min_sqnr_db,
                   len(feeds))
    raised = sum(1 for u, b in result.chosen.bits.items() if b != u.reference)
    return Produced({"widths": widths.to_bytes(), "mixed": _json(doc)},
                    description=(f"mixed precision for {target.min_sqnr_db} dB: "
                                 f"{result.chosen.sqnr_db:.2f} dB over {len(feeds)} inputs, "
                                 f"{raised} of {len(candidates.units)} units away from the "
                                 f"quantize settings' widths"))


def _read(ctx: ActionContext) -> tuple[Candidates, Any, list[Any]]:
    """(the candidates, the kernels' packages, the first `inputs` held-out feeds)."""
    from ...ir.bundle import read_bundle
    from ...ir.qmodel import from_bundle
    from ...kernels.load import packages_for
    from ...model.input_list import feeds
    from ...quant.mixed_precision import Candidates

    reference = read_bundle(ctx.input_reader("reference"), "reference quantized bundle")
    alternate = read_bundle(ctx.input_reader("alternate"), "alternate quantized bundle")
    packages = packages_for(reference, kernel_files(ctx))
    listing = input_list(ctx)
    held_out = list(islice(feeds(listing, list(reference.model.graph.inputs)),
                           int(ctx.params["inputs"])))
    return Candidates.of(from_bundle(reference), from_bundle(alternate)), packages, held_out


def _sensitivities(ctx: ActionContext, candidates: Candidates) -> dict[Any, float]:
    found: dict[tuple[str, str], float] = {}
    for name in numbered(ctx, "sensitivity"):
        for entry in json.loads(ctx.input_bytes(name))["units"]:
            value = entry["sqnr_db"]
            found[entry["kind"], entry["name"]] = float("inf") if value is None else value
    missing = [u.name for u in candidates.units if (u.kind, u.name) not in found]
    if missing:  # the plan gives every group: a unit without a figure is udo-build's bug
        raise RuntimeError(f"no sensitivity for {len(missing)} units, e.g. {missing[0]}")
    return {u: found[u.kind, u.name] for u in candidates.units}


def _unreachable(ctx: ActionContext, exc: Any, inputs: int, candidates: Candidates
                 ) -> Exception:
    from ...errors import UserError
    from ...quant.mixed_precision import WEIGHT

    highest = sorted({u.high for u in candidates.units if u.kind == WEIGHT}) or [8]

    file, line, column, field = (ctx.params.get("at")
                                 or [None, None, None, "quantize.target.min_sqnr_db"])
    wider = "" if highest[-1] >= 16 else ", weights of 8 or 16 bits (weight_widths: [8, 16])"
    return UserError(f"{exc.target_db:g} dB is out of reach: the best widths tried give "
                     f"{exc.best_db:.2f} dB over the first {inputs} held-out inputs (every "
                     f"activation at 16 bits and every weight at {highest[-1]}: "
                     f"{exc.highest_db:.2f} dB)", file=file, line=line, column=column,
                     field=field,
                     hint=f"lower quantize.target.min_sqnr_db to at most {exc.best_db:.2f}"
                          f"{wider}, or improve the 8-bit model (quantize.algorithms, "
                          "per_channel, the enhanced quantizer)")


def _rounded(value: float) -> float | None:
    """A figure as the documents hold it: 3 decimals (the float reference may differ in its
    last bits between machines), None for an exact output (no noise)."""
    return None if value == float("inf") else round(value, 3)


def _rounded_db(value: float) -> float:
    rounded = _rounded(value)
    return float("inf") if rounded is None else rounded


def _json(doc: Any) -> bytes:
    return (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()
