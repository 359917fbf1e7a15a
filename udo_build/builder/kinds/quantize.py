"""`quantize`: the float bundle, the calibration list and every file it names (and the kernels
of the custom ops, which calibration runs) -> the quantized bundle, its AIMET encodings and,
unless `report_inputs` is 0, where accuracy goes: the SQNR of each quantized layer over the
first `report_inputs` calibration inputs (udo_build.quant.report). Calibration and the
measure spread over the action's cores (`ctx.cores`); the outputs are the same bits whatever
their number (udo_build.quant.calibrate).

Parameters: udo_build.quant.settings.QuantizeSettings. Input `widths`, when given (the mixed
precision search's choice, udo_build.builder.kinds.mixed_precision): per-tensor bit widths
instead of act_bitwidth / weights_bitwidth (udo_build.quant.settings.Widths). Published by the
plan as `model/<model>_quantized.udb`, `model/<model>_quantized.encodings.json` (the vendor's
`_quantized` naming) and `quant/layers.json` (read by the build report page).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING

from ...canonical import canonical_json
from ...errors import Problem
from ...quant.settings import QuantizeSettings
from ..actions import ActionContext, action_kind
from .inputs import input_list, kernel_files

if TYPE_CHECKING:
    from pathlib import Path

    from ...recipe import Recipe
    from ...store import Store
    from ..action_io import FileOfParts, Produced
    from ..engine import ActionState

UNKNOWN = "override_unknown"


# version 3: encodings from ranges rounded outward to 8 significant bits (udo_build.quant.stats)
# version 4: the encodings in AIMET's 1.0.0 format (udo_build.ir.encodings)
# version 5: the per-layer SQNR over the first `report_inputs` calibration inputs (output `layers`)
# version 6: ranges from finite values only; inputs read for their exact values stay float
# version 7: override encodings naming tensors the model lacks are left out (they were written to
# the encodings), their names the output `override_unknown` (the build warns of them, or refuses
# them under --strict: `override_problems`)
# version 8: a weight channel whose 32-bit bias would not fit gets a wider scale
# version 9: a tensor read only by a Relu or Clip is rounded onto that reader's output
# encoding (udo_build.quant.pipeline.one_grid)
@action_kind("quantize", version=9, params=QuantizeSettings.KEY_PARAMS)
def quantize(ctx: ActionContext) -> Produced:
    from ...ir import encodings
    from ...ir.bundle import read_bundle
    from ...ir.qmodel import to_bundle
    from ...kernels.load import packages_for
    from ...model.input_list import feeds
    from ...quant.algorithm_settings import Widths
    from ...quant.pipeline import quantize_and_measure
    from ...runtime.pool import labels
    from ..action_io import FileOfParts, Produced

    settings = QuantizeSettings.from_params(ctx.params)
    bundle = read_bundle(ctx.input_reader("bundle"), "float bundle")
    packages = packages_for(bundle, kernel_files(ctx))
    listing = input_list(ctx)
    widths = (Widths.from_bytes(ctx.input_bytes("widths")) if "widths" in ctx.input_names()
              else None)
    overrides = unknown = None
    if "override_encodings" in ctx.input_names():
        overrides, unknown = encodings.known_only(encodings.load(ctx.input_path(
            "override_encodings"), bundle.model), encodings.model_tensors(bundle.model))
    count = len(listing.inferences)
    lines = [inference[0].line if inference else 0 for inference in listing.inferences]
    qmodel, figures = quantize_and_measure(
        bundle.model, packages, lambda: feeds(listing, list(bundle.model.graph.inputs)),
        settings, overrides, ctx.progress("calibration", count),
        ctx.progress("layer SQNR", min(settings.report_inputs, count)), cores=ctx.cores,
        count=count, label=labels("calibration input", listing.file, lines), widths=widths)
    written = qmodel.write_encodings(ctx.workdir / "encodings.json")  # an LLM's: 100+ MB
    quantized = to_bundle(qmodel, bundle.opdefs, dict(bundle.meta), written)
    outputs: dict[str, bytes | Path | FileOfParts] = {
        "bundle": FileOfParts.of_bundle(quantized), "encodings": written.path}
    measured = ""
    if unknown is not None:
        outputs[UNKNOWN] = canonical_json(list(unknown))
        if unknown:
            measured += f"; {len(unknown)} override names the model lacks, ignored"
    if figures is not None:
        outputs["layers"] = figures.to_bytes()
        measured = f"; SQNR of {len(figures.layers)} layers over {figures.inputs} inputs"
    return Produced(
        outputs,
        description=(f"quantize {bundle.model.graph.name} with {settings.quantizer} over "
                     f"{qmodel.settings['calibration_inputs']} inputs: "
                     f"{len(qmodel.activations)} activation and {len(qmodel.params)} parameter "
                     f"encodings{measured}"))


def override_unknown(store: Store, state: ActionState) -> tuple[str, ...]:
    """The names a quantize action's override encodings give that the model lacks (its output
    `override_unknown`, built or cached alike; none without override encodings)."""
    import json

    output = state.result.outputs.get(UNKNOWN) if state.result is not None else None
    data = store.cas.get(output.digest) if output is not None else None
    return tuple(json.loads(data)) if data else ()


def unknown_message(names: tuple[str, ...], file: str | None) -> tuple[str, str]:
    """(message, hint) of override encodings naming tensors the model lacks."""
    named = f" {file}" if file else ""
    return (f"the override encodings{named} name {len(names)} tensor(s) the model lacks, "
            f"ignored: {', '.join(names)}",
            "check the names against the model's tensors (udo-build info BUNDLE), or drop "
            "them; --strict refuses such a file")


def override_problems(store: Store, recipe: Recipe,
                      states: Mapping[str, ActionState]) -> list[Problem]:
    """One problem per quantize of a recipe's build whose override encodings name tensors the
    model lacks, at the recipe's quantize.override_encodings."""
    from ...errors import display_path

    file = recipe.quantize.override_encodings if recipe.quantize is not None else None
    found = []
    for state in states.values():
        names = override_unknown(store, state) if state.action.kind == "quantize" else ()
        if not names:
            continue
        message, hint = unknown_message(names, display_path(file) if file else None)
        where = ("quantize", "override_encodings")
        found.append(recipe.positions.error(where, message, hint).problem
                     if recipe.positions is not None else Problem(message, hint=hint))
    return found
