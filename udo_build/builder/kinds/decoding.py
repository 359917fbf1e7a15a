"""A decode run's steps (kinds/run.py): the record's chain and the float model's, each feeding
its own outputs forward (udo_build.runtime.decode.Chain), compared at every step.

A decode field the model cannot follow is a UserError at that field of the recipe (the run's
`decode_at` parameter: file, line, column and field path of each field under `decode`); a
later line of the input list that names an input the decode derives, or more lines than
steps, is one at the list's line.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from ...errors import UserError
from ...runtime.decode import DecodeSettings
from ...runtime.records import RunSettings
from ..actions import ActionContext

Runner = Callable[[dict[str, Any]], dict[str, Any]]
Reference = Callable[[dict[str, Any], list[str]], dict[str, Any]]


def decode(ctx: ActionContext, listing: Any, model: Any, run: Runner, reference: Reference,
           results: Path) -> tuple[dict[str, Any], int]:
    """Run the decode's steps: (the metrics, with `decode`: the per-step figures; the steps)."""
    from ...runtime.decode import Chain
    from ...runtime.metrics import Agreement, decode_metrics, sqnr_db
    from ...runtime.results import write_result

    settings = RunSettings.from_params(ctx.params).decode
    assert settings is not None  # kinds/run.py calls this for decode runs only
    places = ctx.params.get("decode_at") or {}
    first, later = _inputs(settings, listing, model, ctx.params)
    _check(settings, model, first, None, places)
    record, float_chain = Chain(settings, first), Chain(settings, first)
    agreement, steps = Agreement(), []
    progress = ctx.progress("decode steps", settings.steps)
    for t in range(settings.steps):
        got = run(record.feed)
        if t == 0:
            _check(settings, model, first, list(got), places)
        want = reference(float_chain.feed, list(got))
        write_result(results / f"Result_{t}", got)
        agreement.add(got, want)
        steps.append({name: sqnr_db(got[name], want[name]) for name in got})
        if t + 1 < settings.steps:
            given = later.get(t + 1)
            record.advance(got, given)
            float_chain.advance(want, given)
        if progress is not None:
            progress(t + 1, 0)
    return {**agreement.metrics(), "decode": decode_metrics(steps)}, settings.steps


def _check(settings: DecodeSettings, model: Any, first: Mapping[str, Any],
           requested: list[str] | None, places: Mapping[str, Any]) -> None:
    """Raise the first problem of `settings` with this model as a UserError at its field."""
    inputs = {n: tuple(a.shape) for n, a in first.items()}  # at the run's input dimensions
    outputs = {t.name: t.static_shape for t in model.graph.outputs}
    problems = settings.problems(inputs, outputs, requested)
    if problems:
        field, message, hint = problems[0]
        raise _error(places, field, message, hint)


def _error(places: Mapping[str, Any], field: str, message: str, hint: str | None) -> UserError:
    place = places.get(field) or places.get("")
    if place is None:
        return UserError(message, field=f"decode.{field}", hint=hint)
    file, line, column, path = place
    if field not in places:  # no place of its own: the section's, with the field named
        path = f"{path}.{field}"
    return UserError(message, file=file, line=line, column=column, field=path, hint=hint)


def _inputs(settings: DecodeSettings, listing: Any, model: Any, params: Mapping[str, Any]
            ) -> tuple[dict[str, Any], dict[int, dict[str, Any]]]:
    """The first step's feed (the list's first line) and, by step, the inputs later lines
    give (named entries, inputs the decode does not derive)."""
    from dataclasses import replace

    from ...model.input_list import feeds, load_tensor

    dims = RunSettings.from_params(params).target.input_dimensions
    inputs = list(model.graph.inputs)
    first = next(feeds(replace(listing, inferences=listing.inferences[:1]), inputs, dims))
    lines = listing.inferences[1:settings.steps]  # lines past the last step: unused
    derived = settings.derived
    later: dict[int, dict[str, Any]] = {}
    for step, entries in enumerate(lines, 1):
        given = {}
        for entry in entries:
            name = entry.name
            if name is None or name not in first:
                raise UserError(f"'{name or entry.path.name}' does not name a model input (a "
                                "later line gives name:=path entries)", file=listing.file,
                                line=entry.line, hint="model inputs: " + ", ".join(first))
            if name in derived:
                raise UserError(f"input '{name}' of step {step} comes from decode."
                                f"{derived[name]}, not the input list", file=listing.file,
                                line=entry.line, hint=f"remove {name} from this line")
            given[name] = load_tensor(entry.path, name, first[name].dtype.name,
                                      tuple(first[name].shape))
        later[step] = given
    return first, later
