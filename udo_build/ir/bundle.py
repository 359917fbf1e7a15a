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
canonical, nothing records a time. Reading checks the magic, version, bounds and names, and the
digest of every part: the model's (graph, weights, op definitions) at once, the others when
first read, so choosing a cache record reads only the header's rows and loading one reads that
record. A file that fails any check is refused with a clear message naming the part.

`split_bundle` lays a bundle out with parts whose bytes are elsewhere (the records of the
deployable bundle, kept once in the store): the head holds everything up to them, and
`read_bundle` reads such a file through a `Reader` of byte ranges as well as from bytes.

Weights too large to hold twice (ONNX external data) stay in their files until written: a
model whose weights mapping has `streamed(name)` (udo_build.model.external_data.LazyWeights)
gives `Streamed` sources, hashed piece by piece for the header (and any other weight of OWN_PART
bytes or more stays an array, `ArrayPart`, until written); `write_bundle_to` streams the
bundle to a file, and `bundle_segments` gives it as segments for a file of parts in the store
(what the convert step returns: each weight of OWN_PART bytes or more a blob of its own, a
streamed one read when its segment is taken). All three writers give the same bytes.
`load_bundle` memory-maps the file: its weights are views of the map. A bundle read from the
store (`BundleWeights`) of STREAM_FROM bytes of weights or more streams them
(udo_build.ir.weights): each large weight is a fresh map of its blob, never kept.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import os
import re
import stat
import struct
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO, Protocol

import numpy as np

from ..canonical import canonical_json, sha256_hex
from ..errors import UserError
from ..schema_problems import Check
from ..source import tensor_problem
from . import Graph, Model
from .graph import bulk_building
from .part_sources import ArrayPart, FilePart
from .weights import STREAM_FROM, from_file, mapped, release, spill_file

MAGIC = b"UDOBNDL\x00"
FORMAT = "udo-build/bundle"
VERSION = 1
ALIGN = 64
MAX_HEADER = 64 << 20
MAX_UNMAPPED = 4 << 30  # a bundle that cannot be mapped (a pipe) is read, up to this size
EXTENSION = ".udb"
OWN_PART = 1 << 20  # bytes: a weight this large is a segment (a stored blob) of its own
_PREFIX = struct.Struct("<8sIQ")
_PART_NAME = re.compile(r"[A-Za-z0-9_.\-]+(/[A-Za-z0-9_.\-@=,:+]+)*\Z")


@dataclass(frozen=True)
class Bundle:
    model: Model
    opdefs: dict[str, Any] | None = None  # canonical JSON of the custom ops' package
    meta: dict[str, Any] = field(default_factory=dict)
    # further parts by name: bytes, or a FilePart (bytes kept in a file until written)
    parts: Mapping[str, bytes | FilePart] = field(default_factory=dict)

    def with_parts(self, **changes: Any) -> Bundle:
        from dataclasses import replace

        return replace(self, **changes)

    def to_bytes(self) -> bytes:
        return write_bundle(self)

    def digest(self) -> str:
        return sha256_hex(self.to_bytes())


@dataclass(frozen=True)
class External:
    """A part whose bytes are kept elsewhere (a blob of the store): its size and sha256."""

    size: int
    sha256: str


class Streamed(Protocol):
    """A weight whose bytes stay in a file until the bundle is written (an ONNX external data
    tensor, udo_build.model.external_data.ExternalTensor): little-endian C-order bytes."""

    size: int
    dtype: str
    shape: tuple[int, ...]

    def chunks(self) -> Iterator[bytes]: ...

    def read(self) -> bytes: ...


@dataclass(frozen=True)
class StreamedPart:
    """A streamed weight as a part: its source and the sha256 of its bytes."""

    source: Streamed
    sha256: str

    @property
    def size(self) -> int:
        return self.source.size


def write_bundle(bundle: Bundle) -> bytes:
    out = bytearray()
    for offset, data in bundle_segments(bundle)[0]:
        out.extend(b"\0" * (offset - len(out)))
        out.extend(data)
    return bytes(out)


