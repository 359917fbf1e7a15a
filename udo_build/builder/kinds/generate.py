"""A generate run's steps (kinds/run.py): prefill the prompt, decode N tokens greedily, on the
chosen records and on the float model, each feeding its own KV cache forward
(udo_build.runtime.generate).

Its graphs come from the model: the cache convention (RunSettings.generate.cache) resolved
against the float model gives the dimensions of the prompt graph (`prefill` tokens, default the
model's own) and of the token graph (AR-1); each loads its record of the deployable bundle by
the usual rules (udo_build.runtime.records), or prepares online and says so, with the logits
and the presents as outputs (unless the run states outputs). The float model runs at its own
dimensions, and at the others as a float32 preparation (kinds/run.py `_reference`).

Input `prompt`: the token ids (udo_build.runtime.generate.read_prompt; an error names the file
and line). Outputs as every run's: `results` (Result_<t>/logits: the record's last logits at
step t, generated.txt: the prompt, the float model's tokens and the record's picks, and
report.json: each graph's record, the metrics) and `metrics`, which the check step reads
(`min_top1_agreement` bounds the token match, `min_sqnr_db` the logits' SQNR over all steps and
at every step, `max_drift_db` its drift). Tokens per second are measured here and said in the
step's description only (`Speed.describe`): an artifact holds no time.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from ...errors import UserError
from ...runtime.generate import CacheLayout, GenerateSettings, Generation, Runners
from ...runtime.records import RunSettings
from ..actions import ActionContext

if TYPE_CHECKING:
    from ..action_io import Produced


def generate_run(ctx: ActionContext, settings: RunSettings, bundles: tuple[Any, Any],
                 packages: Any, runtimes: Any, reference: Callable[..., Any]) -> Produced:
    """The whole generate run: kinds/run.py hands it the bundles it read (the one the
    records come from, the float one), and how it runs the float model at given dimensions
    (`reference(float_bundle, settings, packages)`, its `_reference`)."""
    from ...canonical import canonical_json
    from ...runtime.generate import check_length, generate, read_prompt
    from ..action_io import Produced, Tree

    bundle, float_bundle = bundles
    gen = settings.generate
    assert gen is not None  # kinds/run.py calls this for generate runs only
    place = ctx.params.get("generate_at")
    layout = _layout(float_bundle.model, gen, place)
    file = str(ctx.source_path("prompt") or "prompt")
    prompt = read_prompt(ctx.input_bytes("prompt").decode("utf-8", "replace"), file,
                         layout.vocab)
    prefill = gen.prefill or layout.tokens
    try:
        check_length(len(prompt), gen.tokens, layout, prefill, file)
    except UserError as exc:
        raise _at(place, exc) from None
    graphs: list[dict[str, Any]] = []
    outputs = _outputs(settings, layout, place)

    def load(size: int) -> Runners:
        """The runners of the graph of `size` tokens, the last graph's given back first."""
        _give_back_freed_memory()
        at = replace(settings, target=replace(settings.target, input_dimensions=layout.dims(size),
                                              outputs=outputs))
        # the float model first: its weights are read while the record's are not yet loaded
        float_run = _float_run(reference(float_bundle, at, packages), layout.outputs)
        record, graph = _record(at, size, bundle, packages, runtimes)
        graphs.append(graph)
        return Runners(float_run, record.runner(packages).run)

    found = generate(prompt, gen.tokens, layout, prefill, load)
    metrics = found.metrics()
    results = ctx.workdir / "results"
    _write(results, found)
    report = {"run": settings.name, "soc": settings.soc, **_loads(graphs), "graphs": graphs,
              "inferences": len(found.tokens), "metrics": metrics}
    (results / "report.json").write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    return Produced({"results": Tree(results), "metrics": canonical_json(metrics)},
                    description=describe(report, found))


def _layout(model: Any, gen: GenerateSettings, place: Any) -> CacheLayout:
    from ...runtime.generate import LayoutError

    inputs = {t.name: (t.static_shape, t.dtype) for t in model.graph.inputs}
    outputs = {t.name: t.static_shape for t in model.graph.outputs}
    try:
        return CacheLayout.of(gen.cache, inputs, outputs)
    except LayoutError as exc:
        raise _at(place, UserError(exc.message, field=f"generate.{exc.field}",
                                   hint=exc.hint or None)) from None


