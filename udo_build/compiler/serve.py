"""The record a run executes: the bundle's own when one fits, else one prepared here.

    record, selection, seconds = record_for_run(bundle, settings, packages)

The runtime chooses among the bundle's records by their rows (udo_build.runtime.records) with the
run's outputs resolved to tensor names; when none fits, the vendor runtime prepares online, and
so does this (the compiler sits above the runtime, so the choice and the preparation meet here).
`selection` is the run report's fields (the record, or that it was prepared online, and every
record seen with why it was not taken); `seconds` is what the online preparation cost (None when
a record was loaded), for messages only: a report holds no time. Used by the recipe's run step
and by `udo-build run`.
"""

from __future__ import annotations

import time
from typing import Any

from ..runtime.records import RunSettings, choose_record, native_dims
from .driver import compile_bundle
from .lower import resolve_outputs
from .record import Record, read_record


def record_for_run(bundle: Any, settings: RunSettings, packages: Any, *, choose: bool = True
                   ) -> tuple[Record, dict[str, Any], float | None]:
    """`choose=False`: prepare without looking at the bundle's records (a float reference)."""
    choice = None
    if choose:
        outputs = resolve_outputs(bundle.model, settings.target.outputs)
        choice = choose_record(bundle.meta, settings, native_dims(bundle.model), outputs)
        if choice.part is not None:
            record = read_record(bundle.parts[choice.part], choice.part)
            return record, choice.loaded(record.key.get("name")), None
    started = time.perf_counter()
    record = read_record(compile_bundle(bundle, settings.target, packages).record(), "online")
    selection = choice.online() if choice is not None else {"record": None,
                                                             "online_prepare": True}
    return record, selection, time.perf_counter() - started