def write_bundle_to(bundle: Bundle, out: BinaryIO) -> int:
    """Write the bundle to a binary file, streamed weights piece by piece (the bytes
    `write_bundle` gives, without holding them); returns the size."""
    header, entries, offsets = _layout(_entries(bundle), bundle.meta)
    out.write(header)
    position = len(header)
    for (_, data), offset in zip(entries, offsets, strict=True):
        out.write(b"\0" * (offset - position))
        for piece in (data.source.chunks() if isinstance(data, StreamedPart)
                      else (data,)):  # type: ignore[union-attr]
            out.write(piece)  # type: ignore[arg-type]
        position = offset + data.size if not isinstance(data, bytes) else offset + len(data)
    return position


def bundle_segments(bundle: Bundle) -> tuple[Sequence[tuple[int, bytes]], int]:
    """The bundle as segments (offset, bytes) with zeros between, and its size: the small
    parts together, each weight of OWN_PART bytes or more a segment of its own (a streamed one
    read when the segment is taken), so a FileOfParts output stores each as a blob: equal
    weights are stored once, and one streamed weight is in memory at a time."""
    header, entries, offsets = _layout(_entries(bundle), bundle.meta)
    return _segments(header, entries, offsets)


def _segments(header: bytes, entries: list[Entry], offsets: list[int]
              ) -> tuple[_Segments, int]:
    runs: list[tuple[int, bytes | bytearray | StreamedPart]] = [(0, bytearray(header))]
    end = len(header)
    for (_, data), offset in zip(entries, offsets, strict=True):
        size = data.size if isinstance(data, StreamedPart) else len(data)  # type: ignore[arg-type]
        end = offset + size
        if isinstance(data, StreamedPart) or size >= OWN_PART:
            runs.append((offset, data))  # type: ignore[arg-type]
            continue
        start, last = runs[-1]
        if not isinstance(last, bytearray):
            start, last = offset, bytearray()
            runs.append((offset, last))
        last.extend(b"\0" * (offset - start - len(last)))
        last.extend(data)  # type: ignore[arg-type]
    return _Segments([(o, bytes(d) if isinstance(d, bytearray) else d) for o, d in runs]), end


class _Segments(Sequence[tuple[int, bytes]]):
    """Segments whose streamed parts are read when taken (any other run is given as it is)."""

    def __init__(self, runs: list[tuple[int, Any]]) -> None:
        self.runs = runs

    def __len__(self) -> int:
        return len(self.runs)

    def __getitem__(self, i: int) -> tuple[int, bytes]:  # type: ignore[override]
        offset, data = self.runs[i]
        return offset, data.source.read() if isinstance(data, StreamedPart) else data


def split_bundle(bundle: Bundle, external: Mapping[str, External]
                 ) -> tuple[bytes, list[tuple[int, str]], int]:
    """The bundle with further parts whose bytes are elsewhere, as (the head: every byte up to
    the first external part, [(offset, name) of each external part], the whole file's size).
    The file is the head, then each external part at its offset, zeros between: the bytes
    `write_bundle` would give with those parts inline (external parts come last, by name)."""
    segments, placed, end = split_segments(bundle, external)
    head = bytearray()
    for offset, data in segments:
        head.extend(b"\0" * (offset - len(head)))
        head.extend(data)
    return bytes(head), placed, end


def split_segments(bundle: Bundle, external: Mapping[str, External],
                   blobs: Mapping[str, Any] | None = None
                   ) -> tuple[Sequence[tuple[int, Any]], list[tuple[int, str]], int]:
    """`split_bundle` with the head as segments (as `bundle_segments` gives them: each large
    weight a segment of its own, read when it is taken), so that a deployable bundle is never
    whole in memory and its weights are the blobs the quantized bundle's are. `blobs`, when
    given: what stands for each external part, placed after the head's segments at its offset
    (a stored blob of a file of parts)."""
    extra = [({"name": name}, part) for name, part in sorted(external.items())]
    for name, _ in sorted(external.items()):
        _check_part_name(name)
    header, entries, offsets = _layout([*_entries(bundle), *extra], bundle.meta)
    inline = len(entries) - len(extra)
    segments, head_end = _segments(header, entries[:inline], offsets[:inline])
    placed = [(offset, entry["name"]) for (entry, _), offset in zip(
        entries[inline:], offsets[inline:], strict=True)]
    if blobs is not None:
        segments.runs.extend((offset, blobs[name]) for offset, name in placed)
    end = offsets[-1] + entries[-1][1].size if extra else head_end  # type: ignore[union-attr]
    return segments, placed, end


