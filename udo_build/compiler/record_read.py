"""Reading a cache record without trusting it: every field checked, memory bounded.

A record's header declares the payload's size; the zstd frame must declare the same size and a
window of at most `MAX_WINDOW` bytes, and is decompressed in chunks, never past that size. The
payload's JSON (at most `MAX_GRAPH_JSON` bytes) is read and checked first: types, ids, value
references, the constants' layout, which must fill the payload exactly. Only then are the
constants read: kept when they total at most `KEEP` bytes, otherwise hashed and dropped, and
read again into their arrays when the graph is first asked for (then each spilled to a file
and mapped, udo_build.ir.weights). A crafted record thus costs at most the JSON plus `KEEP` plus
the zstd window, whatever sizes it declares.

A constant is read as it is stored (record.py): quantized ones as their integers (4-bit ones
unpacked, `unpack4`), fp16 ones as float16; a packed constant must have 4-bit encodings and a
per-channel one as many encodings as its axis has indices.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import re
import struct
from collections.abc import Iterator
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..errors import UserError
from ..ir.weights import PassedPages, spill
from ..rewrite.graph import ANY, BHWC, MODEL, NONE, Op, OpGraph, TType, frozen_attrs
from ..schema_problems import Check
from ..source import tensor_problem
from .ops import HTP
from .record_blocks import check_entry, checked_grid, with_scales

ALIGN = 64
MAX_PAYLOAD = 8 << 30
MAX_GRAPH_JSON = 512 << 20  # formats 2 and 3: a 1.1B decoder's LPBQ block scales, 133 MiB
MAX_WINDOW = 1 << 25  # the writer's level 3 uses 2 MiB
KEEP = 64 << 20
CHUNK = 1 << 20
_SHA256 = re.compile(r"[0-9a-f]{64}\Z")


def align(n: int) -> int:
    return -(-n // ALIGN) * ALIGN


def check_header(header: dict[str, Any], file: str) -> None:
    """The fields of a record header that readers use, with their types and limits."""
    c = Check(file, "the cache record's header")
    check_key(c, header.get("key"), "key")
    sizes = c.obj(header.get("sizes"), "sizes")
    c.whole(sizes.get("payload"), "sizes.payload", 8, MAX_PAYLOAD)
    c.whole(sizes.get("compressed"), "sizes.compressed", 0)
    c.whole(sizes.get("graph_json"), "sizes.graph_json", 0, MAX_GRAPH_JSON)
    for name in ("constants", "constant_bytes", "ops", "peak_vtcm_bytes"):
        if name in sizes:
            c.whole(sizes[name], f"sizes.{name}", 0)
    payload = c.obj(header.get("payload"), "payload")
    if payload.get("codec") != "zstd":
        raise c.fail("payload.codec", f"codec {payload.get('codec')!r} is not zstd")
    if not _SHA256.match(c.text(payload.get("sha256"), "payload.sha256")):
        raise c.fail("payload.sha256", "not a sha256 digest (64 lowercase hex digits)")


def check_key(c: Check, key: Any, field: str) -> None:
    """A record's key: the fields readers use, with their types."""
    key = c.obj(key, field)
    c.text(key.get("precision"), f"{field}.precision")
    for name in ("name", "identifier", "arch", "compiler"):
        if name in key:
            c.text(key[name], f"{field}.{name}")
    dims = c.obj(key.get("input_dimensions") or {}, f"{field}.input_dimensions")
    for name, shape in dims.items():
        c.wholes(shape, f"{field}.input_dimensions.{name}", 0)
    for i, name in enumerate(c.seq(key.get("output_tensors", []), f"{field}.output_tensors")):
        c.text(name, f"{field}.output_tensors[{i}]")


