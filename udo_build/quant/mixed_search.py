"""The mixed precision search: per-unit widths for the fewest bytes that meet an output SQNR
target, from each unit's sensitivity (udo_build.quant.mixed_precision for units and measures).

Sensitivity of a unit: the output SQNR with that unit alone at its low width (an activation at
8 bits, a weight at 4 of 4/8 or 8 of 8/16), every other unit at its high width. As noise powers
relative to the signal (r = 10^(-SQNR/10)), quantization noises of different tensors add (they
are small and independent), so a choice of widths is predicted from the highest (every unit at
its high width, measured first) as

    r(choice) = r(highest) + sum over the units at their low width (r(unit) - r(highest))

Each term is measured against the quietest model there is, so it is the unit's own noise, not
the small difference of two large noises (against an all-8-bit reference the removals of the
units at 16 bits overlap: ResNet-50 predicted 52 dB with 21 units raised, and measured 34).

Bytes of a unit at b bits: its elements x b / 8; a weight's are the record's constants, an
activation's the buffer it takes on the device, once per inference (a 16-bit activation holds
twice the bytes: it is what a wider activation costs, as AIMET counts bit operations).

The greedy (AIMET's automatic mixed precision, phase 2, run from the other end): every unit at
its low width; then the upgrades to the high width in order of noise removed per byte added
(ties: graph order) until the prediction meets the budget; then each upgrade taken, least
efficient first, is dropped again if the prediction still meets it without. The budget is the
target's noise; the choice is measured on the held-out inputs, and when it misses (the noises
did not add up as predicted) the budget shrinks by the ratio missed and the greedy runs again,
up to ROUNDS times. The highest missing the target, nothing can meet it: `Unreachable`, with
the best reached; when no smaller choice met it, the highest is the answer.

    result = search(units, sensitivity, reference_db, elements, target_db, measure)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..ir.qmodel import QuantizedModel
from .mixed_precision import ACTIVATION, WEIGHT, Candidates, Unit

ROUNDS = 12
Bits = dict[Unit, int]


class Unreachable(Exception):
    """The target missed by every choice measured: `best_db` the best of them (the reference
    included), `highest_db` every unit at its high width (the best there is when the noises
    add up)."""

    def __init__(self, target_db: float, best_db: float, highest_db: float) -> None:
        super().__init__(f"{target_db} dB is out of reach: the best widths tried reach "
                         f"{best_db:.2f} (every unit at its high width: {highest_db:.2f})")
        self.target_db, self.best_db, self.highest_db = target_db, best_db, highest_db


@dataclass(frozen=True)
class Tried:
    bits: Bits
    predicted_db: float
    sqnr_db: float  # measured on the held-out inputs


@dataclass(frozen=True)
class SearchResult:
    chosen: Tried
    tried: tuple[Tried, ...] = field(default=())  # every choice measured, in order


def relative_noise(sqnr_db: float) -> float:
    return 0.0 if math.isinf(sqnr_db) else 10.0 ** (-sqnr_db / 10.0)


def as_db(noise: float) -> float:
    return math.inf if noise <= 0.0 else -10.0 * math.log10(noise)


@dataclass(frozen=True)
class NoiseModel:
    highest_db: float  # output SQNR with every unit at its high width
    sensitivity: Mapping[Unit, float]  # ... with the unit alone at its low width

    def extra(self, unit: Unit, bits: int) -> float:
        """The noise the unit at `bits` adds to the highest's (a measured gain, which only
        the measure's own noise can make negative, counts as none)."""
        if bits == unit.high:
            return 0.0
        return max(0.0, relative_noise(self.sensitivity[unit])
                   - relative_noise(self.highest_db))

    def predict(self, bits: Bits) -> float:
        return relative_noise(self.highest_db) + sum(self.extra(u, b) for u, b in bits.items())


def greedy(model: NoiseModel, units: Sequence[Unit], sizes: Mapping[Unit, int],
           budget: float) -> Bits | None:
    """The fewest-bytes widths whose predicted noise is within `budget`; None when even every
    upgrade taken does not bring the prediction there."""
    bits = {u: u.low for u in units}
    noise = model.predict(bits)
    upgrades = []
    for order, u in enumerate(units):
        gain = model.extra(u, u.low) - model.extra(u, u.high)
        cost = sizes[u] * (u.high - u.low) / 8
        if gain > 0:
            upgrades.append((-gain / max(cost, 1e-9), order, u, gain))
    upgrades.sort(key=lambda t: (t[0], t[1]))
    taken = []
    for _, _, u, gain in upgrades:
        if noise <= budget:
            break
        bits[u], noise = u.high, noise - gain
        taken.append((u, gain))
    if noise > budget:
        return None
    for u, gain in reversed(taken):  # least efficient first: still within without it?
        if noise + gain <= budget:
            bits[u], noise = u.low, noise + gain
    return bits