Entry = tuple[dict[str, Any], "bytes | External | StreamedPart"]


def _entries(bundle: Bundle) -> list[Entry]:
    entries: list[Entry] = [
        ({"name": "graph.json"}, canonical_json(bundle.model.graph.to_json())),
    ]
    weights = bundle.model.weights
    streamed = getattr(weights, "streamed", None)  # a mapping that keeps weights in files
    for i, name in enumerate(sorted(weights)):
        source: Streamed | None = streamed(name) if streamed is not None else None
        if source is not None:
            entries.append(({"name": f"weights/{i}", "tensor": name, "dtype": source.dtype,
                             "shape": list(source.shape)}, _streamed_part(source)))
            continue
        a = np.asarray(weights[name], order="C")  # a 0-d weight stays 0-d
        if a.dtype.byteorder == ">":
            a = a.astype(a.dtype.newbyteorder("<"))
        entry = {"name": f"weights/{i}", "tensor": name, "dtype": a.dtype.name,
                 "shape": list(a.shape)}
        # a large one stays an array until written, as a streamed one stays in its file
        entries.append((entry, _streamed_part(ArrayPart(a)) if a.nbytes >= OWN_PART
                        else a.tobytes()))
    if bundle.opdefs is not None:
        entries.append(({"name": "opdefs.json"}, canonical_json(bundle.opdefs)))
    for name, data in sorted(bundle.parts.items()):
        _check_part_name(name)
        if isinstance(data, FilePart):  # a large one a segment of its own, as its bytes were
            entries.append(({"name": name}, _streamed_part(data) if data.size >= OWN_PART
                            else data.read()))
            continue
        entries.append(({"name": name}, bytes(data)))
    return entries


def _streamed_part(source: Streamed) -> StreamedPart:
    known = getattr(source, "sha256", None)  # a bundle's part: its digest checked when read
    if known is not None:
        return StreamedPart(source, known)
    digest = hashlib.sha256()
    for piece in source.chunks():
        digest.update(piece)
    return StreamedPart(source, digest.hexdigest())


def _check_part_name(name: str) -> None:
    if not _safe_name(name) or name in ("graph.json", "opdefs.json") \
            or name.startswith("weights/"):
        raise ValueError(f"bad part name {name!r}")


def _layout(entries: list[Entry], meta: dict[str, Any]
            ) -> tuple[bytes, list[Entry], list[int]]:
    """(prefix and header, the entries, each one's offset)."""
    index = [{**e, "size": d.size, "sha256": d.sha256} if isinstance(d, (External, StreamedPart))
             else {**e, "size": len(d), "sha256": hashlib.sha256(d).hexdigest()}
             for e, d in entries]
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
    return _PREFIX.pack(MAGIC, VERSION, len(header)) + header, entries, offsets


def _safe_name(name: str) -> bool:
    return bool(_PART_NAME.match(name)) and not set(name.split("/")) & {".", ".."}