class PayloadStream:
    """The decompressed payload, read in order, hashed, never past its declared size."""

    def __init__(self, compressed: memoryview, declared: int, file: str) -> None:
        import zstandard

        self.file, self.declared, self.done = file, declared, 0
        self.hash = hashlib.sha256()
        try:
            frame = zstandard.get_frame_parameters(compressed)
        except zstandard.ZstdError as exc:
            raise self._corrupt(f"not a zstd frame ({exc})") from None
        if frame.content_size != declared:
            raise self._corrupt(f"the zstd frame holds {frame.content_size} bytes, the header "
                                f"says {declared}")
        if frame.window_size > MAX_WINDOW:
            raise self._corrupt(f"the zstd frame asks for a {frame.window_size}-byte window, "
                                f"over the limit of {MAX_WINDOW}")
        decompressor = zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW)
        source: Any = compressed
        if isinstance(compressed.obj, mmap.mmap):  # a mapped record: read, then given back
            source = PassedPages(compressed)
        self.reader = decompressor.stream_reader(source, read_size=CHUNK)

    def _corrupt(self, message: str) -> UserError:
        return UserError(f"the cache record's payload is corrupt: {message}", file=self.file,
                         field="payload")

    def readinto(self, buffer: memoryview) -> None:
        """Fill `buffer` (bytes) from the payload."""
        import zstandard

        if self.done + len(buffer) > self.declared:
            raise self._corrupt("its parts run past its declared size")
        filled = 0
        try:
            while filled < len(buffer):
                n = self.reader.readinto(buffer[filled:filled + CHUNK])
                if not n:
                    raise self._corrupt("it ends before its declared size")
                filled += n
        except zstandard.ZstdError as exc:
            raise self._corrupt(str(exc)) from None
        self.hash.update(buffer)
        self.done += len(buffer)

    def read(self, n: int) -> bytes:
        out = bytearray(n)
        self.readinto(memoryview(out))
        return bytes(out)

    def skip(self, n: int) -> None:
        """Read past `n` bytes (hashed, never held at once)."""
        while n > 0:
            n -= len(self.read(min(CHUNK, n)))

    def read_rest(self, *, keep: bool) -> bytes | None:
        """The rest of the payload (or None when not `keep`: then only hashed)."""
        chunks = []
        while self.done < self.declared:
            chunk = self.read(min(CHUNK, self.declared - self.done))
            if keep:
                chunks.append(chunk)
        return b"".join(chunks) if keep else None

    def digest(self) -> str:
        return self.hash.hexdigest()


@dataclass(frozen=True)
class Const:
    value: int  # the value's index in the payload
    dtype: np.dtype[Any]
    shape: tuple[int, ...]
    offset: int  # from the first constant
    nbytes: int
    bits: int = 0  # 4: packed two per byte (low nibble first)
    scales: bool = False  # the value's block scales (record_blocks.py), not its constant

    def array(self, raw: np.ndarray) -> np.ndarray:
        """The constant from its stored bytes (uint8) or elements (little-endian)."""
        if self.bits:
            count = int(np.prod(self.shape, dtype=np.int64))
            return unpack4(raw.view(np.uint8), count, self.dtype).reshape(self.shape)
        return raw.reshape(self.shape).astype(self.dtype.newbyteorder("="), copy=False)

    @property
    def stored(self) -> np.dtype[Any]:
        return np.dtype(np.uint8) if self.bits else self.dtype.newbyteorder("<")


def pack4(q: np.ndarray) -> np.ndarray:
    """4-bit integers (int8 or uint8 holding -8..7 or 0..15), two per byte, low nibble first;
    an odd count ends with a zero high nibble."""
    flat = q.reshape(-1).astype(np.uint8) & 0x0F
    if flat.size % 2:
        flat = np.append(flat, np.uint8(0))
    return flat[0::2] | (flat[1::2] << 4)


def unpack4(packed: np.ndarray, count: int, dtype: np.dtype[Any]) -> np.ndarray:
    """`count` 4-bit integers of `pack4`'s bytes, as int8 (sign-extended) or uint8."""
    out = np.empty(packed.size * 2, np.uint8)
    out[0::2] = packed & 0x0F
    out[1::2] = packed >> 4
    out = out[:count]
    if np.dtype(dtype).kind == "i":
        return (out.view(np.int8) << 4) >> 4
    return out


@dataclass(frozen=True)
class Layout:
    start: int  # where the constants start in the payload
    consts: tuple[Const, ...]  # by offset

    @property
    def total(self) -> int:
        return self.consts[-1].offset + self.consts[-1].nbytes if self.consts else 0


def read_body(stream: PayloadStream, sizes: dict[str, Any], file: str
              ) -> tuple[dict[str, Any], Layout]:
    """The payload's JSON, checked, and the layout of the constants that follow it."""
    c = Check(file, "the cache record's payload")
    body, n = read_json(c, stream, sizes)
    consts = check_body(c, body)
    layout = Layout(align(8 + n), consts)
    expected = layout.start + layout.total if consts else 8 + n
    if expected != sizes["payload"]:
        raise c.fail("sizes.payload", f"the constants end at byte {expected}, the header "
                     f"says the payload is {sizes['payload']} bytes")
    return body, layout


