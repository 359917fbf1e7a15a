"""The quantization algorithms a recipe lists in `quantize.algorithms`, each its own cached
action, in the order the data flow asks for (udo_build.builder.plan):

    equalize       float bundle -> equalized float bundle (CLE and high-bias absorption:
                   udo_build.quant.equalize; data-free), which quantize then reads
    adaround       quantized bundle + calibration list and files (+ kernels) -> the bundle with
                   its weights rounded as learned (udo_build.quant.adaround); needs the
                   encodings, so after quantize
    bias-correct   quantized bundle + calibration list and files (+ kernels) -> the bundle with
                   its biases corrected (udo_build.quant.bias_correction); after the weights'
                   rounding is final, so after adaround, whose float weights (quantize's
                   bundle: input `reference`) it compares the rounded ones with

Changing AdaRound's settings re-runs only adaround and what follows; equalize reads no
calibration data, so new data re-runs quantize and after, never equalize. The two weight
algorithms output the bundle, its encodings and, unless `report_inputs` is 0, the layers
document with the stages before and after (udo_build.quant.stages; input `layers`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...quant.settings import ADAROUND_PARAMS
from ..actions import ActionContext, action_kind
from .inputs import input_list, kernel_files

if TYPE_CHECKING:
    from ..action_io import Produced


# version 2: the bundle stored as a file of parts (its weights blobs of their own), as convert's
@action_kind("equalize", version=2)
def equalize(ctx: ActionContext) -> Produced:
    from ...ir.bundle import Bundle, read_bundle
    from ...quant.equalize import equalize_model
    from ..action_io import FileOfParts, Produced

    bundle = read_bundle(ctx.input_reader("bundle"), "float bundle")
    done = equalize_model(bundle.model)
    meta = {**bundle.meta, "equalized": {"pairs": len(done.pairs), "rounds": done.rounds,
                                         "absorbed": done.absorbed}}
    out = Bundle(done.model, bundle.opdefs, meta, dict(bundle.parts))
    return Produced({"bundle": FileOfParts.of_bundle(out)},
                    description=(f"equalize {bundle.model.graph.name}: {len(done.pairs)} layer "
                                 f"pairs in {done.rounds} rounds, high bias absorbed in "
                                 f"{done.absorbed}"))


# version 2: the bundle stored as a file of parts (its weights shared blobs), as quantize's
@action_kind("adaround", version=2, params=(*ADAROUND_PARAMS, "report_inputs"))
def adaround(ctx: ActionContext) -> Produced:
    from ...quant.adaround import adaround as run_adaround
    from ...quant.algorithm_settings import AdaroundSettings

    settings = AdaroundSettings.from_params(ctx.params)
    return _weight_step(ctx, "adaround", lambda q, pk, feeds, n: run_adaround(
        q, pk, feeds, n, settings), f"AdaRound ({settings.iterations} iterations)")


# version 2: after AdaRound, compared with the float weights it rounded (input `reference`)
# version 3: the bundle stored as a file of parts (its weights shared blobs), as quantize's
@action_kind("bias-correct", version=3, params=("report_inputs",))
def bias_correct(ctx: ActionContext) -> Produced:
    from ...ir.bundle import read_bundle
    from ...quant.bias_correction import correct_biases

    reference = None
    if "reference" in ctx.input_names():
        reference = read_bundle(ctx.input_reader("reference"),
                                "bundle before AdaRound").model.weights
    return _weight_step(ctx, "bias_correction", lambda q, pk, feeds, n: correct_biases(
        q, pk, feeds, n, reference), "bias correction")


def _weight_step(ctx: ActionContext, step: str, algorithm: Any, title: str) -> Produced:
    """Read the quantized bundle and the calibration data, run `algorithm(qmodel, packages,
    feeds, count) -> (qmodel, layers changed)`, measure, write."""
    from itertools import islice

    from ...ir.bundle import read_bundle
    from ...ir.qmodel import from_bundle, to_bundle
    from ...kernels.load import packages_for
    from ...model.input_list import feeds
    from ...quant.report import LayerFigures, layer_sqnr
    from ...quant.stages import with_stage
    from ..action_io import FileOfParts, Produced

    bundle = read_bundle(ctx.input_reader("bundle"), "quantized bundle")
    qmodel = from_bundle(bundle)
    packages = packages_for(bundle, kernel_files(ctx))
    listing = input_list(ctx)
    inputs = list(bundle.model.graph.inputs)
    count = len(listing.inferences)
    qmodel, changed = algorithm(qmodel, packages, feeds(listing, inputs), count)
    meta = {k: v for k, v in bundle.meta.items() if k != "quantization"}
    meta["algorithms"] = [*bundle.meta.get("algorithms", []), step]
    written = qmodel.write_encodings(ctx.workdir / "encodings.json")
    outputs: dict[str, Any] = {  # neither held whole in memory
        "bundle": FileOfParts.of_bundle(to_bundle(qmodel, bundle.opdefs, meta, written)),
        "encodings": written.path}
    limit = int(ctx.params["report_inputs"])
    if limit > 0 and "layers" in ctx.input_names():
        first = list(islice(feeds(listing, inputs), limit))
        figures = LayerFigures(len(first), tuple(layer_sqnr(
            qmodel, packages, first, ctx.progress("layer SQNR", len(first)))))
        outputs["layers"] = with_stage(ctx.input_bytes("layers"), step, figures,
                                       "equalized" in bundle.meta)
    return Produced(outputs, description=(f"{title} of {bundle.model.graph.name} over {count} "
                                          f"inputs: {changed} layers"))
