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
VECTOR) are refused naming the entry.

Block encodings (weights of MatMul, Gemm and Conv quantized per block of `block_size` along
their input axis, one scale per output channel and block) are held as one Encoding per output
channel whose `block_scales` multiply its scale block by block:

- PER_BLOCK: scale 1.0, block_scales the blocks' float scales. In 1.0.0: "scale" and "offset"
  hold channels x blocks values, "block_size" the block size.
- LPBQ (low-power block quantization): scale the channel's float scale, block_scales small
  unsigned integers in [1, 2^(lpbq_bitwidth - bitwidth)]; q x block_scale fits lpbq_bitwidth
  bits, so an integer product takes those integers with one scale per channel. In 1.0.0:
  "enc_type": "LPBQ", "bw" the decompressed width (lpbq_bitwidth, e.g. 8), "compressed_bw" the
  weight's (e.g. 4), "scale"/"offset" one per channel, "per_block_int_scale" channels x blocks.

A file flattens channels x blocks in the weight's axis order (block-major for a MatMul's (K, N)
weight, channel-major for a Conv's or a Gemm's transposed B), so reading a block entry needs the
weight's shape: `from_aimet(..., layouts=block_layouts(model))`.
"""

from __future__ import annotations

import io
import json
import math
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, BinaryIO

import numpy as np

from ..errors import UserError
from .blocks import Layout, Layouts, block_entry, numbers
from .encoding_type import Encoding

__all__ = ["Encoding", "Layout", "Layouts"]

if TYPE_CHECKING:
    from .graph import Model


Encodings = dict[str, list[Encoding]]
VERSION = "1.0.0"  # the format dumps writes
SECTIONS = ("activation_encodings", "param_encodings")
BITWIDTHS = (4, 8, 16, 32)


def to_aimet(activations: Encodings, params: Encodings) -> dict[str, Any]:
    """The 1.0.0 document: entries sorted by tensor name."""
    return {"version": VERSION,
            "activation_encodings": [_listed(_entry(k, v)) for k, v in sorted(activations.items())],
            "param_encodings": [_listed(_entry(k, v)) for k, v in sorted(params.items())]}


def _listed(entry: dict[str, Any]) -> dict[str, Any]:
    return {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in entry.items()}


def _entry(name: str, encodings: list[Encoding]) -> dict[str, Any]:
    """A tensor's entry; a block entry's lists of channels x blocks values are arrays."""
    first = encodings[0]
    if any(_kind(e) != _kind(first) for e in encodings):
        raise ValueError(f"the channels of {name} differ in bit width, signedness or blocks")
    if first.blocked:
        return _block_entry(name, encodings)
    return {"name": name, "dtype": "INT",
            "enc_type": "PER_TENSOR" if len(encodings) == 1 else "PER_CHANNEL",
            "bw": int(first.bitwidth), "is_sym": first.signed,
            "scale": [float(e.scale) for e in encodings],
            "offset": [int(aimet_offset(e)) for e in encodings]}


def _kind(e: Encoding) -> tuple[Any, ...]:
    return (e.bitwidth, e.signed, e.block_size, len(e.block_scales), e.lpbq_bitwidth,
            e.blocks_first)


def _block_entry(name: str, encodings: list[Encoding]) -> dict[str, Any]:
    """A PER_BLOCK or LPBQ entry: channels x blocks flattened in the weight's axis order."""
    first = encodings[0]
    grid = np.array([e.block_scales for e in encodings], np.float64)  # (channels, blocks)
    flat = (grid.T if first.blocks_first else grid).reshape(-1)
    out: dict[str, Any] = {"name": name, "dtype": "INT", "bw": int(first.bitwidth),
                           "is_sym": True, "block_size": int(first.block_size)}
    if not first.lpbq_bitwidth:
        half = 2 ** (first.bitwidth - 1)
        return {**out, "enc_type": "PER_BLOCK", "scale": flat,
                "offset": np.full(flat.size, -half, np.int64)}
    return {**out, "enc_type": "LPBQ", "bw": int(first.lpbq_bitwidth),
            "compressed_bw": int(first.bitwidth), "scale": [float(e.scale) for e in encodings],
            "offset": [-2 ** (first.lpbq_bitwidth - 1)] * len(encodings),
            "per_block_int_scale": flat.astype(np.int64)}


