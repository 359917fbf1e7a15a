"""How far a run's outputs are from the float model's, and the checks a run entry states.

    agreement = Agreement()
    for got, want in pairs:              # {tensor: array} of one inference each
        agreement.add(got, want)
    metrics = agreement.metrics()        # {"sqnr_db", "max_abs_error", "top1_agreement"}
    failures = RunCheck(min_sqnr_db=25).failures(metrics)

A decode run (udo_build.runtime.decode) also has `decode_metrics(steps)` under "decode": the SQNR
of each requested output at each step (a list, one {output: dB} per step), the worst of them
(`min_sqnr_db`) and the drift: for each output, the mean SQNR of the first `window` steps less
that of the last `window` (window: an eighth of the steps, at least 1; positive: the last steps
are worse), the largest over the outputs (`drift_db`). On a decode run `min_sqnr_db` bounds the
worst step too, and `max_drift_db` bounds the drift.

SQNR is over every output value of every inference (signal: the float model's outputs; noise:
the difference), None when the outputs are exact. Top-1 agreement counts the outputs of more
than one value whose argmax equals the float model's.

The float model's outputs may differ in their last bits between CPU kinds (BLAS), so the
metrics are reported (and checked) at a stated precision: SQNR to 0.001 dB, the worst absolute
error to 4 significant digits; the report is then the same bytes unless a figure lies within
that noise of a rounding boundary.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any


@dataclass(frozen=True)
class RunCheck:
    """The bounds a run must meet; None: not checked."""

    min_sqnr_db: float | None = None
    max_abs_error: float | None = None
    min_top1_agreement: float | None = None
    max_drift_db: float | None = None  # decode runs only

    @classmethod
    def from_params(cls, params: Mapping[str, Any] | None) -> RunCheck:
        return cls(**{f.name: (params or {}).get(f.name) for f in fields(cls)})

    def to_params(self) -> dict[str, float]:
        """The stated bounds only."""
        return {k: v for k, v in vars(self).items() if v is not None}

    def failures(self, metrics: Mapping[str, Any]) -> list[str]:
        """What the metrics miss, one message per failed bound (empty: the checks pass)."""
        failures = []
        sqnr = metrics["sqnr_db"]
        if self.min_sqnr_db is not None and sqnr is not None and sqnr < self.min_sqnr_db:
            failures.append(f"SQNR {sqnr:.2f} dB < min_sqnr_db {self.min_sqnr_db}")
        worst = metrics["max_abs_error"]
        if self.max_abs_error is not None and worst > self.max_abs_error:
            failures.append(f"max abs error {worst:.4g} > max_abs_error {self.max_abs_error}")
        top1 = metrics["top1_agreement"]
        if self.min_top1_agreement is not None and top1 is not None \
                and top1 < self.min_top1_agreement:
            failures.append(f"top-1 agreement {top1:.3f} < min_top1_agreement "
                            f"{self.min_top1_agreement}")
        return failures + self._decode_failures(metrics.get("decode"))

    def _decode_failures(self, decode: Mapping[str, Any] | None) -> list[str]:
        if decode is None:
            return ([] if self.max_drift_db is None else
                    ["max_drift_db bounds a decode run's drift: this run does not decode"])
        failures = []
        worst, drift = decode["min_sqnr_db"], decode["drift_db"]
        if self.min_sqnr_db is not None and worst is not None and worst < self.min_sqnr_db:
            step, name = decode["min_at"]
            failures.append(f"step {step} {name}: SQNR {worst:.2f} dB < min_sqnr_db "
                            f"{self.min_sqnr_db}")
        if self.max_drift_db is not None and drift is not None and drift > self.max_drift_db:
            failures.append(f"drift {drift:.2f} dB over {len(decode['sqnr_db'])} steps "
                            f"({decode['drift_of']}: first {decode['window']} steps vs last) > "
                            f"max_drift_db {self.max_drift_db}")
        return failures


Figures = tuple[tuple[float, float, float, "bool | None"], ...]  # per output, see `figures`


def figures(got: Mapping[str, Any], want: Mapping[str, Any]) -> Figures:
    """One inference's figures, output by output (in `got`'s order): the signal, the noise,
    the worst absolute error, and whether the argmax agrees (None: one value, not counted).
    Computed where the inference ran (a worker), merged in input order (`Agreement.merge`)."""
    import numpy as np

    rows = []
    for name, value in got.items():
        a = np.asarray(value, np.float64).reshape(-1)
        b = np.asarray(want[name], np.float64).reshape(-1)
        worst = float(np.max(np.abs(a - b))) if a.size else 0.0
        top1 = bool(np.argmax(a) == np.argmax(b)) if a.size > 1 else None
        rows.append((float(np.sum(b * b)), float(np.sum((a - b) ** 2)), worst, top1))
    return tuple(rows)


class Agreement:
    """Signal, noise, worst absolute error and top-1 agreement, accumulated over inferences."""

    def __init__(self) -> None:
        self.signal = self.noise = self.max_abs = 0.0
        self.agree = self.total = 0

    def add(self, got: Mapping[str, Any], want: Mapping[str, Any]) -> None:
        """One inference: `got` and the float model's `want`, by tensor name."""
        self.merge(figures(got, want))

    def merge(self, rows: Figures) -> None:
        """One inference's `figures` (merged in input order: the sums are floats)."""
        for signal, noise, worst, top1 in rows:
            self.signal += signal
            self.noise += noise
            self.max_abs = max(self.max_abs, worst)
            if top1 is not None:
                self.agree += int(top1)
                self.total += 1

    def metrics(self) -> dict[str, Any]:
        """The report's metrics: SQNR in dB (None: exact), worst error, top-1 agreement."""
        sqnr = math.inf if self.noise == 0 else 10 * math.log10(max(self.signal, 1e-30)
                                                                / self.noise)
        return {"sqnr_db": None if math.isinf(sqnr) else round(sqnr, 3),
                "max_abs_error": float(f"{self.max_abs:.4g}"),
                "top1_agreement": self.agree / self.total if self.total else None}


def sqnr_db(got: Any, want: Any) -> float | None:
    """The SQNR of one tensor against the float model's (None: exact), to 0.001 dB."""
    agreement = Agreement()
    agreement.add({"t": got}, {"t": want})
    return agreement.metrics()["sqnr_db"]


def decode_metrics(steps: Sequence[Mapping[str, float | None]]) -> dict[str, Any]:
    """The per-step figures of a decode run (see the module docstring): `steps`, each step's
    {output: SQNR dB (None: exact)}."""
    names = sorted({n for step in steps for n in step})
    window = max(1, len(steps) // 8)
    finite = [(v, t, n) for t, step in enumerate(steps) for n, v in sorted(step.items())
              if v is not None]
    worst = min(finite, default=None)
    drifts = {n: _drift([step.get(n) for step in steps], window) for n in names}
    known = [(d, n) for n, d in drifts.items() if d is not None]
    drift, of = max(known, default=(None, None))
    return {"sqnr_db": [dict(sorted(step.items())) for step in steps],
            "min_sqnr_db": None if worst is None else worst[0],
            "min_at": None if worst is None else [worst[1], worst[2]],
            "drift_db": drift, "drift_of": of, "window": window}


def _drift(values: Sequence[float | None], window: int) -> float | None:
    first = [v for v in values[:window] if v is not None]
    last = [v for v in values[-window:] if v is not None]
    if not first or not last:
        return None
    return round(sum(first) / len(first) - sum(last) / len(last), 3)
