"""The bundle: one versioned, self-describing, integrity-checked file holding a model.

    bytes 0-7    magic b"UDOBNDL\\0"
    bytes 8-11   format version (uint32, little-endian)
    bytes 12-19  header length H (uint64, little-endian)
    bytes 20..   header: canonical JSON {"format", "version", "meta", "parts": [...]}
    then         the parts, each at a 64-byte aligned offset

Each part entry names the part, its offset, size and sha256 (weights also their tensor name,
dtype and shape). Parts: `graph.json` (the IR graph), `weights/<n>` (raw little-endian C-order
arrays), `opdefs.json` (the op definitions of its custom ops), and whatever later steps add
(encodings, cache records). Equal content gives equal bytes: parts are sorted, JSON is
canonical, nothing records a time. Reading checks the magic, version, bounds, names and every
part's digest; a file that fails any check is refused with a clear message.
"""

from __future__ import annotations

import hashlib
import json
import re
import struct
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from ..canonical import canonical_json, sha256_hex
from ..errors import UserError
from . import Graph, Model

MAGIC = b"UDOBNDL\x00"
FORMAT = "udo-build/bundle"
VERSION = 1
ALIGN = 64
MAX_HEADER = 64 << 20
EXTENSION = ".udb"
_PREFIX = struct.Struct("<8sIQ")
_PART_NAME = re.compile(r"[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-@=,:+]+)*\Z")


@dataclass(frozen=True)
class Bundle:
    model: Model
    opdefs: dict[str, Any] | None = None  # canonical JSON of the custom ops' package
    meta: dict[str, Any] = field(default_factory=dict)
    parts: Mapping[str, bytes] = field(default_factory=dict)  # further parts by name

    def with_parts(self, **changes: Any) -> Bundle:
        from dataclasses import replace

        return replace(self, **changes)

    def to_bytes(self) -> bytes:
        return write_bundle(self)

    def digest(self) -> str:
        return sha256_hex(self.to_bytes())


def write_bundle(bundle: Bundle) -> bytes:
    entries: list[tuple[dict[str, Any], bytes]] = [
        ({"name": "graph.json"}, canonical_json(bundle.model.graph.to_json())),
    ]
    for i, (name, array) in enumerate(bundle.model.iter_weights()):
        a = np.ascontiguousarray(array)
        if a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("<"))
        entries.append(({"name": f"weights/{i}", "tensor": name, "dtype": a.dtype.name,
                         "shape": list(a.shape)}, a.tobytes()))
    if bundle.opdefs is not None:
        entries.append(({"name": "opdefs.json"}, canonical_json(bundle.opdefs)))
    for name, data in sorted(bundle.parts.items()):
        if not _safe_name(name) or name in ("graph.json", "opdefs.json") \
                or name.startswith("weights/"):
            raise ValueError(f"bad part name {name!r}")
        entries.append(({"name": name}, bytes(data)))
    return _layout(entries, bundle.meta)


def _layout(entries: list[tuple[dict[str, Any], bytes]], meta: dict[str, Any]) -> bytes:
    index = [{**e, "size": len(d), "sha256": hashlib.sha256(d).hexdigest()} for e, d in entries]
    # offsets depend on the header's length, which depends on the offsets: iterate to a fixpoint
    offsets = [0] * len(index)
    while True:
        header = canonical_json({"format": FORMAT, "version": VERSION, "meta": meta,
                                 "parts": [{**e, "offset": o} for e, o in zip(index, offsets,
                                                                              strict=True)]})
        position = _align(_PREFIX.size + len(header))
        fresh = []
        for entry in index:
            fresh.append(position)
            position = _align(position + entry["size"])
        if fresh == offsets:
            break
        offsets = fresh
    out = bytearray(_PREFIX.pack(MAGIC, VERSION, len(header)) + header)
    for (_, data), offset in zip(entries, offsets, strict=True):
        out.extend(b"\0" * (offset - len(out)))
        out.extend(data)
    return bytes(out)


