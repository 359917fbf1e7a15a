"""Preparing a partitioned graph: one record per HTP subnet, kept together as a record set.

    part = partition(model, node_runtimes(model, bundle.opdefs, choices), outputs)
    prepared = compile_subnets(bundle, target, packages, part)   # [(subnet, Compiled)]
    segments, size = record_set(part, [(s.index, c.record()) for s, c in prepared])

Each HTP subnet is prepared from its own bundle (partition.subnet_bundle) for the target's
SoC, level and precision, at the shapes its tensors have at the target's input dimensions, with
its outputs as the record's outputs: its record's identifier is `<graph>:subnet<i>`, its input
dimensions are its own inputs'. A CPU subnet has no record (the CPU runtime runs the model).

The prepare step's output for a partitioned target is a record set, one file:

    bytes 0-7    magic b"UDORSET\\0"
    bytes 8-11   format version (uint32, little-endian)
    bytes 12-19  header length H (uint64, little-endian)
    bytes 20..   header: canonical JSON {"format", "version", "partition", "records": [
                 {"subnet", "offset", "size", "sha256"}, ...]}
    then         each record at a 64-byte aligned offset

stored as a file of parts (udo_build.store.parts), so that each record is a blob of its own that
the deployable bundle shares. `read_record_set` reads one through byte ranges (a reader with
`read(offset, size)`); a plain record is not a record set (`is_record_set`).
"""

from __future__ import annotations

import hashlib
import json
import struct
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..canonical import canonical_json
from ..errors import UserError
from ..kernels.oppkg import OpPackage
from ..soc.target import CompileTarget
from .driver import Compiled, compile_bundle, input_shapes
from .partition import Partition, Subnet, subnet_bundle

MAGIC = b"UDORSET\x00"
FORMAT = "udo-build/record-set"
VERSION = 1
ALIGN = 64
MAX_HEADER = 16 << 20
_PREFIX = struct.Struct("<8sIQ")


def compile_subnets(bundle: Any, target: CompileTarget, packages: Mapping[str, OpPackage],
                    part: Partition, progress: Callable[[int, int], None] | None = None
                    ) -> list[tuple[Subnet, Compiled]]:
    """A Compiled per HTP subnet of `part`, in order."""
    _, infos, _, _ = input_shapes(bundle.model, target.input_dimensions, packages)
    out = []
    for subnet in part.htp():
        sub = subnet_bundle(bundle, subnet, infos)
        own = replace(target, input_dimensions={}, outputs={"tensors": list(subnet.outputs)})
        out.append((subnet, compile_bundle(sub, own, packages, progress=progress)))
    return out


@dataclass(frozen=True)
class SetEntry:
    subnet: int
    offset: int
    size: int
    sha256: str


def record_set(part: Partition, records: Sequence[tuple[int, bytes]]
               ) -> tuple[tuple[tuple[int, bytes], ...], int]:
    """The record set's segments (offset, bytes) and its size: the head, then each record."""
    sizes = [len(data) for _, data in records]
    head_size = len(_head(part, records, [0] * len(records)))
    offsets, position = [], _aligned(head_size)
    for size in sizes:  # the head's length does not depend on the offsets' digits: fixed width
        offsets.append(position)
        position = _aligned(position + size)
    head = _head(part, records, offsets)
    assert len(head) == head_size
    end = offsets[-1] + sizes[-1] if records else len(head)
    return ((0, head), *((o, data) for o, (_, data) in zip(offsets, records, strict=True))), end


def _head(part: Partition, records: Sequence[tuple[int, bytes]], offsets: Sequence[int]
          ) -> bytes:
    rows = [{"subnet": index, "offset": f"{offset:016d}", "size": len(data),
             "sha256": hashlib.sha256(data).hexdigest()}
            for (index, data), offset in zip(records, offsets, strict=True)]
    header = canonical_json({"format": FORMAT, "version": VERSION,
                             "partition": part.to_json(), "records": rows})
    return _PREFIX.pack(MAGIC, VERSION, len(header)) + header


def _aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def is_record_set(reader: Any) -> bool:
    return reader.size >= _PREFIX.size and bytes(reader.read(0, 8)) == MAGIC


def read_record_set(reader: Any, file: str = "record set"
                    ) -> tuple[dict[str, Any], list[SetEntry]]:
    """(the partition as its JSON, the records' entries); a bad file is a UserError."""
    magic, version, length = _PREFIX.unpack(bytes(reader.read(0, _PREFIX.size)))
    if magic != MAGIC or version != VERSION or length > min(MAX_HEADER, reader.size):
        raise UserError(f"not a record set of version {VERSION}", file=file)
    try:
        header = json.loads(bytes(reader.read(_PREFIX.size, length)))
        entries = [SetEntry(int(r["subnet"]), int(r["offset"]), int(r["size"]), r["sha256"])
                   for r in header["records"]]
    except (ValueError, KeyError, TypeError) as exc:
        raise UserError(f"the record set's header does not read: {exc}", file=file) from None
    if any(e.offset + e.size > reader.size for e in entries):
        raise UserError("a record of the record set lies past its end", file=file)
    return header["partition"], entries
