"""`run`: a recipe's run entry on the emulator, checked against the float model.

Parameters: udo_build.runtime.records.RunSettings. The runtime picks a record of the deployable
bundle for the target SoC, the run's input dimensions and outputs, by the compatibility rules
(udo_build.runtime.records, udo_build.soc.compat) in the run's mode; when none fits this step
prepares online, as the vendor runtime does, and says so: which records it saw and why each was
rejected, and what the online prepare cost. Every inference of the run's input list executes on
the chosen record (int8 on the integer path, fp16 in float), and is compared with the float
model (udo_build.runtime.metrics), spread over the action's cores (udo_build.runtime.pool).
Outputs: `results`, Result_<i>/<tensor>.raw (float32) and .npy
per inference, and report.json (the record, what was seen, the metrics; no verdict, no time);
`metrics`, the metrics alone (JSON), which the `check` step reads (kinds/check.py): the run's
checks are not in its key, so changing a threshold runs only the check, and a run that gives
the same numbers from other records leaves its check cached.

A graph split into subnets (udo_build.compiler.partition: input `runtimes` when the recipe
states runtime choices, else the deployable bundle's) runs its subnets in order, each HTP subnet
on its record (chosen per subnet) and each CPU subnet on the CPU runtime; report.json then also
has `partition` (each subnet's runtime, nodes, inputs, outputs and record) and `switches`.

A decode run (RunSettings.decode: udo_build.runtime.decode.DecodeSettings; `decode_at`, where
the recipe writes each of its fields, for messages only) chains its steps instead: the input
list's first line is the first step's inputs, each later line (name:=path entries) gives a later
step the inputs the decode does not derive; the record's chain and the float model's each feed
their own outputs forward (the cache, the position, the mask, next_input), Result_<t> is step
t, and the metrics add the SQNR of every output at every step (`decode`,
udo_build.runtime.metrics.decode_metrics). A decode field the model cannot follow (an output it
lacks, an input of another shape) is a UserError at that field of the recipe.

A generate run (RunSettings.generate: udo_build.runtime.generate.GenerateSettings; input
`prompt`, the token ids, instead of an input list) prefills the prompt and decodes tokens
greedily on two graphs of the model, each on its record: kinds/generate.py.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ...runtime.records import RunSettings
from ..actions import ActionContext, action_kind
from .inputs import input_list, kernel_files

if TYPE_CHECKING:
    from ..action_io import Produced

Reference = Callable[[dict[str, Any], list[str]], dict[str, Any]]
Runner = Callable[[dict[str, Any]], dict[str, Any]]


# what a run computes depends on: its checks are the `check` step's
RUN_KEY_PARAMS = tuple(p for p in RunSettings.KEY_PARAMS if p != "check")


# version 2: report.json holds no time (the online prepare's cost is in the description), and
# max_abs_error has 4 significant digits (udo_build.runtime.metrics)
# version 3: records are chosen by their resolved output tensors, level and precision (strict:
# the run's level only), and `seen` lists every record not taken with why; no checks (report.json
# has no verdict; the output `metrics`)
# version 4: decode runs (the parameter `decode`)
# version 5: generate runs (the parameter `generate`, kinds/generate.py)
@action_kind("run", version=5, params=RUN_KEY_PARAMS)
def run(ctx: ActionContext) -> Produced:
    from ...canonical import canonical_json
    from ...compiler.serve import record_for_run
    from ...ir.bundle import read_bundle
    from ...kernels.load import packages_for
    from ..action_io import Produced, Tree

    settings = RunSettings.from_params(ctx.params)
    name = "deployable" if "deployable" in ctx.input_names() else (
        "bundle" if "bundle" in ctx.input_names() else "float_bundle")
    bundle = read_bundle(ctx.input_reader(name), name)  # reads the chosen record only
    float_bundle = read_bundle(ctx.input_reader("float_bundle"), "float bundle")
    packages = packages_for(bundle, kernel_files(ctx))
    runtimes = (json.loads(ctx.input_bytes("runtimes")) if "runtimes" in ctx.input_names()
                else None)
    if settings.generate is not None:  # its graphs and records come from the model
        from .generate import generate_run

        return generate_run(ctx, settings, (bundle, float_bundle), packages, runtimes, _reference)
    record, selection, online_seconds = record_for_run(bundle, settings, packages,
                                                       runtimes=runtimes)
    listing = input_list(ctx)
    # the float model first: its weights are read while the record's are not yet loaded
    reference = _reference(float_bundle, settings, packages)
    runner = record.runner(packages)
    results = ctx.workdir / "results"
    if settings.decode is not None:
        from .decoding import decode

        metrics, count = decode(ctx, listing, float_bundle.model, runner.run, reference, results)
    else:
        metrics, count = _infer(ctx, listing, float_bundle.model, runner.run, reference, results)
    report = {"run": settings.name, "soc": settings.soc, **selection,
              "inferences": count, "metrics": metrics}
    (results / "report.json").write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    return Produced({"results": Tree(results), "metrics": canonical_json(metrics)},
                    description=_describe(report, online_seconds))


def _infer(ctx: ActionContext, listing: Any, model: Any, run: Runner, reference: Reference,
           results: Any) -> tuple[dict[str, Any], int]:
    """Every inference of the input list on the record and the float model: (the metrics,
    the inferences). They spread over the action's cores (`ctx.cores`,
    udo_build.runtime.pool): each worker writes its inferences' results and sends back their
    figures, merged in input order (the same bits whatever the worker count)."""
    from ...model.input_list import feeds
    from ...runtime.metrics import Agreement, figures
    from ...runtime.pool import Each, labels, ordered
    from ...runtime.results import write_result

    settings = RunSettings.from_params(ctx.params)
    agreement = Agreement()
    count = len(listing.inferences)
    progress = ctx.progress("inferences", count)

    def infer(i: int, feed: dict[str, Any]) -> Any:
        got = run(feed)
        write_result(results / f"Result_{i}", got)
        return figures(got, reference(feed, list(got)))

    lines = [inference[0].line if inference else 0 for inference in listing.inferences]
    inputs = feeds(listing, list(model.graph.inputs), settings.target.input_dimensions)
    for i, rows in ordered(Each(infer), inputs, ctx.cores, count,
                           labels("inference", listing.file, lines)):
        agreement.merge(rows)
        if progress is not None:
            progress(i + 1, 0)
    return agreement.metrics(), count


def _reference(float_bundle: Any, settings: RunSettings, packages: Any) -> Reference:
    """The float model at the run's input dimensions: the bundle itself at its own, else a
    float preparation at the run's (settings.reference_target)."""
    from ...runtime.records import native_dims

    dims = settings.target.input_dimensions
    if not dims or dims == native_dims(float_bundle.model):
        from ...runtime.float_session import Session

        return Session(float_bundle.model, packages).run
    from dataclasses import replace

    from ...compiler.serve import record_for_run

    reference = replace(settings, target=settings.reference_target)
    record, _, _ = record_for_run(float_bundle, reference, packages, choose=False)
    runner = record.runner(packages)
    return lambda feed, names: runner.run(feed)