def _safe_name(name: str) -> bool:
    return bool(_PART_NAME.match(name)) and not set(name.split("/")) & {".", ".."}


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def read_bundle(data: bytes, file: str = "bundle") -> Bundle:
    """Parse and verify a bundle; a UserError says what is wrong with a bad file."""
    header = _header(data, file)
    parts: dict[str, bytes] = {}
    weights: dict[str, np.ndarray] = {}
    view = memoryview(data)
    for entry in header["parts"]:
        blob = _part(view, entry, file)
        if entry["name"].startswith("weights/"):
            weights[str(entry["tensor"])] = _weight(blob, entry, file)
        else:
            parts[entry["name"]] = bytes(blob)
    try:
        graph = Graph.from_json(json.loads(parts.pop("graph.json")))
    except (KeyError, ValueError, TypeError) as exc:
        raise UserError(f"the bundle's graph cannot be read: {exc}", file=file) from None
    opdefs = json.loads(parts.pop("opdefs.json")) if "opdefs.json" in parts else None
    return Bundle(Model(graph, weights), opdefs, dict(header.get("meta") or {}), parts)


def load_bundle(path: str | Path) -> Bundle:
    from ..source import read_limited

    return read_bundle(read_limited(path, 4 << 30, "bundle"), str(path))


def _header(data: bytes, file: str) -> dict[str, Any]:
    if len(data) < _PREFIX.size or data[:8] != MAGIC:
        raise UserError("not a udo-build bundle (wrong magic bytes)", file=file,
                        hint=f"bundles are written by 'udo-build convert' ({EXTENSION})")
    _, version, length = _PREFIX.unpack_from(data)
    if version != VERSION:
        raise UserError(f"bundle format version {version} is not supported (this udo-build "
                        f"reads version {VERSION})", file=file)
    if length > MAX_HEADER or _PREFIX.size + length > len(data):
        raise UserError("the bundle is truncated or its header is corrupt", file=file)
    try:
        header = json.loads(data[_PREFIX.size:_PREFIX.size + length])
    except (ValueError, UnicodeDecodeError):
        raise UserError("the bundle's header is not valid JSON", file=file) from None
    if not isinstance(header, dict) or header.get("format") != FORMAT \
            or not isinstance(header.get("parts"), list):
        raise UserError("the bundle's header is not a udo-build bundle header", file=file)
    return header


def _part(view: memoryview, entry: Any, file: str) -> memoryview:
    try:
        name, offset, size, digest = (entry["name"], int(entry["offset"]), int(entry["size"]),
                                      str(entry["sha256"]))
    except (KeyError, TypeError, ValueError):
        raise UserError("a part entry of the bundle's header is malformed", file=file) from None
    if not isinstance(name, str) or not _safe_name(name):
        raise UserError(f"the bundle names a part {name!r}, which is not allowed", file=file)
    if offset < _PREFIX.size or size < 0 or offset + size > len(view):
        raise UserError(f"part {name} lies outside the bundle (truncated file?)", file=file)
    blob = view[offset:offset + size]
    if hashlib.sha256(blob).hexdigest() != digest:
        raise UserError(f"part {name} of the bundle is corrupt (digest mismatch)", file=file)
    return blob


def _weight(blob: memoryview, entry: dict[str, Any], file: str) -> np.ndarray:
    try:
        dtype = np.dtype(str(entry["dtype"]))
        shape = tuple(int(d) for d in entry["shape"])
        if dtype.hasobject or any(d < 0 for d in shape):
            raise ValueError(dtype)
        array = np.frombuffer(blob, dtype=dtype.newbyteorder("<")).reshape(shape)
    except (KeyError, TypeError, ValueError):
        raise UserError(f"weight {entry.get('tensor')!r} of the bundle is malformed",
                        file=file) from None
    return array.astype(dtype, copy=False)
