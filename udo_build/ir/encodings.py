"""Encodings: the type (real = scale * (q + offset)) and the AIMET JSON format, readable by
the tools people already use.

    {"activation_encodings": {"<tensor>": [{"bitwidth": 8, "dtype": "int",
       "is_symmetric": "False", "min": ..., "max": ..., "offset": -128, "scale": ...}]},
     "param_encodings": {"<weight>": [{...}, ...one per output channel...]}}

AIMET writes offsets in the unsigned form, so a signed symmetric weight encoding (q in
[-127, 127], offset 0 here) appears with offset -2^(b-1) and min = -2^(b-1) x scale. Reading
(for `override_encodings`) accepts both "True"/"False" strings and JSON booleans.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import UserError


@dataclass(frozen=True)
class Encoding:
    """real = scale * (q + offset); `signed` encodings keep q in [-(2^(b-1)-1), 2^(b-1)-1]."""

    bitwidth: int
    scale: float
    offset: int
    signed: bool = False

    @property
    def qmin(self) -> int:
        return -(2 ** (self.bitwidth - 1) - 1) if self.signed else 0

    @property
    def qmax(self) -> int:
        return 2 ** (self.bitwidth - 1) - 1 if self.signed else 2 ** self.bitwidth - 1

    @property
    def min(self) -> float:
        return self.scale * (self.qmin + self.offset)

    @property
    def max(self) -> float:
        return self.scale * (self.qmax + self.offset)

    def quantize(self, x: np.ndarray) -> np.ndarray:
        q = np.rint(np.asarray(x, np.float64) / self.scale) - self.offset
        return np.clip(q, self.qmin, self.qmax)

    def dequantize(self, q: np.ndarray) -> np.ndarray:
        return (self.scale * (np.asarray(q, np.float64) + self.offset)).astype(np.float32)


Encodings = dict[str, list[Encoding]]


def to_aimet(activations: Encodings, params: Encodings) -> dict[str, Any]:
    return {"activation_encodings": {k: [_entry(e) for e in v]
                                     for k, v in sorted(activations.items())},
            "param_encodings": {k: [_entry(e) for e in v] for k, v in sorted(params.items())}}


def _entry(e: Encoding) -> dict[str, Any]:
    offset = e.offset - 2 ** (e.bitwidth - 1) if e.signed else e.offset
    return {"bitwidth": int(e.bitwidth), "dtype": "int", "is_symmetric": str(e.signed),
            "min": float(e.min if not e.signed else e.scale * offset),
            "max": float(e.max), "offset": int(offset), "scale": float(e.scale)}


def dumps(activations: Encodings, params: Encodings) -> bytes:
    return (json.dumps(to_aimet(activations, params), indent=1, sort_keys=True) + "\n").encode()


def from_aimet(doc: Any, file: str, part: str = "") -> tuple[Encodings, Encodings]:
    """(activations, params) from an AIMET document (in `file`, or in its `part`); a UserError
    names a bad entry."""
    if not isinstance(doc, dict):
        raise UserError("an encodings file is a JSON object with activation_encodings and "
                        "param_encodings", file=file, field=part or None)
    out: list[Encodings] = []
    for section in ("activation_encodings", "param_encodings"):
        entries = doc.get(section, {})
        if not isinstance(entries, dict):
            raise UserError(f"{section} must map tensor names to lists of encodings", file=file,
                            field=f"{part}{section}")
        out.append({name: _parse_list(v, file, f"{part}{section}.{name}")
                    for name, v in entries.items()})
    return out[0], out[1]


def _parse_list(value: Any, file: str, field: str) -> list[Encoding]:
    entries = value if isinstance(value, list) else [value]
    if not entries:
        raise UserError("an empty list of encodings", file=file, field=field,
                        hint="give one encoding, or one per output channel")
    return [_parse(e, file, f"{field}[{i}]") for i, e in enumerate(entries)]


def _parse(entry: Any, file: str, field: str) -> Encoding:
    if not isinstance(entry, dict):
        raise UserError("an encoding is a JSON object (bitwidth, scale, offset, ...)",
                        file=file, field=field)
    try:
        bitwidth = int(entry["bitwidth"])
        if bitwidth not in (4, 8, 16, 32):
            raise UserError(f"bitwidth {bitwidth} is not one of 4, 8, 16, 32", file=file,
                            field=field)
        symmetric = str(entry.get("is_symmetric", "False")).lower() == "true"
        if "scale" in entry and "offset" in entry:
            scale, offset = float(entry["scale"]), int(entry["offset"])
        else:  # only min and max given
            lo, hi = float(entry["min"]), float(entry["max"])
            scale = (hi - lo) / (2 ** bitwidth - 1)
            offset = round(lo / scale) if scale else 0
    except (KeyError, TypeError, ValueError, OverflowError):
        raise UserError("an encoding needs bitwidth and either scale and offset or min and "
                        "max", file=file, field=field) from None
    # an offset beyond 2^52 is not exact in float64: no real encoding has one
    if not (scale > 0 and math.isfinite(scale)) or abs(offset) > 2 ** 52:
        raise UserError(f"scale {scale} / offset {offset} is not a valid {bitwidth}-bit "
                        "encoding", file=file, field=field)
    if symmetric:
        return Encoding(bitwidth, scale, offset + 2 ** (bitwidth - 1), signed=True)
    return Encoding(bitwidth, scale, offset)


def load(path: Path) -> tuple[Encodings, Encodings]:
    from ..source import MAX_JSON_BYTES, load_json, read_limited

    data, _ = load_json(read_limited(path, MAX_JSON_BYTES, "encodings file"), str(path))
    return from_aimet(data, str(path))