def read_json(c: Check, stream: PayloadStream, sizes: dict[str, Any]) -> tuple[Any, int]:
    """The payload's JSON (unchecked) and its length in bytes."""
    (n,) = struct.unpack("<Q", stream.read(8))
    if n != sizes["graph_json"] or 8 + n > sizes["payload"]:
        raise c.fail("sizes.graph_json", f"the payload's JSON is {n} bytes, the header says "
                     f"{sizes['graph_json']} of a {sizes['payload']}-byte payload")
    try:
        return json.loads(stream.read(n)), n
    except (ValueError, UnicodeDecodeError, RecursionError) as exc:
        raise c.fail("payload", f"its JSON cannot be read ({str(exc)[:80]})") from None


def check_body(c: Check, body: Any) -> tuple[Const, ...]:
    """Check what the payload's JSON holds; the constants' layout, by offset."""
    body = c.obj(body, "payload")
    c.text(body.get("name"), "name")
    values = c.seq(body.get("values"), "values")
    consts = [k for i, entry in enumerate(values) for k in _value(c, entry, i)]
    count = len(values)
    produced = set(c.wholes(body.get("inputs"), "inputs", 0, count - 1))
    for i, op in enumerate(c.seq(body.get("ops"), "ops")):
        _op(c, op, i, count, produced)
    for i, out in enumerate(c.seq(body.get("outputs"), "outputs")):
        c.text(c.obj(out, f"outputs[{i}]").get("name"), f"outputs[{i}].name")
        c.whole(out.get("value"), f"outputs[{i}].value", 0, count - 1)
    _extras(c, body)
    _check_io(c, body)
    return _layout(c, consts)


def _value(c: Check, entry: Any, i: int) -> list[Const]:
    """A value's entry checked: its constant and its block scales (record_blocks.py)."""
    field = f"values[{i}]"
    entry = c.obj(entry, field)
    c.whole(entry.get("id"), f"{field}.id", i, i)
    c.text(entry.get("name"), f"{field}.name")
    c.wholes(entry.get("shape"), f"{field}.shape", -1)
    c.dtype(entry.get("dtype"), f"{field}.dtype")
    binary = "block_scales" in entry
    for j, enc in enumerate(c.seq(entry.get("enc", []), f"{field}.enc")):
        enc = c.seq(enc, f"{field}.enc[{j}]")
        if len(enc) not in (4, 5) or not all(isinstance(v, (int, float)) for v in enc[:4]) \
                or not isinstance(enc[3], bool):
            raise c.fail(f"{field}.enc[{j}]", "expected [bitwidth, scale, offset, signed]")
        if len(enc) == 5:
            _blocks(c, enc[4], f"{field}.enc[{j}][4]", binary)
    const = entry.get("const")
    if const is None:
        if binary:
            raise c.fail(f"{field}.block_scales", "only a constant's block scales are stored")
        return []
    out = [_const(c, entry, const, i, field)]
    if binary:
        dtype, shape, offset = check_entry(c, entry, entry.get("enc", []), field, ALIGN,
                                           MAX_PAYLOAD)
        out.append(Const(i, dtype, shape, offset, int(np.prod(shape)) * dtype.itemsize,
                         scales=True))
    return out


def _const(c: Check, entry: dict[str, Any], const: Any, i: int, field: str) -> Const:
    const = c.obj(const, f"{field}.const")
    dtype = c.dtype(const.get("dtype"), f"{field}.const.dtype")
    shape = tuple(c.wholes(const.get("shape"), f"{field}.const.shape", 0))
    problem = tensor_problem(shape, dtype.itemsize)
    if problem is not None:
        raise c.fail(f"{field}.const.shape", problem)
    offset = c.whole(const.get("offset"), f"{field}.const.offset", 0, MAX_PAYLOAD)
    if offset % ALIGN:
        raise c.fail(f"{field}.const.offset", f"{offset} is not a multiple of {ALIGN}")
    encs = entry.get("enc", [])
    bits = _packing(c, const, dtype, encs, field)
    if "axis" in const:
        axis = c.whole(const["axis"], f"{field}.const.axis", 0, max(len(shape) - 1, 0))
        if len(shape) == 0 or shape[axis] != len(encs):
            raise c.fail(f"{field}.const.axis", f"axis {axis} of shape {list(shape)} does not "
                         f"have one index per encoding ({len(encs)})")
    count = int(np.prod(shape, dtype=np.int64))
    nbytes = (count + 1) // 2 if bits else count * dtype.itemsize
    return Const(i, dtype, shape, offset, nbytes, bits)


