"""Which run entries the prepared matrix can never serve, from the recipe alone.

A run loads a record of the deployable bundle by the compatibility rules (udo_build.soc.compat);
when none fits it prepares online, at every start-up. Without the model, what the recipe says
decides as far as it can: the SoC (arch, VTCM), level, precision and mode count exactly; outputs
written alike are equal, and outputs written differently may still name one tensor set (then
they are taken as equal here); input dimensions count when both are written, and one side
left to the model's own may equal any written ones. A run is unserved when every target is
rejected even so.
"""

from __future__ import annotations

from dataclasses import replace

from ..soc.compat import Device, Prepared, rejection
from .model import Recipe, RecordTarget, RunSpec


def unserved(recipe: Recipe) -> list[tuple[int, list[str]]]:
    """(index of the run, why each target is rejected, distinct) for every run that no target
    of the matrix can serve; none when the recipe prepares nothing (every run is online)."""
    if not recipe.targets:
        return []
    found = []
    for i, run in enumerate(recipe.runs):
        if run.mode == "always_generate_new" or run.soc.vtcm_mb is None or run.generate:
            continue  # a generate run's graphs come from the model (it reports each record)
        reasons: list[str] = []
        for target in recipe.targets:  # stops at the first target that serves the run
            why = _rejection(run, target)
            if why is None:
                break
            reasons.append(why)
        else:
            found.append((i, list(dict.fromkeys(reasons))))
    return found


def _rejection(run: RunSpec, target: RecordTarget) -> str | None:
    record = Prepared.of(target.compile_target(), None, target.id)
    want = Prepared.of(run.compile_target(), None)
    if run.outputs != target.outputs:  # may resolve to the same tensors: not known here
        want = replace(want, outputs=record.outputs)
    if not run.input_dimensions.items or not target.input_dimensions.items:
        want = replace(want, dims=record.dims)  # the model's own may equal the written ones
    vtcm: float = run.soc.vtcm_mb  # type: ignore[assignment]  # known: checked above
    return rejection(record, Device(run.soc.name, run.soc.arch, vtcm), run.mode, want)
