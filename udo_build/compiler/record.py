"""The offline cache record: a versioned, zstd-compressed serialization of a prepared graph.

    bytes 0-7    magic b"UDOHTPR\\0"
    bytes 8-11   format version (uint32, little-endian)
    bytes 12-15  header length H (uint32, little-endian)
    bytes 16..   header: canonical JSON {"format", "version", "key", "sizes", "payload"}
    then         zstd frame of the payload

The header holds the key fields (identifier = the model's name, arch, VTCM, level, input
dimensions, outputs, precision, compiler version) and the sizes, so that listing records reads
no payload. The payload is the prepared graph as canonical JSON (values, ops with their chosen
implementations, the memory plan, the rules that fired) followed by the constants (raw
little-endian arrays at 64-byte aligned offsets); the header names its size and sha256.

Constants are held as the device holds them. In an int8 record a constant with parameter
encodings (the value's "enc": [bitwidth, scale, offset, signed], one or one per channel, block
encodings with their blocks as a fifth element: udo_build.ir.encodings.to_list) is stored
quantized with them: int8 weights (int16 for 16-bit ones), int32 biases (or their
bias_bitwidth's type), 4-bit weights packed two per byte, low nibble first (const "bits": 4;
LPBQ weights as their 4-bit integers, the block integers in their encodings);
a per-channel constant's "axis" names the axis of its shape the encodings index (the one the
integer path's kernels quantize along, expand.param_axes). Other constants (float fallback,
shapes, indices) stay as they are. In an fp16 record float32 constants are stored as float16
(and computed as execute.Runner says); the internal fp32 keeps float32.
Values and ops are numbered in topological order, JSON is canonical, the compression level
fixed: equal content, equal bytes. `read_record` checks magic, version, header, sizes, every
field of the payload and its digest in bounded memory (record_read.py), and refuses a bad file
with a UserError naming the field that is wrong.

Format versions: 2 holds one graph (as above); 3 holds several graphs of one model, each
prepared as a record of its own, their constants stored once (record_graphs.py:
`combine_records` writes it, `combine_records_to` to a file, `read_record(data, file, graph)`
reads one graph of it). A record of one graph is still written as version 2 (its bytes, and
every key after it, unchanged).
4 and 5 are 2 and 3 for weights quantized per block: their block scales (an LLM's millions)
are among the constants, not JSON numbers (record_blocks.py); a record without block weights
is written as 2 or 3 as before. This reader reads all four.

A large model's record (its constants STREAM_FROM bytes or more, udo_build.ir.weights) is
written constant by constant: each stored form spilled to a file and compressed from there,
its float source's pages given back; `Compiled.record(mapped=True)` (an online preparation)
writes the whole record to a temporary file and maps it, `Compiled.write_record` (the prepare
step) to a file it names, so that no step holds a record's bytes; reading a mapped record gives
its compressed pages back as it decompresses them (record_read.py).
"""

from __future__ import annotations

import hashlib
import json
import mmap
import shutil
import struct
import tempfile
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from ..canonical import canonical_json
from ..errors import UserError
from ..ir.weights import release, spill, streams
from ..rewrite.graph import NONE, Op, OpGraph
from .record_blocks import enc_json, grid_of
from .record_graphs import check_graphs, pool, read_graphs
from .record_read import (
    CHUNK,
    KEEP,
    MAX_GRAPH_JSON,
    Constants,
    PayloadStream,
    align,
    build_graph,
    check_header,
    pack4,
    read_body,
)

MAGIC = b"UDOHTPR\x00"
FORMAT = "udo-build/htp-record"
# 2: constants as the device holds them (quantized with their encodings, fp16 in fp16 records)
VERSION = 2  # a record of one graph
# 3: several graphs of one model, their constants stored once (record_graphs.py); a record of
# one graph is still written as version 2 (its bytes, and so every key after it, unchanged)
GRAPHS_VERSION = 3
# 4 and 5: 2 and 3 with block scales in the payload's constants, not in its JSON
# (record_blocks.py); a record without block encodings is still written as 2 or 3
BLOCKS_VERSION, GRAPHS_BLOCKS_VERSION = 4, 5
GRAPHS_VERSIONS = (GRAPHS_VERSION, GRAPHS_BLOCKS_VERSION)
VERSIONS = (VERSION, GRAPHS_VERSION, BLOCKS_VERSION, GRAPHS_BLOCKS_VERSION)
EXTENSION = ".udr"
LEVEL = 3
_PREFIX = struct.Struct("<8sII")