def search(units: Sequence[Unit], sensitivity: Mapping[Unit, float], reference_db: float,
           sizes: Mapping[Unit, int], target_db: float,
           measure: Callable[[Bits], float]) -> SearchResult:
    """See the module docstring; `measure(bits)` is the output SQNR of a choice, reference_db
    the quantize settings' (the best there is when even the highest is below it)."""
    highest_bits = {u: u.high for u in units}
    highest_db = measure(highest_bits)
    highest = Tried(highest_bits, highest_db, highest_db)
    if highest_db < target_db:
        raise Unreachable(target_db, max(reference_db, highest_db), highest_db)
    model = NoiseModel(highest_db, sensitivity)
    target = relative_noise(target_db)
    budget, tried = target, [highest]
    for _ in range(ROUNDS):
        bits = greedy(model, units, sizes, budget)
        if bits is None or any(t.bits == bits for t in tried):
            break
        got = measure(bits)
        tried.append(Tried(bits, as_db(model.predict(bits)), got))
        if got >= target_db:
            return SearchResult(tried[-1], tuple(tried))
        budget *= target / max(relative_noise(got), 1e-300)
    return SearchResult(highest, tuple(tried))


def byte_count(bits: Bits, sizes: Mapping[Unit, int], kind: str) -> int:
    """The bytes of the units of `kind` at their widths (4-bit ones packed two per byte)."""
    return sum((sizes[u] * b + 7) // 8 for u, b in bits.items() if u.kind == kind)


def record_bytes(qmodel: QuantizedModel) -> int:
    """The bytes of the model's constants as a record holds them (udo_build.compiler.record):
    those with encodings at their width (4-bit ones two per byte), the others as they are."""
    total = 0
    for name, value in qmodel.model.weights.items():
        encs = qmodel.params.get(name)
        total += (value.size * encs[0].bitwidth + 7) // 8 if encs else value.nbytes
    return total


def document(candidates: Candidates, sizes: Mapping[Unit, int], sensitivity: Mapping[Unit, float],
             reference_db: float, result: SearchResult, target_db: float,
             inputs: int) -> dict[str, Any]:
    """What the search found, as quant/mixed.json holds it (the report page's section)."""
    chosen = result.chosen.bits
    reference = {u: u.reference for u in candidates.units}
    composed = candidates.compose(candidates.widths(chosen))
    acts = [u for u in candidates.units if u.kind == ACTIVATION]
    weights = [u for u in candidates.units if u.kind == WEIGHT]
    return {
        "target_db": target_db, "inputs": inputs,
        "highest": {"sqnr_db": _figure(result.tried[0].sqnr_db)},
        "reference": {"sqnr_db": _figure(reference_db),
                      "record_bytes": record_bytes(candidates.reference),
                      "activation_bytes": byte_count(reference, sizes, ACTIVATION)},
        "chosen": {"sqnr_db": _figure(result.chosen.sqnr_db),
                   "predicted_db": _figure(result.chosen.predicted_db),
                   "record_bytes": record_bytes(composed),
                   "activation_bytes": byte_count(chosen, sizes, ACTIVATION)},
        "activations": _census(acts, chosen), "weights": _census(weights, chosen),
        "tried": [{"predicted_db": _figure(t.predicted_db), "sqnr_db": _figure(t.sqnr_db),
                   "changed": sum(b != u.reference for u, b in t.bits.items())}
                  for t in result.tried],
        "units": [{"kind": u.kind, "name": u.name, "node": u.node, "op": u.op, "index": u.index,
                   "elements": sizes[u], "bits": chosen[u], "reference_bits": u.reference,
                   "alternate_bits": u.alternate, "low_alone_sqnr_db": _figure(sensitivity[u])}
                  for u in candidates.units]}


def _census(units: Sequence[Unit], bits: Bits) -> dict[str, Any]:
    """How many of `units` there are, and how many at each width (keys: the bits, as text)."""
    found: dict[str, int] = {}
    for u in units:
        found[str(bits[u])] = found.get(str(bits[u]), 0) + 1
    return {"units": len(units), "bits": dict(sorted(found.items(), key=lambda kv: int(kv[0])))}


def _figure(value: float) -> float | None:
    return None if math.isinf(value) else round(value, 3)