def _blocks(c: Check, blocks: Any, field: str, binary: bool) -> None:
    """A block encoding's blocks (udo_build.ir.encodings.to_list); `binary`: its scales are
    in the payload (record_blocks.py), checked there."""
    blocks = c.obj(blocks, field)
    c.whole(blocks.get("block_size"), f"{field}.block_size", 1, 2 ** 31)
    if blocks.get("lpbq_bitwidth") not in (0, 8, 16) or not isinstance(
            blocks.get("blocks_first"), bool):
        raise c.fail(field, "expected lpbq_bitwidth 0, 8 or 16 and blocks_first true or false")
    if binary:
        return
    scales = c.seq(blocks.get("block_scales"), f"{field}.block_scales")
    if not scales or not all(isinstance(v, (int, float)) and not isinstance(v, bool)
                             and 0 < v < float("inf") for v in scales):
        raise c.fail(f"{field}.block_scales", "expected positive numbers, one per block")


def _packing(c: Check, const: dict[str, Any], dtype: np.dtype[Any], encs: list[Any],
             field: str) -> int:
    """4 for a constant packed two per byte (checked against its type and encodings), else 0."""
    if "bits" not in const:
        return 0
    bits = c.whole(const["bits"], f"{field}.const.bits", 4, 4)
    if dtype.name not in ("int8", "uint8") or not encs or any(e[0] != 4 for e in encs):
        raise c.fail(f"{field}.const.bits", "a packed constant is int8 or uint8 with 4-bit "
                     "encodings")
    return bits


def _op(c: Check, op: Any, i: int, count: int, produced: set[int]) -> None:
    field = f"ops[{i}]"
    op = c.obj(op, field)
    c.whole(op.get("id"), f"{field}.id", i, i)
    for name in ("op", "package", "layout", "origin"):
        c.text(op.get(name), f"{field}.{name}")
    if op["layout"] not in (BHWC, ANY, MODEL):
        raise c.fail(f"{field}.layout", f"{op['layout']!r} is not a layout class")
    for j, v in enumerate(c.seq(op.get("inputs"), f"{field}.inputs")):
        if v != NONE:
            c.whole(v, f"{field}.inputs[{j}]", 0, count - 1)
    for j, v in enumerate(c.wholes(op.get("outputs"), f"{field}.outputs", 0, count - 1)):
        if v in produced:
            raise c.fail(f"{field}.outputs[{j}]", f"value {v} has another producer")
        produced.add(v)
    c.obj(op.get("attrs"), f"{field}.attrs")
    for j, shape in enumerate(c.seq(op.get("model"), f"{field}.model")):
        c.wholes(shape, f"{field}.model[{j}]", -1)


def _extras(c: Check, body: dict[str, Any]) -> None:
    """The parts `udo-build info` and the runner read: io, memory, log, notes, quantization."""
    io = c.obj(body.get("io"), "io")
    for side in ("inputs", "outputs"):
        for name, shape in c.obj(io.get(side), f"io.{side}").items():
            c.wholes(shape, f"io.{side}.{name}", -1)
    for name, dtype in c.obj(io.get("dtypes", {}), "io.dtypes").items():
        if dtype not in ("float16", "float64") or name not in io["outputs"]:
            raise c.fail(f"io.dtypes.{name}", f"{dtype!r} for an output of the graph")
    c.obj(body.get("memory", {}), "memory")
    c.obj(body.get("quantization") or {}, "quantization")
    for i, note in enumerate(c.seq(body.get("notes", []), "notes")):
        c.text(note, f"notes[{i}]")
    log = c.obj(body.get("log", {}), "log")
    for i, rule in enumerate(c.seq(log.get("rules", []), "log.rules")):
        rule = c.obj(rule, f"log.rules[{i}]")
        for name in ("pass", "rule"):
            c.text(rule.get(name), f"log.rules[{i}].{name}")
        c.whole(rule.get("count"), f"log.rules[{i}].count", 0)


def _check_io(c: Check, body: dict[str, Any]) -> None:
    """The model-level inputs and outputs name the graph's, with as many elements."""
    values = body["values"]
    sides = {"inputs": [(values[v]["name"], values[v]["shape"]) for v in body["inputs"]],
             "outputs": [(o["name"], values[o["value"]]["shape"]) for o in body["outputs"]]}
    for side, pairs in sides.items():
        io = body["io"][side]
        if sorted(io) != sorted(name for name, _ in pairs):
            raise c.fail(f"io.{side}", f"names {sorted(io)}, the graph's {side} are "
                         f"{sorted(name for name, _ in pairs)}")
        for name, shape in pairs:
            if -1 not in shape and np.prod(io[name]) != np.prod(shape):
                raise c.fail(f"io.{side}.{name}", f"shape {io[name]} does not hold the "
                             f"graph's {shape}")


