"""The action-cache entry of the remote tier, in plain Python: a REAPI `ActionResult` whose output
file ENTRY_PATH names the signed envelope (see `trust`) stored as a CAS blob; the action's
outputs follow as output files OUTPUTS_DIR/<output name>, so a server that checks that every
blob an ActionResult names is in its CAS (bazel-remote, BuildGrid) checks them too. Readers use
only the envelope: it is signed, the rest is a hint for servers.

The envelope's bytes are inlined too, in the field REAPI has for that (`OutputFile.contents`),
so that a reader needs one request per entry, not two; the blob is uploaded all the same (a
server may strip inlined contents, or check the digest against its CAS), and a reader uses the
inlined bytes only when they hash to the digest the entry names (else it reads the blob, and
entries without them, written before, are read as ever).

The few protobuf fields an entry has are written and read here by their wire format (varints
and length-delimited fields; the numbers are those of the public remote_execution.proto,
declared again in `reapi` for the gRPC transport), so that a build against an HTTP or S3 cache
never imports protobuf: a fresh checkout pays for what it uses. The bytes are those of
protobuf's deterministic serialization (tests/store/test_reapi.py compares them), and reading
follows protobuf's rules: fields in any order, unknown fields skipped, a message field seen
twice merged, the last value of a scalar kept, strings strict UTF-8.

    ActionResult  output_files = 2 (repeated OutputFile)
    OutputFile    path = 1 (string), digest = 2 (Digest), contents = 5 (bytes)
    Digest        hash = 1 (string), size_bytes = 2 (int64)
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

ENTRY_PATH = "udo-build-entry.json"  # the output file of an entry that is the signed envelope
OUTPUTS_DIR = "udo-build-outputs"  # the action's outputs: OUTPUTS_DIR/<output name>
SHA256 = re.compile(r"[0-9a-f]{64}")
VARINT, FIXED64, LENGTH, START_GROUP, END_GROUP, FIXED32 = 0, 1, 2, 3, 4, 5  # wire types
MAX_GROUPS = 100  # nested groups (protobuf's recursion limit)


class Malformed(ValueError):
    """The bytes are not a protobuf message of the expected shape."""


@dataclass(frozen=True)
class Pointer:
    """Where an entry says its signed envelope is: a CAS blob (and its bytes, when the entry
    inlines them: unverified until hashed)."""

    digest: str
    size: int
    contents: bytes | None = None


# -- writing --------------------------------------------------------------------------------------

def _varint(value: int) -> bytes:
    value &= (1 << 64) - 1  # an int64 below zero: its two's complement, ten bytes
    out = bytearray()
    while value > 0x7F:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _field(number: int, payload: bytes) -> bytes:
    return _varint(number << 3 | LENGTH) + _varint(len(payload)) + payload


def _digest(sha256: str, size: int) -> bytes:
    """A Digest; proto3 leaves out fields at their default (an empty hash, a size of 0)."""
    return ((_field(1, sha256.encode()) if sha256 else b"")
            + (_varint(2 << 3 | VARINT) + _varint(size) if size else b""))


def _output_file(path: str, sha256: str, size: int, contents: bytes | None = None) -> bytes:
    return (_field(1, path.encode()) + _field(2, _digest(sha256, size))
            + (_field(5, contents) if contents else b""))


def entry_bytes(envelope: Pointer, outputs: dict[str, tuple[str, int]]) -> bytes:
    """A serialized ActionResult naming the envelope blob (its bytes inlined when the pointer
    holds them) and the outputs (name -> (sha256, size)); deterministic: the same arguments
    give the same bytes."""
    files = [_output_file(ENTRY_PATH, envelope.digest, envelope.size, envelope.contents)]
    files += [_output_file(f"{OUTPUTS_DIR}/{name}", d, s) for name, (d, s) in
              sorted(outputs.items())]
    return b"".join(_field(2, f) for f in files)


# -- reading --------------------------------------------------------------------------------------

def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    value = shift = 0
    for i in range(at, min(at + 10, len(data))):
        value |= (data[i] & 0x7F) << shift
        if data[i] < 0x80:
            return value & ((1 << 64) - 1), i + 1
        shift += 7
    raise Malformed("a varint runs past the end (or over ten bytes)")


def fields(data: bytes) -> Iterator[tuple[int, int, int | bytes]]:
    """(number, wire type, value) of each field of a message: an int for varints and fixed
    fields, the bytes of a length-delimited one. Groups (deprecated, never a field of ours) are
    skipped whole, as protobuf keeps them as unknown fields."""
    at, groups = 0, []  # the numbers of the groups being skipped, innermost last
    while at < len(data):
        tag, at = _read_varint(data, at)
        number, wire = tag >> 3, tag & 7
        if not 0 < number < 1 << 29:
            raise Malformed(f"a field number {number}")
        if wire in (START_GROUP, END_GROUP):
            if wire == START_GROUP and len(groups) < MAX_GROUPS:
                groups.append(number)
            elif wire == START_GROUP or not groups or groups.pop() != number:
                raise Malformed("a group that does not close, or closes another")
            continue
        value, at = _read_value(data, at, wire)
        if not groups:
            yield number, wire, value
    if groups:
        raise Malformed("a group that does not close")


def _read_value(data: bytes, at: int, wire: int) -> tuple[int | bytes, int]:
    """The value of a field of wire type `wire` at `at`, and where the next field starts."""
    if wire == VARINT:
        return _read_varint(data, at)
    width = {FIXED64: 8, FIXED32: 4}.get(wire)
    if width is None and wire != LENGTH:
        raise Malformed(f"wire type {wire}")
    if width is None:
        width, at = _read_varint(data, at)
    if at + width > len(data):
        raise Malformed("a field runs past the end")
    chunk = data[at:at + width]
    return (chunk if wire == LENGTH else int.from_bytes(chunk, "little")), at + width


def _text(chunk: int | bytes) -> str:
    assert isinstance(chunk, bytes)
    try:
        return chunk.decode("utf-8")
    except UnicodeDecodeError:
        raise Malformed("a string that is not UTF-8") from None


def _read_digest(data: bytes, found: tuple[str, int]) -> tuple[str, int]:
    """A Digest merged into `found` (a message field seen twice is merged)."""
    sha256, size = found
    for number, wire, value in fields(data):
        if number == 1 and wire == LENGTH:
            sha256 = _text(value)
        elif number == 2 and wire == VARINT:
            assert isinstance(value, int)
            size = value - (1 << 64) if value >= 1 << 63 else value  # int64
    return sha256, size


def output_files(data: bytes) -> list[tuple[str, str, int]]:
    """The output files of a serialized ActionResult: (path, sha256, size) each."""
    return [file[:3] for file in _files(data)]


def _files(data: bytes) -> list[tuple[str, str, int, bytes | None]]:
    """The output files of a serialized ActionResult: (path, sha256, size, contents) each."""
    found = []
    for number, wire, value in fields(data):
        if number != 2 or wire != LENGTH:
            continue
        assert isinstance(value, bytes)
        path, digest, contents = "", ("", 0), None
        for inner, inner_wire, item in fields(value):
            if inner == 1 and inner_wire == LENGTH:
                path = _text(item)
            elif inner == 2 and inner_wire == LENGTH:
                assert isinstance(item, bytes)
                digest = _read_digest(item, digest)
            elif inner == 5 and inner_wire == LENGTH:
                assert isinstance(item, bytes)
                contents = item
        found.append((path, *digest, contents))
    return found


def entry_envelope(data: bytes, limit: int) -> Pointer | str:
    """The envelope an entry names, or why the entry is malformed (never raises)."""
    if data[:1] == b"{":  # an ActionResult starts with field 2 (0x12)
        return "an entry in udo-build's former JSON format, not a REAPI ActionResult"
    try:
        files = _files(data)
    except Malformed:
        return "not a REAPI ActionResult"
    found = [(sha256, size, contents) for path, sha256, size, contents in files
             if path == ENTRY_PATH]
    if len(found) != 1:
        return f"an ActionResult without one output file {ENTRY_PATH!r} (it has {len(found)})"
    sha256, size, contents = found[0]
    if not SHA256.fullmatch(sha256):
        return f"the envelope's digest {sha256[:70]!r} is not a sha256 in lowercase hex"
    if not 0 < size <= limit:
        return f"the envelope's size {size} is not within 1..{limit} bytes"
    return Pointer(sha256, size, contents or None)