def _describe(report: dict[str, Any], seconds: float | None = None) -> str:
    m = report["metrics"]
    cost = f", {seconds * 1000:.0f} ms here" if seconds is not None else ""
    where = (f"record {report['record'] or 'none (CPU only)'}" if not report["online_prepare"]
             else f"ONLINE PREPARE ({report['warning']}{cost})")
    if "partition" in report:
        subnets = " | ".join(f"{p['runtime']} {p['nodes']}" for p in report["partition"])
        where = f"{len(report['partition'])} subnets ({subnets} nodes), " \
                f"{report['switches']} runtime switches; {where}"
    sqnr = "exact" if m["sqnr_db"] is None else f"{m['sqnr_db']:.1f} dB"
    decode = m.get("decode")
    if decode is not None:
        worst = "exact" if decode["min_sqnr_db"] is None else f"{decode['min_sqnr_db']:.1f} dB"
        drift = "-" if decode["drift_db"] is None else f"{decode['drift_db']:.2f} dB"
        return (f"run {report['run']} on {report['soc']}: {where}; {report['inferences']} "
                f"decode step(s), SQNR {sqnr} vs float, worst step {worst}, drift {drift}")
    return (f"run {report['run']} on {report['soc']}: {where}; {report['inferences']} "
            f"inference(s), SQNR {sqnr} vs float")