def _align(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


class Reader(Protocol):
    """Byte ranges of a bundle file that is not in memory whole (a file of parts in the
    store: udo_build.store.parts.PartsReader)."""

    size: int

    def read(self, offset: int, size: int) -> bytes: ...


class MemoryReader:
    """A `Reader` of bytes in memory."""

    def __init__(self, data: bytes) -> None:
        self.view = memoryview(data)
        self.size = len(data)

    def read(self, offset: int, size: int) -> memoryview:  # type: ignore[override]
        return self.view[offset:offset + size]


class LazyParts(Mapping[str, bytes]):
    """The further parts of a bundle (encodings, cache records, ...), each read and verified
    when it is first asked for: choosing a record reads the header's rows, loading it reads
    that record only. Small parts are kept once read; a part of OWN_PART bytes or more is read
    again when asked for again (a record, loaded once, is not held twice)."""

    def __init__(self, reader: Reader, file: str) -> None:
        self._reader = reader
        self._file = file
        self._index: dict[str, tuple[int, int, str, int]] = {}
        self._read: dict[str, bytes] = {}

    def add(self, name: str, offset: int, size: int, digest: str, i: int) -> None:
        self._index[name] = (offset, size, digest, i)

    def __getitem__(self, name: str) -> bytes:
        if name in self._read:
            return self._read[name]
        offset, size, digest, i = self._index[name]
        data = bytes(_verified(self._reader, name, offset, size, digest, i, self._file))
        if size < OWN_PART:  # a large one (a record) is the caller's to keep, or not
            self._read[name] = data
        return data

    def __contains__(self, name: object) -> bool:  # without reading the part
        return name in self._index

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def size_of(self, name: str) -> int:
        return self._index[name][1]

    def mapped(self, name: str) -> bytes | mmap.mmap:
        """A part of OWN_PART bytes or more whose store blob is kept raw as a read-only map
        of that file (checked here; its pages given back after, udo_build.ir.weights), so
        that what reads it (a record, loaded by two graphs) holds no copy; any other part
        as `self[name]` gives it."""
        offset, size, digest, i = self._index[name]
        path = getattr(self._reader, "part_path", lambda *_: None)(offset, size) \
            if size >= OWN_PART else None
        if path is None:
            return self[name]
        with open(path, "rb") as fh:
            data = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
        _verified(MemoryReader(data), name, 0, size, digest, i, self._file)  # type: ignore
        release(data)
        return data


def read_bundle(data: bytes | Reader, file: str = "bundle") -> Bundle:
    """Parse and verify a bundle; a UserError names the part or field that is wrong. The graph,
    weights and op definitions are read and verified here; further parts when first used."""
    reader: Reader = data if hasattr(data, "read") else MemoryReader(data)  # type: ignore[assignment]
    header = _header(reader, file)
    parts = LazyParts(reader, file)
    model_parts: dict[str, bytes] = {}
    lazy = None if isinstance(reader, MemoryReader) else BundleWeights(reader, file)
    weights: dict[str, np.ndarray] = {}
    seen: set[str] = set()
    for i, entry in enumerate(header["parts"]):
        name, offset, size, digest = _part(entry, i, reader.size, file)
        tensor = entry.get("tensor") if name.startswith("weights/") else None
        if name in seen or tensor in weights:
            raise UserError(f"the bundle holds part {name} (or its tensor) twice", file=file,
                            field=f"parts[{i}].name")
        seen.add(name)
        if tensor is not None:
            blob = _verified(reader, name, offset, size, digest, i, file)
            weights[tensor] = _weight(blob, entry, i, file)
            if lazy is not None:  # checked; read again when first asked for
                lazy.add(tensor, (entry, offset, size, digest, i))
                weights[tensor] = blob = None  # type: ignore[assignment]
        elif name in ("graph.json", "opdefs.json"):
            model_parts[name] = bytes(_verified(reader, name, offset, size, digest, i, file))
        else:
            parts.add(name, offset, size, digest, i)
    if "graph.json" not in model_parts:
        raise UserError("the bundle has no graph.json part", file=file, field="parts")
    with bulk_building():  # a large graph.json is millions of small objects
        graph = Graph.from_json(_check_graph(_json_part(model_parts["graph.json"], "graph.json",
                                                        file), file))
    opdefs = None
    if "opdefs.json" in model_parts:
        opdefs = _check_opdefs(_json_part(model_parts["opdefs.json"], "opdefs.json", file), file)
    _check_records(header["meta"], parts, file)
    return Bundle(Model(graph, weights if lazy is None else lazy), opdefs,  # type: ignore[arg-type]
                  header["meta"], parts)


class BundleWeights(Mapping[str, np.ndarray]):
    """The weights of a bundle that is not in memory (a file of parts in the store), each
    checked when the bundle is read and read again when asked for: a weight of OWN_PART bytes
    or more is a fresh array each time, kept by no one but the caller (a step that reads every
    weight in turn holds one at a time; see udo_build.ir.weights), a smaller one is kept once
    read. `spec` tells a weight's dtype and shape without reading it. A copy made for another
    process (pickled) holds them all."""

    def __init__(self, reader: Reader, file: str) -> None:
        self._reader = reader
        self._file = file
        self._index: dict[str, tuple[dict[str, Any], int, int, str, int]] = {}
        self._read: dict[str, np.ndarray] = {}
        self._spilled: dict[str, BinaryIO] = {}
        self._total = 0

    def add(self, tensor: str, where: tuple[dict[str, Any], int, int, str, int]) -> None:
        self._index[tensor] = where
        self._total += where[2]

    @property
    def streams(self) -> bool:
        """Whether the weights stay in files (udo_build.ir.weights): STREAM_FROM bytes or more
        of them."""
        return self._total >= STREAM_FROM

    def __getitem__(self, tensor: str) -> np.ndarray:
        if tensor in self._read:
            return self._read[tensor]
        entry, offset, size, digest, i = self._index[tensor]
        if size >= OWN_PART and self.streams:
            return self._mapped(tensor)
        blob = _verified(self._reader, entry["name"], offset, size, digest, i, self._file)
        self._read[tensor] = _weight(blob, entry, i, self._file)
        return self._read[tensor]

    def _mapped(self, tensor: str) -> np.ndarray:
        """A large weight of a streaming bundle, mapped afresh from its store blob when that
        is kept raw, else from a temporary file its checked bytes were written to once."""
        entry, offset, size, digest, i = self._index[tensor]
        dtype, shape = self.spec(tensor)
        path = getattr(self._reader, "part_path", lambda *_: None)(offset, size)
        if path is not None:  # checked when the bundle was read
            return mapped(path, dtype, shape).astype(dtype, copy=False)
        if tensor not in self._spilled:
            blob = _verified(self._reader, entry["name"], offset, size, digest, i, self._file)
            self._spilled[tensor] = spill_file(_weight(blob, entry, i, self._file))
            del blob
        return from_file(self._spilled[tensor], dtype, shape)

    def spec(self, tensor: str) -> tuple[np.dtype, tuple[int, ...]]:
        """A weight's dtype and shape, as the header says (checked when the bundle was read)."""
        entry = self._index[tensor][0]
        return np.dtype(entry["dtype"]), tuple(entry["shape"])

    def __contains__(self, tensor: object) -> bool:  # without reading the weight
        return tensor in self._index

    def __iter__(self) -> Iterator[str]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    def __reduce__(self) -> tuple[Any, ...]:
        return dict, (dict(self.items()),)

    def streamed(self, tensor: str) -> Streamed | None:
        """A weight of OWN_PART bytes or more as a source for writing it into another bundle,
        read when it is written and not kept (see _entries); None for a smaller one."""
        entry, offset, size, digest, _ = self._index[tensor]
        if size < OWN_PART:
            return None
        return _StoredPart(self._reader, offset, size, digest, entry["dtype"],
                           tuple(entry["shape"]))


@dataclass(frozen=True)
class _StoredPart:
    """A weight part of a bundle read through a Reader, as a `Streamed` source."""

    reader: Reader
    offset: int
    size: int
    sha256: str
    dtype: str
    shape: tuple[int, ...]

    def chunks(self) -> Iterator[bytes]:
        yield self.read()

    def read(self) -> bytes:
        return bytes(self.reader.read(self.offset, self.size))


def _json_part(data: bytes, name: str, file: str) -> Any:
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise UserError(f"part {name} of the bundle is not valid JSON ({str(exc)[:80]})",
                        file=file, field=name) from None


def _check_graph(doc: Any, file: str) -> dict[str, Any]:
    """graph.json's fields and types, and no tensor of absurd size."""
    c = Check(file, "part graph.json of the bundle")
    doc = c.obj(doc, "graph.json")
    c.text(doc.get("name"), "graph.json.name")
    if "opset" in doc:
        c.whole(doc["opset"], "graph.json.opset", 1)
    for group in ("inputs", "outputs", "values"):
        given = doc.get(group, []) if group == "values" else doc.get(group)
        for i, t in enumerate(c.seq(given, f"graph.json.{group}")):
            _check_tensor(c, t, f"graph.json.{group}[{i}]")
    for i, node in enumerate(c.seq(doc.get("nodes"), "graph.json.nodes")):
        field = f"graph.json.nodes[{i}]"
        node = c.obj(node, field)
        for key in ("name", "op", *(("package",) if "package" in node else ())):
            c.text(node.get(key), f"{field}.{key}")
        for key in ("inputs", "outputs"):
            for j, name in enumerate(c.seq(node.get(key), f"{field}.{key}")):
                c.text(name, f"{field}.{key}[{j}]")
        c.obj(node.get("attrs") or {}, f"{field}.attrs")
    return doc


def _check_tensor(c: Check, t: Any, field: str) -> None:
    t = c.obj(t, field)
    c.text(t.get("name"), f"{field}.name")
    c.text(t.get("dtype"), f"{field}.dtype")
    shape = t.get("shape")
    if shape is None:
        return
    for j, d in enumerate(c.seq(shape, f"{field}.shape")):
        if not isinstance(d, str):
            c.whole(d, f"{field}.shape[{j}]", 0)
    problem = tensor_problem([d for d in shape if not isinstance(d, str)])
    if problem is not None:
        raise c.fail(f"{field}.shape", problem)


def _check_records(meta: dict[str, Any], parts: Mapping[str, bytes], file: str) -> None:
    """The rows of meta.records (the records a run chooses from) and the parts they name."""
    c = Check(file, "the bundle's header")
    for i, row in enumerate(c.seq(meta.get("records") or [], "meta.records")):
        field = f"meta.records[{i}]"
        row = c.obj(row, field)
        for key in ("arch", "part", "name", *(k for k in ("identifier", "precision", "dims",
                                                         "outputs") if k in row)):
            c.text(row.get(key), f"{field}.{key}")
        if row["part"] not in parts:
            raise c.fail(f"{field}.part", f"names part {row['part']}, which the bundle lacks")
        if isinstance(row.get("vtcm_mb"), bool) or not isinstance(row.get("vtcm_mb"),
                                                                    (int, float)):
            raise c.fail(f"{field}.vtcm_mb", "expected a number")
        for key in ("size", "level"):
            if key in row:
                c.whole(row[key], f"{field}.{key}", 0)
        for j, name in enumerate(c.seq(row.get("output_tensors") or [],
                                       f"{field}.output_tensors")):
            c.text(name, f"{field}.output_tensors[{j}]")
        dims = c.obj(row.get("input_dimensions") or {}, f"{field}.input_dimensions")
        for name, shape in dims.items():
            c.wholes(shape, f"{field}.input_dimensions.{name}", 0)


def _check_opdefs(doc: Any, file: str) -> dict[str, Any]:
    c = Check(file, "part opdefs.json of the bundle")
    doc = c.obj(doc, "opdefs.json")
    for key in ("name", "domain"):
        c.text(doc.get(key), f"opdefs.json.{key}")
    for i, member in enumerate(c.seq(doc.get("members", []), "opdefs.json.members")):
        for key in ("name", "domain"):  # a set of packages: each one's (opdef.model.PackageId)
            c.text(c.obj(member, f"opdefs.json.members[{i}]").get(key),
                   f"opdefs.json.members[{i}].{key}")
    return doc


def load_bundle(path: str | Path) -> Bundle:
    """Read a bundle file. It is memory-mapped, not read: its weights are views of the map
    (the page cache's bytes, no second copy), checked against their digests here."""
    from ..source import read_limited

    try:
        with open(path, "rb") as fh:
            if not stat.S_ISREG(os.fstat(fh.fileno()).st_mode) or \
                    os.fstat(fh.fileno()).st_size == 0:
                return read_bundle(read_limited(path, MAX_UNMAPPED, "bundle"), str(path))
            mapped = mmap.mmap(fh.fileno(), 0, access=mmap.ACCESS_READ)
    except OSError:  # missing, a folder, unreadable: read_limited says which
        return read_bundle(read_limited(path, MAX_UNMAPPED, "bundle"), str(path))
    return read_bundle(MemoryReader(mapped), str(path))  # type: ignore[arg-type]


def _header(reader: Reader, file: str) -> dict[str, Any]:
    prefix = bytes(reader.read(0, _PREFIX.size))
    if len(prefix) < _PREFIX.size or prefix[:8] != MAGIC:
        raise UserError("not a udo-build bundle (wrong magic bytes)", file=file,
                        hint=f"bundles are written by 'udo-build convert' ({EXTENSION})")
    _, version, length = _PREFIX.unpack_from(prefix)
    if version != VERSION:
        raise UserError(f"bundle format version {version} is not supported (this udo-build "
                        f"reads version {VERSION})", file=file)
    if length > MAX_HEADER or _PREFIX.size + length > reader.size:
        raise UserError("the bundle is truncated or its header is corrupt", file=file)
    try:
        header = json.loads(bytes(reader.read(_PREFIX.size, length)))
    except (ValueError, RecursionError):
        raise UserError("the bundle's header is not valid JSON", file=file) from None
    if not isinstance(header, dict) or header.get("format") != FORMAT:
        raise UserError("the bundle's header is not a udo-build bundle header", file=file)
    c = Check(file, "the bundle's header")
    c.seq(header.get("parts"), "parts")
    header["meta"] = c.obj(header.get("meta") or {}, "meta")
    c.obj(header["meta"].get("quantization") or {}, "meta.quantization")
    return header


def _part(entry: Any, i: int, total: int, file: str) -> tuple[str, int, int, str]:
    """A part entry of the header, checked: (name, offset, size, sha256)."""
    c = Check(file, "the bundle's header")
    field = f"parts[{i}]"
    entry = c.obj(entry, field)
    name = c.text(entry.get("name"), f"{field}.name")
    offset = c.whole(entry.get("offset"), f"{field}.offset", _PREFIX.size)
    size = c.whole(entry.get("size"), f"{field}.size", 0)
    digest = c.text(entry.get("sha256"), f"{field}.sha256")
    if not _safe_name(name):
        raise c.fail(f"{field}.name", f"the bundle names a part {name!r}, which is not allowed")
    if offset + size > total:
        raise UserError(f"part {name} lies outside the bundle (truncated file?)", file=file,
                        field=f"{field}.size")
    if name.startswith("weights/"):
        c.text(entry.get("tensor"), f"{field}.tensor")
    return name, offset, size, digest


def _verified(reader: Reader, name: str, offset: int, size: int, digest: str, i: int,
              file: str) -> bytes | memoryview:
    blob = reader.read(offset, size)
    if hashlib.sha256(blob).hexdigest() != digest:
        raise UserError(f"part {name} of the bundle is corrupt (digest mismatch)", file=file,
                        field=f"parts[{i}].sha256")
    return blob


def _weight(blob: bytes | memoryview, entry: dict[str, Any], i: int, file: str) -> np.ndarray:
    c = Check(file, f"weight {entry['tensor']!r} of the bundle")
    dtype = c.dtype(entry.get("dtype"), f"parts[{i}].dtype")
    shape = tuple(c.wholes(entry.get("shape"), f"parts[{i}].shape", 0))
    problem = tensor_problem(shape, dtype.itemsize)
    if problem is not None:
        raise c.fail(f"parts[{i}].shape", problem)
    if int(np.prod(shape, dtype=np.int64)) * dtype.itemsize != len(blob):
        raise c.fail(f"parts[{i}].shape", f"shape {list(shape)} of {dtype.name} does not "
                     f"fit its {len(blob)} bytes")
    array = np.frombuffer(blob, dtype=dtype.newbyteorder("<")).reshape(shape)
    return array.astype(dtype, copy=False)