GRAPH_FIELDS = ("values", "ops", "tensors")  # what build_graph reads of a record's payload


@dataclass
class Record:
    key: dict[str, Any]
    sizes: dict[str, Any]
    # the payload's JSON, checked; a large record's (constants over KEEP bytes) without what
    # build_graph read (GRAPH_FIELDS) once the graph is built: the graph holds it
    body: dict[str, Any]
    constants: Constants  # read when the graph is first asked for
    size: int = 0  # bytes of the record file

    @cached_property
    def graph(self) -> OpGraph:
        graph = build_graph(self.body, *self.constants.arrays_and_grids())
        release(self.constants.compressed)  # a mapped record's pages, read: given back
        if self.constants.kept is None:  # a large record's description, now the graph's
            self.body = {k: v for k, v in self.body.items() if k not in GRAPH_FIELDS}
        return graph

    @property
    def precision(self) -> str:
        return str(self.key["precision"])

    def io(self) -> Any:
        from .execute import IO

        io = self.body["io"]
        return IO({k: tuple(v) for k, v in io["inputs"].items()},
                  {k: tuple(v) for k, v in io["outputs"].items()}, dict(io.get("dtypes", {})))

    def runner(self, packages: Any = None) -> Any:
        """A runner of the prepared graph (execute.Runner)."""
        from .execute import Runner

        return Runner(self.graph, self.io(), self.precision, packages,
                      self.body.get("quantization") or {})


def write_record(key: dict[str, Any], graph: OpGraph, body: dict[str, Any],
                 sizes: dict[str, Any], mapped: bool = False) -> bytes | mmap.mmap:
    """The record's bytes. `body` holds what else the payload says (choices, memory, log) by
    value id / op id of `graph`; they are renumbered with the graph. `mapped`: in a temporary
    file, mapped (pack_record_mapped)."""
    doc, arrays, blocks = _payload(graph, body, str(key["precision"]))
    pack = pack_record_mapped if mapped else pack_record
    return pack({"key": key, "sizes": sizes}, canonical_json(doc), arrays,
                BLOCKS_VERSION if blocks else VERSION)


def write_record_to(out: BinaryIO, key: dict[str, Any], graph: OpGraph, body: dict[str, Any],
                    sizes: dict[str, Any]) -> int:
    """`write_record`'s bytes written to the file `out` (at its position); their count. The
    record is never in memory: a large model's (hundreds of MB) is not held, twice, by the
    step that prepares it."""
    doc, arrays, blocks = _payload(graph, body, str(key["precision"]))
    start = out.tell()
    pack_record_to(out, {"key": key, "sizes": sizes}, canonical_json(doc), arrays,
                   BLOCKS_VERSION if blocks else VERSION)
    return out.tell() - start


def pack_record(header: dict[str, Any], text: bytes, arrays: list[np.ndarray],
                version: int) -> bytes:
    """A record's bytes: `header` (its key and sizes) completed with the payload's sizes and
    digest; the payload is the JSON `text` and then the `arrays` (uint8 or little-endian), each
    at the next 64-byte aligned offset, as the JSON's offsets say."""
    compressed = bytearray()  # grown in place: the record is in memory twice at most
    head = _pack(header, text, arrays, version, compressed.extend)
    return b"".join((head, compressed))


def pack_record_mapped(header: dict[str, Any], text: bytes, arrays: list[np.ndarray],
                       version: int) -> mmap.mmap:
    """`pack_record`'s bytes in an unlinked temporary file, mapped (a large model's record,
    prepared online: neither it nor its constants held in memory)."""
    with tempfile.TemporaryFile(prefix="udo-build-record-") as out:
        pack_record_to(out, header, text, arrays, version)
        out.flush()
        return mmap.mmap(out.fileno(), 0, access=mmap.ACCESS_READ)


