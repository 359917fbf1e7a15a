"""Encodings: the type (real = scale * (q + offset)) and the AIMET JSON formats, readable by
the tools people already use.

udo-build writes the 1.0.0 format, the one aimet 2.x exports and the vendor converters take as
quantization overrides: one list entry per tensor, a per-channel encoding one entry with a scale
and an offset per channel.

    {"version": "1.0.0",
     "activation_encodings": [{"name": "<tensor>", "dtype": "INT", "enc_type": "PER_TENSOR",
                               "bw": 8, "is_sym": false, "scale": [...], "offset": [-128]}],
     "param_encodings": [{"name": "<weight>", "enc_type": "PER_CHANNEL", ...}]}

It reads that and the older dict form (aimet 1.x, `version` absent or 0.x):

    {"activation_encodings": {"<tensor>": [{"bitwidth": 8, "dtype": "int",
       "is_symmetric": "False", "min": ..., "max": ..., "offset": -128, "scale": ...}]},
     "param_encodings": {"<weight>": [{...}, ...one per output channel...]}}

Both write offsets in the unsigned form, so a signed symmetric weight encoding (q in
[-127, 127], offset 0 here) appears with offset -2^(b-1). The older form accepts "True"/"False"
strings and JSON booleans for is_symmetric. Encodings udo-build does not compute (FLOAT dtype,
PER_BLOCK, LPBQ, VECTOR) are refused naming the entry.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import UserError

if TYPE_CHECKING:
    from .graph import Model


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
VERSION = "1.0.0"  # the format dumps writes
SECTIONS = ("activation_encodings", "param_encodings")
BITWIDTHS = (4, 8, 16, 32)


def to_aimet(activations: Encodings, params: Encodings) -> dict[str, Any]:
    """The 1.0.0 document: entries sorted by tensor name."""
    return {"version": VERSION,
            "activation_encodings": [_entry(k, v) for k, v in sorted(activations.items())],
            "param_encodings": [_entry(k, v) for k, v in sorted(params.items())]}


def _entry(name: str, encodings: list[Encoding]) -> dict[str, Any]:
    first = encodings[0]
    if any((e.bitwidth, e.signed) != (first.bitwidth, first.signed) for e in encodings):
        raise ValueError(f"the channels of {name} differ in bit width or signedness")
    return {"name": name, "dtype": "INT",
            "enc_type": "PER_TENSOR" if len(encodings) == 1 else "PER_CHANNEL",
            "bw": int(first.bitwidth), "is_sym": first.signed,
            "scale": [float(e.scale) for e in encodings],
            "offset": [int(aimet_offset(e)) for e in encodings]}


def aimet_offset(e: Encoding) -> int:
    """The offset as AIMET writes it (the unsigned form: -2^(b-1) for a symmetric encoding)."""
    return e.offset - 2 ** (e.bitwidth - 1) if e.signed else e.offset


def _from_unsigned(bitwidth: int, scale: float, offset: int, symmetric: bool) -> Encoding:
    if symmetric:
        return Encoding(bitwidth, scale, offset + 2 ** (bitwidth - 1), signed=True)
    return Encoding(bitwidth, scale, offset)


def dumps(activations: Encodings, params: Encodings) -> bytes:
    return (json.dumps(to_aimet(activations, params), indent=1, sort_keys=True) + "\n").encode()


def from_aimet(doc: Any, file: str, part: str = "") -> tuple[Encodings, Encodings]:
    """(activations, params) from an AIMET document of either format (in `file`, or in its
    `part`); a UserError names the bad entry and field."""
    if not isinstance(doc, dict):
        raise UserError("an encodings file is a JSON object with activation_encodings and "
                        "param_encodings", file=file, field=part or None)
    version = doc.get("version")
    if version == VERSION:
        sections = [_v1_section(doc.get(s, []), file, f"{part}{s}") for s in SECTIONS]
        return sections[0], sections[1]
    if isinstance(version, str) and not version.startswith("0."):
        raise UserError(f"encodings version {version} is not read", file=file,
                        field=f"{part}version",
                        hint=f"udo-build reads version {VERSION} (aimet 2.x export) and the "
                             "older dict form")
    sections = [_legacy_section(doc.get(s, {}), file, f"{part}{s}") for s in SECTIONS]
    return sections[0], sections[1]


# -- 1.0.0: a list of named entries ----------------------------------------------------------


def _v1_section(entries: Any, file: str, field: str) -> Encodings:
    if not isinstance(entries, list):
        raise UserError(f"in version {VERSION}, a section is a list of encodings, each with a "
                        "name", file=file, field=field)
    out: Encodings = {}
    for i, entry in enumerate(entries):
        where = f"{field}[{i}]"
        name = entry.get("name") if isinstance(entry, dict) else None
        if not isinstance(name, str) or not name:
            raise UserError("an encoding is a JSON object with a name (the tensor's)",
                            file=file, field=where)
        if name in out:
            raise UserError(f"tensor '{name}' has a second encoding", file=file, field=where,
                            hint="give each tensor one entry")
        out[name] = _v1_entry(entry, name, file, where)
    return out


def _v1_entry(entry: dict[str, Any], name: str, file: str, field: str) -> list[Encoding]:
    def refuse(key: str, message: str, hint: str | None = None) -> UserError:
        return UserError(f"tensor '{name}': {message}", file=file, field=f"{field}.{key}",
                         hint=hint)

    if str(entry.get("dtype", "INT")).upper() != "INT":
        raise refuse("dtype", f"dtype {entry.get('dtype')} is not an integer encoding",
                     "leave float tensors out of the file (float_fallback keeps them float)")
    kind = str(entry.get("enc_type", "PER_TENSOR")).upper()
    if kind not in ("PER_TENSOR", "PER_CHANNEL"):
        raise refuse("enc_type", f"enc_type {kind} is not supported",
                     "udo-build computes PER_TENSOR and PER_CHANNEL encodings")
    bitwidth = entry.get("bw")
    if isinstance(bitwidth, bool) or bitwidth not in BITWIDTHS:
        raise refuse("bw", f"bw {bitwidth!r} is not one of 4, 8, 16, 32")
    symmetric = entry.get("is_sym", False)
    if not isinstance(symmetric, bool):
        raise refuse("is_sym", f"is_sym {symmetric!r} is not true or false")
    scales = _numbers(entry.get("scale"), refuse, "scale")
    offsets = _numbers(entry.get("offset"), refuse, "offset")
    if len(offsets) != len(scales):
        raise refuse("offset", f"{len(offsets)} offsets for {len(scales)} scales")
    if kind == "PER_TENSOR" and len(scales) != 1:
        raise refuse("scale", f"a PER_TENSOR encoding has one scale, not {len(scales)}")
    out = []
    for scale, offset in zip(scales, offsets, strict=True):
        if not (scale > 0 and math.isfinite(scale)):
            raise refuse("scale", f"scale {scale} is not a positive number")
        if offset != round(offset) or abs(offset) > 2 ** 52:
            raise refuse("offset", f"offset {offset} is not an integer")
        out.append(_from_unsigned(bitwidth, scale, int(offset), symmetric))
    return out


def _numbers(value: Any, refuse: Any, key: str) -> list[float]:
    if (not isinstance(value, list) or not value
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)):
        raise refuse(key, f"{key} must be a non-empty list of numbers")
    if not all(math.isfinite(v) for v in value):
        raise refuse(key, f"{key} holds a value that is not finite")
    return [float(v) for v in value]


# -- the older dict form: tensor name -> a list of encodings -----------------------------------


def _legacy_section(entries: Any, file: str, field: str) -> Encodings:
    if isinstance(entries, list):
        raise UserError(f"a list of encodings is the {VERSION} format", file=file, field=field,
                        hint=f'add "version": "{VERSION}" to the file, or map tensor names to '
                             "lists of encodings")
    if not isinstance(entries, dict):
        raise UserError("a section maps tensor names to lists of encodings", file=file,
                        field=field)
    return {name: _parse_list(v, file, f"{field}.{name}") for name, v in entries.items()}


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
        if bitwidth not in BITWIDTHS:
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
    return _from_unsigned(bitwidth, scale, offset, symmetric)


def known_only(overrides: tuple[Encodings, Encodings], tensors: Iterable[str]
               ) -> tuple[tuple[Encodings, Encodings], tuple[str, ...]]:
    """(the overrides of the names that are `tensors`, the other names, sorted): the vendor
    converters skip an override naming a tensor the model lacks, with a warning; so does
    udo-build (the quantize step applies the known ones and tells the others)."""
    known = set(tensors)
    kept = ({n: e for n, e in overrides[0].items() if n in known},
            {n: e for n, e in overrides[1].items() if n in known})
    return kept, tuple(sorted({n for section in overrides for n in section} - known))


def model_tensors(model: Model) -> set[str]:
    """Every tensor name of a model: inputs, node outputs, weights (what an encoding names)."""
    graph = model.graph
    return {*(t.name for t in graph.inputs), *(o for n in graph.nodes for o in n.outputs),
            *(i for n in graph.nodes for i in n.inputs if i), *model.weights}


def load(path: Path) -> tuple[Encodings, Encodings]:
    from ..source import MAX_JSON_BYTES, load_json, read_limited

    data, _ = load_json(read_limited(path, MAX_JSON_BYTES, "encodings file"), str(path))
    return from_aimet(data, str(path))
