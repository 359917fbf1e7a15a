"""The record a run executes: the bundle's own when one fits, else one prepared here.

    record, selection, seconds = record_for_run(bundle, settings, packages)

The runtime chooses among the bundle's records by their rows (udo_build.runtime.records) with the
run's outputs resolved to tensor names; when none fits, the vendor runtime prepares online, and
so does this (the compiler sits above the runtime, so the choice and the preparation meet here).
`selection` is the run report's fields (the record, or that it was prepared online, and every
record seen with why it was not taken); `seconds` is what the online preparation cost (None when
a record was loaded), for messages only: a report holds no time. Used by the recipe's run step
and by `udo-build run`.

A graph the runtimes split (udo_build.compiler.partition: a custom op or a standard op the HTP
cannot run, or the recipe's runtime choices, which a deployable bundle keeps in its meta
`runtimes`) runs by subnets: `record` is then a SubnetProgram (udo_build.compiler.subnet_run)
whose runner runs the HTP subnets on their records (chosen per subnet, or prepared online) and
the CPU subnets on the CPU runtime, and `selection` adds the partition and the switches. A
graph that is one HTP subnet is served as it always was. A bundle whose records are parts (its
meta `parts`: udo_build.compiler.parts) is cut as its prepare cut it, for the run's precision and
outputs, and runs its parts in order as subnets.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..ir.weights import streams
from ..runtime.records import RunSettings, choose_record, native_dims
from .driver import compile_bundle
from .lower import resolve_outputs
from .partition import RuntimeChoices, node_runtimes, partition
from .parts import cuts_for
from .record import Record, read_record

if TYPE_CHECKING:
    from .subnet_run import SubnetProgram


def record_for_run(bundle: Any, settings: RunSettings, packages: Any, *, choose: bool = True,
                   runtimes: Mapping[str, Any] | None = None
                   ) -> tuple[Record | SubnetProgram, dict[str, Any], float | None]:
    """`choose=False`: prepare without looking at the bundle's records (a float reference).
    `runtimes`: the recipe's runtime choices (default: the bundle's meta `runtimes`)."""
    outputs = resolve_outputs(bundle.model, settings.target.outputs)
    choices = RuntimeChoices.from_json(runtimes if runtimes is not None
                                       else bundle.meta.get("runtimes"))
    cuts = cuts_for(bundle.meta, settings.target.precision, outputs) if choose else ()
    part = partition(bundle.model, node_runtimes(bundle.model, bundle.opdefs, choices), outputs,
                     cuts)
    if part.split:
        from .subnet_run import run_subnets

        program, selection = run_subnets(bundle, settings, packages, part, outputs, choose)
        return program, selection, program.seconds
    choice = None
    if choose:
        choice = choose_record(bundle.meta, settings, native_dims(bundle.model), outputs)
        if choice.part is not None:
            parts = bundle.parts  # a record kept raw in the store: mapped, not read
            data = parts.mapped(choice.part) if hasattr(parts, "mapped") else parts[choice.part]
            record = read_record(data, choice.part, choice.graph)
            return record, choice.loaded(record.key.get("name")), None
    started = time.perf_counter()
    compiled = compile_bundle(bundle, settings.target, packages)
    # a large model's (udo_build.ir.weights): the record in a file, its constants in files
    record = read_record(compiled.record(mapped=streams(compiled.graph.consts)), "online")
    del compiled
    selection = choice.online() if choice is not None else {"record": None,
                                                             "online_prepare": True}
    return record, selection, time.perf_counter() - started
