"""`quantize`: the float bundle, the calibration list and every file it names (and the kernels
of the custom ops, which calibration runs) -> the quantized bundle and its AIMET encodings.

Published by the plan as `model/<model>_quantized.udb` and
`model/<model>_quantized.encodings.json` (the vendor's `_quantized` naming).
"""

from __future__ import annotations

from ..actions import ActionContext, Produced, action_kind

SETTINGS = ("act_bitwidth", "weights_bitwidth", "bias_bitwidth", "per_channel", "quantizer",
            "float_fallback")


@action_kind("quantize", version=2, params=SETTINGS)
def quantize(ctx: ActionContext) -> Produced:
    from pathlib import Path

    from ...ir import encodings
    from ...ir.bundle import read_bundle
    from ...ir.qmodel import to_bundle
    from ...kernels.load import packages_for
    from ...model.input_list import feeds, parse_input_list
    from ...quant.pipeline import quantize_model

    bundle = read_bundle(ctx.input_bytes("bundle"), "float bundle")
    kernels = [ctx.input_path(n) for n in ctx.input_names() if n.startswith("kernels[")]
    packages = packages_for(bundle, kernels)
    listing = parse_input_list(Path(ctx.input_path("input_list")))
    overrides = None
    if "override_encodings" in ctx.input_names():
        overrides = encodings.load(Path(ctx.input_path("override_encodings")))
    settings = {k: ctx.params[k] for k in SETTINGS}
    qmodel = quantize_model(bundle.model, packages, feeds(listing, list(bundle.model.graph.inputs)),
                            settings, overrides)
    quantized = to_bundle(qmodel, bundle.opdefs, dict(bundle.meta))
    return Produced(
        {"bundle": quantized.to_bytes(), "encodings": qmodel.encodings_json()},
        description=(f"quantize {bundle.model.graph.name} with {settings['quantizer']} over "
                     f"{qmodel.settings['calibration_inputs']} inputs: "
                     f"{len(qmodel.activations)} activation and {len(qmodel.params)} parameter "
                     "encodings"))
