"""Which offline cache record a device may load: the vendor's compatibility rules as one table
and one function.

A record is prepared for a hexagon arch and a VTCM size; a device has its own. The rules:

- a record for a newer arch never runs on an older one;
- on the same arch, a record runs where its prepared VTCM <= the device's VTCM;
- a v68 or v69 record does not run on v73 or later (the arch generations break there);
- the run's precision, outputs and input dimensions must equal the record's (the vendor runtime
  loads a record only if its graph config matches);
- the run's optimization level: in `strict` mode it must equal the record's; in `permissive`
  mode a record of another level is taken only when none at the run's level fits, and the
  choice says so (`level_note`).

Modes, as in the vendor runtime: `permissive` (the default) accepts any record the rules allow;
`strict` also requires the record to use the device fully (the same arch and equal VTCM) and to
be at the run's level; `always_generate_new` uses no record (the runtime prepares online). Among
acceptable records the closest one wins: the run's level first, then the same arch, then the
newest older arch, then the largest VTCM. Every other record is listed with why it was not
taken: a rule it breaks, or the closer record that won.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any, NamedTuple

from .target import CompileTarget

MODES = ("permissive", "strict", "always_generate_new")

# Arch generations: a record runs only on devices of its own generation (and never older).
GENERATIONS: tuple[tuple[str, ...], ...] = (("v65", "v66"), ("v68", "v69"),
                                             ("v73", "v75", "v79", "v81"))


@dataclass(frozen=True)
class Prepared:
    """What a record was prepared for (and what a run asks of it)."""

    arch: str
    vtcm_mb: float
    dims: Any = None  # input dimensions ({} or None: the model's own)
    outputs: Any = "default"
    name: str = ""
    precision: str = ""  # int8 | fp16 ("" for a run that takes either)
    level: int | None = None  # the optimization level (None: any)

    @property
    def arch_number(self) -> int:
        return int(self.arch[1:])

    @staticmethod
    def of(target: CompileTarget, native: Mapping[str, Any] | None = None,
           name: str = "") -> Prepared:
        """What `target` prepares (or asks of a record), its default input dimensions
        spelled out as `native` (the model's own) so that both spellings compare equal."""
        return Prepared(target.arch, target.vtcm_mb, dict(target.input_dimensions) or native,
                        target.outputs, name, target.precision, target.optimization_level)


class Device(NamedTuple):
    name: str
    arch: str
    vtcm_mb: float

    @property
    def arch_number(self) -> int:
        return int(self.arch[1:])


def _generation(arch: str) -> int:
    return next((i for i, g in enumerate(GENERATIONS) if arch in g), -1)


def _newer_arch(r: Prepared, d: Device, mode: str) -> str | None:
    if r.arch_number > d.arch_number:
        return f"prepared for {r.arch}, newer than the device's {d.arch}"
    return None


def _generation_break(r: Prepared, d: Device, mode: str) -> str | None:
    if _generation(r.arch) != _generation(d.arch) and r.arch_number < d.arch_number:
        return f"a {r.arch} record does not run on {d.arch} (another arch generation)"
    return None


def _vtcm(r: Prepared, d: Device, mode: str) -> str | None:
    if r.arch == d.arch and r.vtcm_mb > d.vtcm_mb:
        return f"prepared for {r.vtcm_mb:g} MB of VTCM, the device has {d.vtcm_mb:g} MB"
    return None


def _strict(r: Prepared, d: Device, mode: str) -> str | None:
    if mode == "strict" and (r.arch != d.arch or r.vtcm_mb != d.vtcm_mb):
        return (f"strict mode wants a record that uses the device fully ({d.arch}, "
                f"{d.vtcm_mb:g} MB), this one is {r.arch}, {r.vtcm_mb:g} MB")
    return None


# (rule name, test(record, device, mode) -> why it fails, or None), checked in order
RULES: tuple[tuple[str, Any], ...] = (
    ("newer arch", _newer_arch), ("arch generation", _generation_break), ("VTCM", _vtcm),
    ("strict", _strict),
)


def rejection(record: Prepared, device: Device, mode: str = "permissive",
              want: Prepared | None = None) -> str | None:
    """Why `record` cannot serve this run on `device`, or None when it can."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; modes: {', '.join(MODES)}")
    if mode == "always_generate_new":
        return "mode always_generate_new uses no record"
    reason = _graph_config(record, want, mode) if want is not None else None
    if reason is not None:
        return reason
    for _, rule in RULES:
        reason = rule(record, device, mode)
        if reason is not None:
            return reason
    return None


def _graph_config(record: Prepared, want: Prepared, mode: str) -> str | None:
    """Why the record's graph config (precision, outputs, dims, level) does not fit the run."""
    if want.precision and record.precision and want.precision != record.precision:
        return f"prepared for {record.precision}, the run is {want.precision}"
    if _norm(record.outputs) != _norm(want.outputs):
        return f"prepared for outputs {_show(record.outputs)}, the run wants " \
               f"{_show(want.outputs)}"
    if _norm(record.dims) != _norm(want.dims):
        return f"prepared for input dimensions {_show(record.dims)}, the run has " \
               f"{_show(want.dims)}"
    if mode == "strict" and _other_level(record, want):
        return (f"prepared at O{record.level}, the run asks O{want.level} (strict mode takes "
                "only the run's level)")
    return None


def _other_level(record: Prepared, want: Prepared | None) -> bool:
    return (want is not None and want.level is not None and record.level is not None
            and record.level != want.level)


def choose(records: Sequence[Prepared], device: Device, mode: str = "permissive",
           want: Prepared | None = None) -> tuple[Prepared | None, list[tuple[Prepared, str]]]:
    """(the record to load or None, every other record with why it was not taken), the others
    in the order given."""
    reasons: dict[int, str] = {}
    fitting: list[int] = []
    for i, record in enumerate(records):
        reason = rejection(record, device, mode, want)
        if reason is None:
            fitting.append(i)
        else:
            reasons[i] = reason
    if not fitting:
        return None, [(records[i], reasons[i]) for i in sorted(reasons)]

    def rank(r: Prepared) -> tuple[bool, bool, int, float]:
        return (not _other_level(r, want), r.arch == device.arch, r.arch_number,
                float(r.vtcm_mb))

    best_index = max(fitting, key=lambda i: rank(records[i]))
    best = records[best_index]
    for i in fitting:
        if i != best_index:
            reasons[i] = _lost(records[i], best, device, want)
    return best, [(records[i], reasons[i]) for i in sorted(reasons)]


def _lost(record: Prepared, best: Prepared, device: Device, want: Prepared | None) -> str:
    """Why a record that fits was not taken: the closer one that won, and what made it closer."""
    if _other_level(record, want) and not _other_level(best, want):
        assert want is not None
        why = f"this one is O{record.level}, it is at the run's O{want.level}"
    elif record.arch != best.arch:
        why = (f"it is for the device's arch {device.arch}" if best.arch == device.arch
               else f"it is for the newer arch {best.arch}")
    elif record.vtcm_mb != best.vtcm_mb:
        why = f"it uses more VTCM ({best.vtcm_mb:g} MB against {record.vtcm_mb:g} MB)"
    else:
        why = "it is as close and comes first"
    return f"fits, but {best.name or 'another record'} is closer: {why}"


def level_note(record: Prepared, want: Prepared | None) -> str | None:
    """What to tell a run that loads `record` at a level other than its own (permissive)."""
    if not _other_level(record, want):
        return None
    assert want is not None
    return (f"no record at the run's O{want.level} fits: loaded one prepared at O{record.level} "
            "(permissive mode; strict mode would prepare online)")


def cover(devices: Iterable[Device], mode: str = "permissive",
          exact_limit: int = 16) -> list[Prepared]:
    """The smallest set of (arch, VTCM) records that serves every device (exact for up to
    `exact_limit` candidate configurations, greedy beyond)."""
    fleet = list(devices)
    candidates = sorted({Prepared(d.arch, d.vtcm_mb) for d in fleet},
                        key=lambda r: (r.arch_number, r.vtcm_mb))
    serves = {c: frozenset(i for i, d in enumerate(fleet) if rejection(c, d, mode) is None)
              for c in candidates}
    everyone = frozenset(range(len(fleet)))
    if len(candidates) <= exact_limit:
        for size in range(1, len(candidates) + 1):
            for combo in combinations(candidates, size):
                if frozenset().union(*(serves[c] for c in combo)) == everyone:
                    return list(combo)
    chosen: list[Prepared] = []
    left = set(everyone)
    while left:
        best = max(candidates, key=lambda c: (len(serves[c] & left), c.arch_number, c.vtcm_mb))
        chosen.append(best)
        left -= serves[best]
    return sorted(chosen, key=lambda r: (r.arch_number, r.vtcm_mb))


def _norm(value: Any) -> Any:
    if value in (None, {}, "default"):
        return None
    if isinstance(value, dict):
        return tuple(sorted((k, _norm(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_norm(v) for v in value)
    return value


def _show(value: Any) -> str:
    if _norm(value) is None:
        return "default"
    if isinstance(value, (list, tuple)) and all(isinstance(v, str) for v in value):
        return ",".join(value)  # resolved tensor names
    import json

    return json.dumps(value, sort_keys=True, separators=(",", ":"))
