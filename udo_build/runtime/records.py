"""Which record of a deployable bundle a run loads.

A deployable bundle lists its records in its meta `records` (rows written by the assemble step:
arch, VTCM, level, precision, input dimensions, output tensors and the part holding each
record), so the choice decompresses none. The run's device, input dimensions, outputs (resolved
to tensor names against the bundle's model, as the prepare step resolves a target's), level,
precision and mode decide, by the compatibility rules of udo_build.soc.compat:

    settings = RunSettings.from_params(ctx.params)
    outputs = resolve_outputs(bundle.model, settings.target.outputs)   # udo_build.compiler
    choice = choose_record(bundle.meta, settings, native_dims(bundle.model), outputs)
    choice.part            # the bundle part holding the record to load, or None: none fits
    choice.graph           # of a multi-graph record (one row per graph), the graph to load
    choice.seen            # every other record with why it was not taken
    choice.note            # permissive mode took a record of another level: says so

When none fits the runtime prepares online, as the vendor runtime does. Preparing needs the
compiler, which sits above the runtime: the caller prepares `settings.target` and reports
`choice.online()`, which says which records were seen. The report holds no time (a run's report
is an artifact, the same bytes on every build): what the preparation cost is the caller's to say
where times belong (the step's description).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple

from ..soc.target import FLOAT_REFERENCE, CompileTarget
from .metrics import RunCheck

if TYPE_CHECKING:  # the compatibility rules load when a record is chosen, not when a recipe
    from ..soc.compat import Device, Prepared  # is planned (a no-op build); the decode and
    from .decode import DecodeSettings  # generate settings when a run has them
    from .generate import GenerateSettings


@dataclass(frozen=True)
class RunSettings:
    """A run entry: its name, the device (by SoC name, arch and VTCM), what it asks of a record
    (`target`: level, input dimensions, outputs, precision; an online preparation prepares
    it), the runtime's mode, the checks, and for a decode run how its steps chain
    (udo_build.runtime.decode)."""

    name: str | None
    soc: str | None  # the device's name, for messages: its arch and VTCM are in `target`
    target: CompileTarget
    mode: str = "permissive"
    check: RunCheck = RunCheck()
    decode: DecodeSettings | None = None
    generate: GenerateSettings | None = None  # udo_build.runtime.generate

    # the run's name and SoC name are for messages: its arch and VTCM are the ones that count
    KEY_PARAMS: ClassVar[tuple[str, ...]] = (*CompileTarget.KEY_PARAMS, "mode", "check",
                                             "decode", "generate")

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> RunSettings:
        decode, generate = params.get("decode"), params.get("generate")
        if decode is not None:
            from .decode import DecodeSettings
        if generate is not None:
            from .generate import GenerateSettings
        return cls(params.get("name"), params.get("soc"), CompileTarget.from_params(params),
                   params.get("mode", "permissive"), RunCheck.from_params(params.get("check")),
                   None if decode is None else DecodeSettings.from_params(decode),
                   None if generate is None else GenerateSettings.from_params(generate))

    def to_params(self) -> dict[str, Any]:
        return {"name": self.name, "soc": self.soc, **self.target.to_params(),
                "mode": self.mode, "check": self.check.to_params(),
                "decode": None if self.decode is None else self.decode.to_params(),
                "generate": None if self.generate is None else self.generate.to_params()}

    @property
    def device(self) -> Device:
        from ..soc.compat import Device

        return Device(str(self.soc), self.target.arch, self.target.vtcm_mb)

    @property
    def reference_target(self) -> CompileTarget:
        """A float32 preparation at the run's input dimensions and outputs (the reference when
        they are not the model's own: prepared float32 graphs equal the unprepared within 1e-5;
        an fp16 one would add float16 rounding)."""
        return replace(self.target, optimization_level=1, precision=FLOAT_REFERENCE)


class RecordChoice(NamedTuple):
    """A run's record, or why none serves it (a value its callers read by field: a named tuple,
    cheap to define for the many processes that import this module and choose none)."""

    part: str | None  # the bundle part of the record to load; None: none fits
    seen: tuple[tuple[str, str], ...]  # (record, why it was not taken), in the bundle's order
    available: int  # how many records (graphs of a multi-graph record each) the bundle holds
    note: str | None = None  # permissive mode loads a record of another level: why
    graph: str | None = None  # of a multi-graph record, the graph to load

    def _seen(self) -> list[dict[str, str]]:
        return [{"record": part, "rejected": why} for part, why in self.seen]

    def loaded(self, name: str | None) -> dict[str, Any]:
        """The run report's fields for the chosen record, named as its key names it."""
        fields = {"record": name, "online_prepare": False, "seen": self._seen(),
                  **({"graph": self.graph} if self.graph is not None else {})}
        return {**fields, "note": self.note} if self.note else fields

    def online(self) -> dict[str, Any]:
        """The run report's fields when the runtime prepared online instead."""
        return {"record": None, "online_prepare": True, "seen": self._seen(),
                "warning": f"no record of the bundle fits (saw {self.available}): prepared "
                           "online, at every start-up"}


def choose_record(meta: Mapping[str, Any], settings: RunSettings,
                  native: Mapping[str, Any], outputs: Sequence[str],
                  subnet: str | None = None) -> RecordChoice:
    """The record of the bundle (by its meta) that serves the run, or why none does. `native`:
    the model's own input dimensions, which a run without input_dimensions has; `outputs`: the
    tensors the run's outputs resolve to (compared as a set with each record's). `subnet`: the
    identifier of the HTP subnet the record is for (udo_build.compiler.partition), whose
    records alone are candidates; None: the whole graph's (rows without a subnet)."""
    from ..soc.compat import Prepared, choose, level_note

    rows = [row for row in meta.get("records") or []
            if (row.get("identifier") == subnet if subnet is not None else "subnet" not in row)]
    records = [_prepared(row) for row in rows]
    by_name = {record.name: row for record, row in zip(records, rows, strict=True)}
    want = replace(Prepared.of(settings.target, dict(native)), outputs=tuple(sorted(outputs)))
    best, rejected = choose(records, settings.device, settings.mode, want)
    row = by_name[best.name] if best is not None else {}
    return RecordChoice(row.get("part"), tuple((r.name, why) for r, why in rejected), len(rows),
                        level_note(best, want) if best is not None else None, row.get("graph"))


def _prepared(row: Mapping[str, Any]) -> Prepared:
    """What a record row of the bundle's meta says its record was prepared for; a graph of a
    multi-graph record (a row with `graph`, one per graph, sharing the part) is named
    `<part>#<graph>`."""
    from ..soc.compat import Prepared

    name = row["part"] + (f"#{row['graph']}" if "graph" in row else "")
    return Prepared(row["arch"], row["vtcm_mb"], row.get("input_dimensions") or {},
                    row_outputs(row), name, row.get("precision", ""), row.get("level"))


def row_outputs(row: Mapping[str, Any]) -> tuple[str, ...]:
    """The output tensors of a record row, sorted: its `output_tensors`, else its Cache Info
    `outputs` (the names joined by commas)."""
    names = row.get("output_tensors")
    if names is None:
        names = [n for n in str(row.get("outputs") or "").split(",") if n]
    return tuple(sorted(names))


def native_dims(model: Any) -> dict[str, list[int]]:
    """The model's own input dimensions (of the inputs that have static ones)."""
    return {t.name: list(t.static_shape) for t in model.graph.inputs
            if t.static_shape is not None}