def pack_record_to(out: BinaryIO, header: dict[str, Any], text: bytes,
                   arrays: list[np.ndarray], version: int) -> bytes:
    """`pack_record`'s bytes written to `out` (its compressed payload through a temporary
    file, never in memory); returns its prefix and header (what `read_header` reads)."""
    with tempfile.TemporaryFile(prefix="udo-build-record-") as payload:
        head = _pack(header, text, arrays, version, payload.write)
        out.write(head)
        payload.seek(0)
        shutil.copyfileobj(payload, out, CHUNK)
    return head


def _pack(header: dict[str, Any], text: bytes, arrays: list[np.ndarray], version: int,
          write: Callable[[bytes], Any]) -> bytes:
    """The record's prefix and header; its compressed payload given to `write`."""
    import zstandard

    if len(text) > MAX_GRAPH_JSON:  # what no reader would take is not written
        raise UserError(f"the cache record's graph description is {len(text) / 2**20:.0f} MiB, "
                        f"over the {MAX_GRAPH_JSON / 2**20:.0f} MiB a record may hold",
                        hint="per-block weight encodings take a number per block there: "
                             "larger blocks (quantize.weights_block_size), or a model in parts "
                             "(prepare.max_record_bytes)")
    chunks: list[Any] = [(struct.pack("<Q", len(text)), None), (text, None)]
    length = 8 + len(text)
    for array in arrays:
        chunks += [(b"\0" * (align(length) - length), None),
                   (memoryview(array).cast("B"), array)]
        length = align(length) + array.nbytes
    digest = hashlib.sha256()
    compressor = zstandard.ZstdCompressor(level=LEVEL, write_content_size=True,
                                          write_checksum=True).compressobj(size=length)
    size = 0
    for chunk, array in chunks:
        digest.update(chunk)
        piece = compressor.compress(chunk)
        size += len(piece)
        write(piece)
        release(array)  # a spilled constant (a large model's): its pages given back
    piece = compressor.flush()
    size += len(piece)
    write(piece)
    constants = length - align(8 + len(text)) if arrays else 0
    head = canonical_json({
        **header, "format": FORMAT, "version": version,
        "sizes": {**header["sizes"], "graph_json": len(text), "constants": constants,
                  "constant_bytes": sum(a.nbytes for a in arrays),
                  "payload": length, "compressed": size},
        "payload": {"sha256": digest.hexdigest(), "codec": "zstd"},
    })
    return _PREFIX.pack(MAGIC, version, len(head)) + head


def _numbering(graph: OpGraph) -> tuple[list[Op], dict[int, int], dict[int, int]]:
    order = graph.order()
    values: dict[int, int] = {}
    for vid in graph.inputs:
        values.setdefault(vid, len(values))
    for op in order:
        for vid in (*op.inputs, *op.outputs):
            if vid != NONE:
                values.setdefault(vid, len(values))
    for _, vid in graph.outputs:
        values.setdefault(vid, len(values))
    return order, values, {op.id: i for i, op in enumerate(order)}


