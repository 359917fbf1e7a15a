"""The action-cache entry without protobuf (`entries`) against protobuf itself (`reapi`'s
messages): the same bytes written, the same envelope (or a refusal) read from well-formed,
truncated, mutated and extended entries."""

from __future__ import annotations

import random

import pytest

from udo_build.store.remote import entries as E
from udo_build.store.remote import reapi as R

ENVELOPE = E.Pointer("ab" * 32, 321)
INLINE = E.Pointer("ab" * 32, 321, b'{"signed": "envelope"}' * 14)  # its bytes inlined


def _protobuf_bytes(envelope: E.Pointer, outputs: dict[str, tuple[str, int]]) -> bytes:
    files = [R.OutputFile(path=E.ENTRY_PATH, digest=R.Digest(hash=envelope.digest,
                                                            size_bytes=envelope.size),
                          contents=envelope.contents or b"")]
    files += [R.OutputFile(path=f"{E.OUTPUTS_DIR}/{name}", digest=R.Digest(hash=d, size_bytes=s))
              for name, (d, s) in sorted(outputs.items())]
    return bytes(R.ActionResult(output_files=files).SerializeToString(deterministic=True))


def _protobuf_envelope(data: bytes, limit: int) -> E.Pointer | None:
    """What the protobuf reader found (None: refused)."""
    from google.protobuf.message import DecodeError

    result = R.ActionResult()
    try:
        result.ParseFromString(data)
    except (DecodeError, RecursionError, ValueError):
        return None
    found = [f for f in result.output_files if f.path == E.ENTRY_PATH]
    if len(found) != 1 or not E.SHA256.fullmatch(found[0].digest.hash) \
            or not 0 < found[0].digest.size_bytes <= limit:
        return None
    return E.Pointer(found[0].digest.hash, found[0].digest.size_bytes, found[0].contents or None)


def _ours(data: bytes, limit: int) -> E.Pointer | None:
    got = E.entry_envelope(data, limit)
    return got if isinstance(got, E.Pointer) else None


@pytest.mark.parametrize("outputs", [
    {}, {"a": ("ef" * 32, 0)}, {"b": ("cd" * 32, 7), "a": ("ef" * 32, 1 << 40)},
    {"bundle.dlc": ("01" * 32, 300), "naïve/é": ("23" * 32, 2**63 - 1)},
])
def test_entries_are_written_byte_for_byte_as_protobuf_writes_them(
        outputs: dict[str, tuple[str, int]]) -> None:
    assert E.entry_bytes(ENVELOPE, outputs) == _protobuf_bytes(ENVELOPE, outputs)
    assert E.entry_bytes(INLINE, outputs) == _protobuf_bytes(INLINE, outputs)
    assert E.entry_envelope(E.entry_bytes(INLINE, outputs), 1000) == INLINE
    assert E.entry_bytes(E.Pointer("", 0), outputs) == _protobuf_bytes(E.Pointer("", 0), outputs)


def test_damaged_and_extended_entries_are_read_as_protobuf_reads_them() -> None:
    valid = E.entry_bytes(ENVELOPE, {"a": ("ef" * 32, 5), "b": ("cd" * 32, 1 << 33)})
    digest = bytes.fromhex("12") + bytes([len(b"\x0a\x40" + b"ab" * 32)]) + b"\x0a\x40" + \
        b"ab" * 32
    cases = [valid[:end] for end in range(len(valid) + 1)]
    cases += [valid + extra for extra in (
        bytes.fromhex("4a 00 2a 02 6f 6b"),  # fields a server adds (unknown here)
        bytes.fromhex("20 01"), bytes.fromhex("25 01 02 03 04"),  # exit_code; a fixed32
        bytes.fromhex("29 01 02 03 04 05 06 07 08"), bytes.fromhex("0b 0c"),  # fixed64; group
        bytes.fromhex("10 05"),  # output_files as a varint: an unknown field then
        bytes.fromhex("12 04 0a 02 c3 28"))]  # an output file whose path is not UTF-8
    entry = E._output_file(E.ENTRY_PATH, "cd" * 32, 0) + E._field(2, b"\x10\x07")
    cases += [E._field(2, entry),  # the size merged in from a second digest field
              E._field(2, E._field(1, E.ENTRY_PATH.encode()) + digest + b"\x12\x02\x10\x09"),
              E._field(2, E._output_file(E.ENTRY_PATH, "ab" * 32, -1))]
    inline = E.entry_bytes(INLINE, {"a": ("ef" * 32, 5)})
    cases += [inline[:end] for end in range(0, len(inline) + 1, 7)]
    rng = random.Random(27)
    for i in range(400):
        data = bytearray(valid if i % 2 else inline)
        for _ in range(rng.randint(1, 3)):
            data[rng.randrange(len(data))] = rng.randrange(256)
        cases.append(bytes(data))
    differ = [c.hex() for c in cases if _ours(c, 1 << 40) != _protobuf_envelope(c, 1 << 40)]
    assert not differ, differ[:3]
    assert sum(_ours(c, 1 << 40) is not None for c in cases) > 20  # not all refused