def aimet_offset(e: Encoding) -> int:
    """The offset as AIMET writes it (the unsigned form: -2^(b-1) for a symmetric encoding)."""
    return e.offset - 2 ** (e.bitwidth - 1) if e.signed else e.offset


def _from_unsigned(bitwidth: int, scale: float, offset: int, symmetric: bool) -> Encoding:
    if symmetric:
        return Encoding(bitwidth, scale, offset + 2 ** (bitwidth - 1), signed=True)
    return Encoding(bitwidth, scale, offset)


def to_list(e: Encoding) -> list[Any]:
    """An encoding as a record's value type holds it: [bitwidth, scale, offset, signed], and a
    block encoding's blocks as a fifth element."""
    out: list[Any] = [e.bitwidth, e.scale, e.offset, e.signed]
    if e.blocked:
        out.append({"block_size": e.block_size, "block_scales": list(e.block_scales),
                    "lpbq_bitwidth": e.lpbq_bitwidth, "blocks_first": e.blocks_first})
    return out


def from_list(value: list[Any]) -> Encoding:
    """The encoding of `to_list` (checked by the record reader, udo_build.compiler)."""
    b, s, o, g = value[:4]
    blocks = value[4] if len(value) > 4 else {}
    return Encoding(int(b), float(s), int(o), bool(g), int(blocks.get("block_size", 0)),
                    tuple(float(v) for v in blocks.get("block_scales", ())),
                    int(blocks.get("lpbq_bitwidth", 0)), bool(blocks.get("blocks_first", False)))


LONG = 1024  # a list of numbers this long is written by `_numbers`, not by json's encoder
CHUNK = 1 << 16  # `_numbers` makes the text of this many numbers at a time
_HELD = re.compile(r'"\\u0000(\d+)\\u0000"')


def dumps(activations: Encodings, params: Encodings) -> bytes:
    """The 1.0.0 document as `dump` writes it."""
    out = io.BytesIO()
    dump(activations, params, out)
    return out.getvalue()


def dump(activations: Encodings, params: Encodings, out: BinaryIO) -> None:
    """Write the 1.0.0 document to `out` as `json.dumps(to_aimet(...), indent=1,
    sort_keys=True)` writes it, plus a newline, one entry at a time, and a long list of
    numbers (an LLM's millions of block integers) a piece at a time: json's indenting encoder
    would hold a string object per number and per separator, and the whole text, at once."""
    out.write(b"{")
    for section, encodings in zip(SECTIONS, (activations, params), strict=True):
        out.write(f'\n "{section}": '.encode())
        if not encodings:
            out.write(b"[],")
            continue
        for i, name in enumerate(sorted(encodings)):
            out.write(b",\n  " if i else b"[\n  ")
            for piece in _entry_text(_entry(name, encodings[name]), 2):
                out.write(piece.encode())
        out.write(b"\n ],")
    out.write(f'\n "version": {json.dumps(VERSION)}\n}}\n'.encode())


def _entry_text(entry: dict[str, Any], indent: int) -> Iterator[str]:
    """An entry as json.dumps(indent=1, sort_keys=True) writes it at this indentation, in
    pieces: its long lists by `_numbers`."""
    held: list[Any] = []
    for key, value in entry.items():
        if isinstance(value, (list, np.ndarray)) and len(value) >= LONG:
            entry[key] = f"\0{len(held)}\0"
            held.append(value)
    text = json.dumps(_listed(entry), indent=1, sort_keys=True).replace("\n", "\n" + " " * indent)
    at = 0
    for found in _HELD.finditer(text):
        line = text[text.rfind("\n", 0, found.start()) + 1:found.start()]
        yield text[at:found.start()]
        yield from _numbers(held[int(found.group(1))], len(line) - len(line.lstrip(" ")))
        at = found.end()
    yield text[at:]