def _payload(graph: OpGraph, body: dict[str, Any], precision: str
             ) -> tuple[dict[str, Any], list[np.ndarray], bool]:
    """The payload's JSON, its constants (little-endian, C order), offsets relative to the
    first constant, and whether it holds block scales among them (record_blocks.py)."""
    from .expand import param_axes

    order, vnum, onum = _numbering(graph)
    axes = param_axes(graph) if precision == "int8" else {}
    arrays: list[np.ndarray] = []
    offset = 0
    values = []
    large = streams(graph.consts)  # a large model's: each stored constant spilled to a file
    blocks = False
    for vid, n in vnum.items():
        t = graph.types[vid]
        grid = grid_of(t.enc) if vid in graph.consts else None
        entry: dict[str, Any] = {"id": n, "name": graph.names[vid], **t.to_json()} \
            if grid is None else {"id": n, "name": graph.names[vid], "shape": list(t.shape),
                                  "dtype": t.dtype, "enc": enc_json(t.enc, binary=True)}
        if vid in graph.consts:
            a, entry["const"] = stored(graph, vid, precision, axes)
            a = a.astype(a.dtype.newbyteorder("<"), copy=False)
            if large:
                a = spill(a)
                release(graph.consts[vid])
            offset = align(offset)
            entry["const"]["offset"] = offset
            arrays.append(a)
            offset += a.nbytes
        if grid is not None:
            offset, blocks = align(offset), True
            entry["block_scales"] = {"dtype": grid.dtype.name, "shape": list(grid.shape),
                                     "offset": offset}
            arrays.append(grid)
            offset += grid.nbytes
        values.append(entry)
    ops = [{"id": onum[op.id], "op": op.op, "package": op.package, "layout": op.layout,
            "inputs": [vnum[v] if v != NONE else NONE for v in op.inputs],
            "outputs": [vnum[v] for v in op.outputs], "attrs": op.kwargs,
            "model": [list(s) for s in op.model], "origin": op.origin} for op in order]
    per_op = body.get("ops", {})
    for op, entry in zip(order, ops, strict=True):
        entry.update(per_op.get(op.id, {}))
    memory = {vnum[v]: p for v, p in body.get("tensors", {}).items() if v in vnum}
    doc = {**{k: v for k, v in body.items() if k not in ("ops", "tensors")},
           "name": graph.name, "inputs": [vnum[v] for v in graph.inputs],
           "outputs": [{"name": n, "value": vnum[v]} for n, v in graph.outputs],
           "values": values, "ops": ops,
           "tensors": [{"value": k, **v} for k, v in sorted(memory.items())]}
    return doc, arrays, blocks


def stored(graph: OpGraph, vid: int, precision: str, axes: dict[int, int | None]
           ) -> tuple[np.ndarray, dict[str, Any]]:
    """A constant as the record holds it (see the module docstring), and its JSON entry."""
    from ..runtime.integer.fixed import quantize_along

    a = np.asarray(graph.consts[vid], order="C")  # a 0-d constant stays 0-d
    encs = graph.types[vid].enc
    axis = axes.get(vid) if len(encs) > 1 else 0
    if encs and a.dtype.kind == "f" and axis is not None and (
            len(encs) == 1 or a.shape[axis] == len(encs)):
        q = quantize_along(a, encs, axis)
        entry: dict[str, Any] = {"dtype": q.dtype.name, "shape": list(q.shape)}
        if len(encs) > 1:
            entry["axis"] = axis
        if encs[0].bitwidth == 4:
            return pack4(q), {**entry, "bits": 4}
        return q, entry
    if precision == "fp16" and a.dtype == np.float32:
        a = a.astype(np.float16)
    return a, {"dtype": a.dtype.name, "shape": list(a.shape)}


def read_header(data: bytes, file: str = "record") -> tuple[dict[str, Any], int]:
    """The record's header, checked (fields, types, sizes), and where its payload starts."""
    if len(data) < _PREFIX.size or data[:8] != MAGIC:
        raise UserError("not a udo-build cache record (wrong magic bytes)", file=file,
                        hint=f"records ({EXTENSION}) are written by the prepare step")
    _, version, length = _PREFIX.unpack_from(data)
    if version not in VERSIONS:
        raise UserError(f"cache record format version {version} is not supported (this "
                        f"udo-build reads versions {', '.join(map(str, VERSIONS))})", file=file)
    end = _PREFIX.size + length
    try:
        header = json.loads(data[_PREFIX.size:end]) if end <= len(data) else None
    except (ValueError, UnicodeDecodeError, RecursionError):
        header = None
    if not isinstance(header, dict) or header.get("format") != FORMAT \
            or header.get("version") != version:
        raise UserError("the cache record's header is truncated or corrupt", file=file)
    check_header(header, file)
    if version in GRAPHS_VERSIONS:
        check_graphs(header, file)
    return header, end