def _at(place: Any, exc: UserError) -> UserError:
    """`exc` at the run's generate section in the recipe (its field under it), unless it
    names a file of its own (the prompt's)."""
    problem = exc.problems[0]
    if place is None or problem.file is not None:
        return exc
    file, line, column, path = place
    field = path + (problem.field or "")[len("generate"):]
    return UserError(problem.message, file=file, line=line, column=column, field=field,
                     hint=problem.hint)


def _outputs(settings: RunSettings, layout: CacheLayout, place: Any) -> Any:
    """The run's outputs: the logits and the presents, unless it states outputs that hold
    them."""
    stated = settings.target.outputs
    if stated == "default":
        return {"tensors": layout.outputs}
    missing = [n for n in layout.outputs if n not in (stated.get("tensors") or [])]
    if missing:
        raise _at(place, UserError(f"the run's outputs lack {', '.join(missing)}, which "
                                   "generation reads at every step", field="generate",
                                   hint="list them under the run's outputs: tensors, or leave "
                                   "outputs out"))
    return stated


def _record(at: RunSettings, size: int, bundle: Any, packages: Any, runtimes: Any
            ) -> tuple[Any, dict[str, Any]]:
    """The record of one graph, and the report's row of it (which, or why online)."""
    from ...compiler.serve import record_for_run

    record, selection, _ = record_for_run(bundle, at, packages, runtimes=runtimes)
    return record, {"tokens": size, **selection}


def _give_back_freed_memory() -> None:
    """Free what the last graph's runners held (their sessions hold cycles) and give the heap
    it leaves back to the system: the integer session keeps freed memory for reuse
    (runtime/integer/session.py), which would add the prompt graph's working set to the token
    graph's."""
    import gc

    from ...runtime.integer.session import release_freed_memory

    gc.collect()
    release_freed_memory()


def _float_run(reference: Callable[..., Any], names: list[str]) -> Callable[..., Any]:
    def run(feed: dict[str, Any]) -> Any:
        return reference(feed, names)

    return run


def _loads(graphs: list[dict[str, Any]]) -> dict[str, Any]:
    """The report's record fields (as a plain run's, for the fleet): the graphs' together."""
    online = [g for g in graphs if g["online_prepare"]]
    fields: dict[str, Any] = {
        "record": " | ".join(f"AR-{g['tokens']}: {g['record'] or 'online'}" for g in graphs),
        "online_prepare": bool(online),
        "seen": [s for g in graphs for s in g.get("seen") or []]}
    if online:
        fields["warning"] = "; ".join(f"AR-{g['tokens']}: {g.get('warning', 'prepared online')}"
                                      for g in online)
    return fields


def _write(results: Any, found: Generation) -> None:
    from ...runtime.results import write_result

    for t, (got, _) in enumerate(found.logits):
        write_result(results / f"Result_{t}", {"logits": got})
    text = "".join(f"{name}: {' '.join(map(str, ids))}\n" for name, ids in (
        ("prompt", found.prompt), ("float", found.tokens), ("record", found.picks)))
    (results / "generated.txt").write_text(text)


def describe(report: dict[str, Any], found: Generation) -> str:
    """The step's description: what it generated, how well the record agrees, how fast each
    chain ran (the only place the times go)."""
    m, g = report["metrics"], report["metrics"]["generate"]
    sqnr = "exact" if m["sqnr_db"] is None else f"{m['sqnr_db']:.1f} dB"
    worst = m["decode"]["min_sqnr_db"]
    mismatch = ("" if g["first_mismatch"] is None else
                f", first mismatch at step {g['first_mismatch']}")
    loads = (f"ONLINE PREPARE ({report['warning']})" if report["online_prepare"]
             else f"records {report['record']}")
    return (f"generate {report['run']} on {report['soc']}: {loads}; {g['prompt_tokens']}-token "
            f"prompt in {g['prompt_steps']} step(s) of {g['prefill']}, {g['new_tokens']} new "
            f"tokens; token match {g['token_match']:.0%}{mismatch}; logits SQNR {sqnr} vs "
            f"float, worst step {'exact' if worst is None else f'{worst:.1f} dB'}; record "
            f"{found.speed('record').describe()}; float {found.speed('float').describe()}")
