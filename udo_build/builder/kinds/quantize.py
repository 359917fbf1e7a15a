"""`quantize`: the float bundle, the calibration list and every file it names (and the kernels
of the custom ops, which calibration runs) -> the quantized bundle and its AIMET encodings.

Parameters: udo_build.quant.settings.QuantizeSettings. Published by the plan as
`model/<model>_quantized.udb` and `model/<model>_quantized.encodings.json` (the vendor's
`_quantized` naming).
"""

from __future__ import annotations

from ...quant.settings import QuantizeSettings
from ..actions import ActionContext, Produced, action_kind
from .inputs import input_list, kernel_files


# version 3: encodings from ranges rounded outward to 8 significant bits (udo_build.quant.stats)
# version 4: the encodings in AIMET's 1.0.0 format (udo_build.ir.encodings)
@action_kind("quantize", version=4, params=QuantizeSettings.KEY_PARAMS)
def quantize(ctx: ActionContext) -> Produced:
    from ...ir import encodings
    from ...ir.bundle import read_bundle
    from ...ir.qmodel import to_bundle
    from ...kernels.load import packages_for
    from ...model.input_list import feeds
    from ...quant.pipeline import quantize_model

    settings = QuantizeSettings.from_params(ctx.params)
    bundle = read_bundle(ctx.input_bytes("bundle"), "float bundle")
    packages = packages_for(bundle, kernel_files(ctx))
    listing = input_list(ctx)
    overrides = None
    if "override_encodings" in ctx.input_names():
        overrides = encodings.load(ctx.input_path("override_encodings"))
    qmodel = quantize_model(bundle.model, packages, feeds(listing, list(bundle.model.graph.inputs)),
                            settings.to_params(), overrides,
                            ctx.progress("calibration", len(listing.inferences)))
    quantized = to_bundle(qmodel, bundle.opdefs, dict(bundle.meta))
    return Produced(
        {"bundle": quantized.to_bytes(), "encodings": qmodel.encodings_json()},
        description=(f"quantize {bundle.model.graph.name} with {settings.quantizer} over "
                     f"{qmodel.settings['calibration_inputs']} inputs: "
                     f"{len(qmodel.activations)} activation and {len(qmodel.params)} parameter "
                     "encodings"))