def read_record(data: bytes, file: str = "record", graph: str | None = None) -> Record:
    """Parse and verify a record (see the module docstring); of a multi-graph record
    (record_graphs.py), its graph `graph`. Memory stays bounded whatever the file declares:
    the payload is decompressed in chunks, never past its declared size, its JSON is checked
    before any constant is read, and constants over `KEEP` bytes in all are read again
    (verified) when the graph is first asked for."""
    header, end = read_header(data, file)
    sizes = header["sizes"]
    if len(data) - end != sizes["compressed"]:
        raise UserError("the cache record is truncated (its payload size does not match)",
                        file=file, field="sizes.compressed")
    compressed = memoryview(data)[end:]
    stream = PayloadStream(compressed, sizes["payload"], file)
    if header["version"] in GRAPHS_VERSIONS:
        entry, layout, kept = read_graphs(header, stream, file, graph)
        constants = Constants(layout, kept, compressed, sizes["payload"], file)
        return Record({**entry["key"], "graph": graph}, {**sizes, **entry["sizes"]},
                      entry["body"], constants, len(data))
    if graph is not None:
        raise UserError(f"the cache record holds one graph, it has no graph {graph!r}",
                        file=file, hint="records of several graphs come of prepare.matrix.graphs")
    body, layout = read_body(stream, sizes, file)
    kept = stream.read_rest(keep=layout.total <= KEEP)
    if stream.digest() != header["payload"]["sha256"]:
        raise UserError("the cache record's payload is corrupt (digest mismatch)", file=file,
                        field="payload.sha256")
    constants = Constants(layout, kept, compressed, sizes["payload"], file)
    return Record(header["key"], sizes, body, constants, len(data))


def combine_records(named: Sequence[tuple[str, bytes | Callable[[], bytes]]],
                    file: str = "graphs") -> bytes:
    """One multi-graph record (record_graphs.py) of these one-graph records (graph name, its
    bytes or what reads them), each distinct constant stored once. The records are read one at
    a time, in the order of their names: what stays is their JSON and the distinct constants."""
    return pack_record(*_combined(named, file))


def combine_records_to(named: Sequence[tuple[str, bytes | Callable[[], bytes]]], path: Path,
                       file: str = "graphs") -> bytes:
    """`combine_records`' bytes written to the file `path` (an LLM's record is hundreds of
    megabytes: not held in memory); returns its prefix and header (`read_header` reads it)."""
    combined = _combined(named, file)
    with open(path, "wb") as out:
        return pack_record_to(out, *combined)


def _combined(named: Sequence[tuple[str, bytes | Callable[[], bytes]]], file: str
              ) -> tuple[dict[str, Any], bytes, list[np.ndarray], int]:
    """What `pack_record` packs of the combined records: header, JSON, constants, version."""
    names = [name for name, _ in named]
    if len(set(names)) != len(names) or not names:
        raise ValueError(f"graph names must be distinct and at least one: {names}")

    def records() -> Iterator[tuple[str, Record]]:
        for name, data in sorted(named, key=lambda pair: pair[0]):
            yield name, read_record(data if isinstance(data, bytes) else data(),
                                    f"{file}: graph {name}")

    header, text, arrays, blocks = pool(records(), file)
    return header, text, arrays, GRAPHS_BLOCKS_VERSION if blocks else GRAPHS_VERSION


def record_keys(header: dict[str, Any]) -> list[tuple[str | None, dict[str, Any]]]:
    """(graph name, key) of each graph of a checked record: (None, its key) for a one-graph
    record, each graph's name and own key for a multi-graph one."""
    if header.get("version") not in GRAPHS_VERSIONS:
        return [(None, header["key"])]
    return [(graph["name"], graph["key"]) for graph in header["graphs"]]


def summaries(header: dict[str, Any], size: int) -> list[dict[str, Any]]:
    """A record's rows of the "Cache Info" table: one, or one per graph of a multi-graph
    record (each with its `graph` name; `size` is the record's, shared)."""
    return [{**summary({"key": key}, size), **({"graph": graph} if graph else {})}
            for graph, key in record_keys(header)]


def summary(header: dict[str, Any], size: int) -> dict[str, Any]:
    """A record's row of the "Cache Info" table (keys of `udo-build info`)."""
    key = header["key"]
    dims = key.get("input_dimensions") or {}
    return {"name": key.get("name", ""), "identifier": key.get("identifier", ""), "size": size,
            "level": key.get("optimization_level"), "arch": key.get("arch"),
            "vtcm_mb": key.get("vtcm_mb"),
            "dims": ";".join(f"{k}={'x'.join(map(str, v))}" for k, v in dims.items()),
            "outputs": ",".join(key.get("output_tensors", []))}