def _numbers(values: list[Any] | np.ndarray, indent: int) -> Iterator[str]:
    """A list of numbers as json.dumps(indent=1) writes it at this indentation, in pieces."""
    pad = "\n" + " " * (indent + 1)
    words: dict[int, str] = {}  # an integer's text, made once (block integers repeat)
    yield "[" + pad
    for start in range(0, len(values), CHUNK):
        part = values[start:start + CHUNK]
        part = part.tolist() if isinstance(part, np.ndarray) else part
        if all(type(v) is int for v in part):
            texts = [words[v] if v in words else words.setdefault(v, json.dumps(v))
                     for v in part]
        else:
            texts = [json.dumps(v) for v in part]
        yield ("," + pad if start else "") + ("," + pad).join(texts)
    yield "\n" + " " * indent + "]"


def from_aimet(doc: Any, file: str, part: str = "", layouts: Layouts | None = None
               ) -> tuple[Encodings, Encodings]:
    """(activations, params) from an AIMET document of either format (in `file`, or in its
    `part`); a UserError names the bad entry and field. `layouts`: the block layout of each
    weight a block entry may name (`block_layouts`)."""
    if not isinstance(doc, dict):
        raise UserError("an encodings file is a JSON object with activation_encodings and "
                        "param_encodings", file=file, field=part or None)
    version = doc.get("version")
    if version == VERSION:
        sections = [_v1_section(doc.get(s, []), file, f"{part}{s}", layouts or {})
                    for s in SECTIONS]
        return sections[0], sections[1]
    if isinstance(version, str) and not version.startswith("0."):
        raise UserError(f"encodings version {version} is not read", file=file,
                        field=f"{part}version",
                        hint=f"udo-build reads version {VERSION} (aimet 2.x export) and the "
                             "older dict form")
    sections = [_legacy_section(doc.get(s, {}), file, f"{part}{s}") for s in SECTIONS]
    return sections[0], sections[1]


# -- 1.0.0: a list of named entries ----------------------------------------------------------


def _v1_section(entries: Any, file: str, field: str, layouts: Layouts) -> Encodings:
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
        out[name] = _v1_entry(entry, name, file, where, layouts.get(name))
    return out


def _v1_entry(entry: dict[str, Any], name: str, file: str, field: str,
              layout: Layout | None) -> list[Encoding]:
    def refuse(key: str, message: str, hint: str | None = None) -> UserError:
        return UserError(f"tensor '{name}': {message}", file=file, field=f"{field}.{key}",
                         hint=hint)

    if str(entry.get("dtype", "INT")).upper() != "INT":
        raise refuse("dtype", f"dtype {entry.get('dtype')} is not an integer encoding",
                     "leave float tensors out of the file (float_fallback keeps them float)")
    kind = str(entry.get("enc_type", "PER_TENSOR")).upper()
    if kind not in ("PER_TENSOR", "PER_CHANNEL", "PER_BLOCK", "LPBQ"):
        raise refuse("enc_type", f"enc_type {kind} is not supported",
                     "udo-build reads PER_TENSOR, PER_CHANNEL, PER_BLOCK and LPBQ encodings")
    if kind in ("PER_BLOCK", "LPBQ"):
        return block_entry(entry, kind, layout, refuse)
    bitwidth = entry.get("bw")
    if isinstance(bitwidth, bool) or bitwidth not in BITWIDTHS:
        raise refuse("bw", f"bw {bitwidth!r} is not one of 4, 8, 16, 32")
    symmetric = entry.get("is_sym", False)
    if not isinstance(symmetric, bool):
        raise refuse("is_sym", f"is_sym {symmetric!r} is not true or false")
    scales = numbers(entry.get("scale"), refuse, "scale")
    offsets = numbers(entry.get("offset"), refuse, "offset")
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


def load(path: Path, model: Model | None = None) -> tuple[Encodings, Encodings]:
    """The encodings of a file; `model`: the model whose weights its block entries name."""
    from ..source import MAX_JSON_BYTES, load_json, read_limited
    from .blocks import block_layouts

    data, _ = load_json(read_limited(path, MAX_JSON_BYTES, "encodings file"), str(path))
    return from_aimet(data, str(path), layouts=block_layouts(model) if model else None)