def _layout(c: Check, consts: list[Const]) -> tuple[Const, ...]:
    """The constants by offset; two may share their bytes (a multi-graph record stores equal
    constants once: record_graphs.py) only when they span the same bytes, else none overlap."""
    ordered = sorted(consts, key=lambda k: k.offset)
    start, end = -1, 0
    for k in ordered:
        shared = k.offset == start and k.offset + k.nbytes == end
        if k.offset < end and not shared:
            raise c.fail(f"values[{k.value}].const.offset",
                         f"this constant overlaps the one before it (ending at {end})")
        start, end = k.offset, k.offset + k.nbytes
    return tuple(ordered)


class Constants:
    """The arrays of a record's constants: from the kept bytes, or read again on demand."""

    def __init__(self, layout: Layout, kept: bytes | None, compressed: memoryview,
                 declared: int, file: str) -> None:
        self.layout, self.kept, self.compressed = layout, kept, compressed
        self.declared, self.file = declared, file

    def arrays(self) -> dict[int, np.ndarray]:
        """Value index -> array (native byte order)."""
        return self.arrays_and_grids()[0]

    def arrays_and_grids(self) -> tuple[dict[int, np.ndarray], dict[int, np.ndarray]]:
        """Value index -> array (native byte order), and value index -> its block scales
        (record_blocks.py), read in one pass."""
        out: dict[int, np.ndarray] = {}
        grids: dict[int, np.ndarray] = {}
        for k, raw in self.stored():
            if k.scales:
                grids[k.value] = checked_grid(raw, k.dtype, k.shape, f"values[{k.value}]",
                                              self.file)
                continue
            array = k.array(raw.view(k.stored))
            # constants over KEEP bytes (a large model's) are spilled to files, each mapped
            out[k.value] = array.copy() if self.kept is not None else spill(array)
        return out, grids

    def stored(self) -> Iterator[tuple[Const, np.ndarray]]:
        """Each constant with its stored bytes (uint8), by offset; constants that share their
        bytes (a multi-graph record's) are read once."""
        if self.kept is not None:
            skip = self.layout.start - (self.declared - len(self.kept))
            blob = memoryview(self.kept)[skip:]
            for k in self.layout.consts:
                yield k, np.frombuffer(blob, np.uint8, k.nbytes, k.offset)
            return
        stream = PayloadStream(self.compressed, self.declared, self.file)
        stream.read(self.layout.start)  # the JSON, checked already
        start, end, raw = -1, 0, np.empty(0, np.uint8)
        for k in self.layout.consts:
            if k.offset != start:
                stream.skip(k.offset - end)  # alignment padding, or another graph's constants
                raw = np.empty(k.nbytes, np.uint8)
                stream.readinto(memoryview(raw))
                start, end = k.offset, k.offset + k.nbytes
            yield k, raw


def build_graph(body: dict[str, Any], arrays: dict[int, np.ndarray],
                grids: dict[int, np.ndarray] | None = None) -> OpGraph:
    """The op graph a checked payload describes (value and op ids shifted to start at 1);
    `grids`: the block scales the payload holds (record_blocks.py), by value index."""
    g = OpGraph(body["name"], HTP)
    for i, entry in enumerate(body["values"]):
        vid = i + 1
        g.types[vid] = TType.from_json(entry)
        if grids and i in grids:
            g.types[vid] = replace(g.types[vid], enc=with_scales(g.types[vid].enc, grids[i]))
        g.names[vid] = entry["name"]
        g.users[vid] = {}
        if i in arrays:
            g.consts[vid] = arrays[i]
    for entry in body["ops"]:
        op = Op(int(entry["id"]) + 1 + len(body["values"]), entry["op"], entry["package"],
                tuple(v + 1 if v != NONE else NONE for v in entry["inputs"]),
                tuple(v + 1 for v in entry["outputs"]), frozen_attrs(entry["attrs"]),
                entry["layout"], tuple(tuple(s) for s in entry["model"]), entry["origin"])
        g._insert(op)
    g.inputs = [v + 1 for v in body["inputs"]]
    g.outputs = [(o["name"], int(o["value"]) + 1) for o in body["outputs"]]
    g._next = len(body["values"]) + len(body["ops"]) + 1
    return g
