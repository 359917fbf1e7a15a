"""The bundle file: round trip, deterministic bytes, and refusal of damaged files."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest

from udo_build.errors import UserError
from udo_build.ir import Graph, Model, Node, TensorInfo
from udo_build.ir.bundle import ALIGN, MAGIC, OWN_PART, Bundle, bundle_segments, read_bundle
from udo_build.ir.part_sources import FilePart


def small_model(scale: float = 1.0) -> Model:
    graph = Graph(
        "g", (TensorInfo("x", "float32", (1, 4)),), (TensorInfo("y", "float32", (1, 3)),),
        (Node.make("fc", "Gemm", ["x", "w", "b"], ["y"], {"transB": 1}),
         ),
    )
    w = (np.arange(12, dtype=np.float32).reshape(3, 4) * scale)
    return Model(graph, {"w": w, "b": np.ones(3, np.float32), "i": np.arange(5)})


def test_round_trip_keeps_graph_weights_parts_and_meta() -> None:
    bundle = Bundle(small_model(), {"name": "Pkg", "domain": "aisw"}, {"producer": "test"},
                    {"encodings.json": b"{}", "records/a": b"\x00\x01"})
    data = bundle.to_bytes()
    back = read_bundle(data)
    assert back.model.graph == bundle.model.graph
    assert back.model.weights.keys() == bundle.model.weights.keys()
    for name, array in bundle.model.weights.items():
        assert back.model.weights[name].dtype == array.dtype
        np.testing.assert_array_equal(back.model.weights[name], array)
    assert (back.opdefs, back.meta, dict(back.parts)) == (
        {"name": "Pkg", "domain": "aisw"}, {"producer": "test"},
        {"encodings.json": b"{}", "records/a": b"\0\1"})
    assert back.to_bytes() == data


def test_0d_weights_stay_0d() -> None:
    """A scalar weight (Range's start, a window's size) keeps its rank through the bundle:
    np.ascontiguousarray would make it [1], which kernels that want a scalar refuse."""
    from udo_build.ir.graph import array_digest
    from udo_build.rewrite.graph import array_key

    scalar, one = np.array(2.0, np.float32), np.array([2.0], np.float32)
    model = small_model()
    bundle = Bundle(Model(model.graph, {**model.weights, "s": scalar, "t": np.array(3)}))
    back = read_bundle(bundle.to_bytes())
    assert back.model.weights["s"].shape == () and back.model.weights["t"].shape == ()
    assert array_digest(scalar) != array_digest(one)
    assert array_key(scalar) != array_key(one)


def test_bytes_are_deterministic_and_parts_aligned() -> None:
    a = small_model()
    b = Model(a.graph, dict(reversed(list(a.weights.items()))))  # other dict order
    assert Bundle(a).to_bytes() == Bundle(b).to_bytes()
    assert Bundle(small_model(2.0)).to_bytes() != Bundle(a).to_bytes()
    import json

    data = Bundle(a).to_bytes()
    length = struct.unpack_from("<Q", data, 12)[0]
    header = json.loads(data[20:20 + length])
    assert all(p["offset"] % ALIGN == 0 for p in header["parts"])


@pytest.mark.parametrize("damage, message", [
    (lambda d: b"NOTBNDL\0" + d[8:], "not a udo-build bundle (wrong magic bytes)"),
    (lambda d: d[:8] + struct.pack("<I", 9) + d[12:], "bundle format version 9 is not supported"),
    (lambda d: d[:40], "the bundle is truncated or its header is corrupt"),
    (lambda d: d[:-3], "lies outside the bundle (truncated file?)"),
    (lambda d: d[:-1] + bytes([d[-1] ^ 1]), "is corrupt (digest mismatch)"),
    (lambda d: MAGIC + struct.pack("<IQ", 1, 5) + b"{oops", "header is not valid JSON"),
])
def test_damaged_bundles_are_refused(damage, message) -> None:  # type: ignore[no-untyped-def]
    data = Bundle(small_model()).to_bytes()
    with pytest.raises(UserError) as info:
        read_bundle(damage(data), "b.udb")
    assert message in info.value.problem.message and info.value.problem.file == "b.udb"


def test_part_names_cannot_escape() -> None:
    with pytest.raises(ValueError):
        Bundle(small_model(), parts={"../evil": b""}).to_bytes()


def test_a_split_bundle_is_the_bytes_of_the_whole() -> None:
    import hashlib

    from udo_build.ir.bundle import External, split_bundle

    records = {"records/b.udr": b"B" * 300, "records/a.udr": b"A" * 70}
    whole = Bundle(small_model(), None, {"producer": "test"},
                   {"encodings.json": b"{}", **records}).to_bytes()
    base = Bundle(small_model(), None, {"producer": "test"}, {"encodings.json": b"{}"})
    head, placed, size = split_bundle(base, {n: External(len(d), hashlib.sha256(d).hexdigest())
                                             for n, d in records.items()})
    joined = bytearray(head)
    for offset, name in placed:
        joined.extend(b"\0" * (offset - len(joined)))
        joined.extend(records[name])
    assert (bytes(joined), size) == (whole, len(whole))
    assert [n for _, n in placed] == ["records/a.udr", "records/b.udr"]


def test_further_parts_are_verified_when_read() -> None:
    data = bytearray(Bundle(small_model(), parts={"records/a": b"\1" * 100}).to_bytes())
    data[-50] ^= 1  # inside the record part, which comes last
    back = read_bundle(bytes(data), "b.udb")  # the model parts are intact
    assert "records/a" in back.parts and len(back.parts) == 1
    with pytest.raises(UserError) as info:
        back.parts["records/a"]
    assert "part records/a of the bundle is corrupt" in info.value.problem.message


@pytest.mark.parametrize("size", [100, OWN_PART + 5])
def test_a_part_kept_in_a_file_gives_the_segments_of_its_bytes(tmp_path: Path,
                                                                 size: int) -> None:
    """A part in a file (the quantize step's encodings) lays the bundle out as its bytes
    would: a small one among the small parts, a large one a segment of its own, so that the
    stored file of parts (and every key downstream) is the same."""
    data = bytes(range(256)) * (size // 256) + b"x" * (size % 256)
    (tmp_path / "e.json").write_bytes(data)
    as_bytes = Bundle(small_model(), None, {}, {"encodings.json": data, "records/a": b"\1"})
    as_file = Bundle(small_model(), None, {}, {"encodings.json": FilePart(tmp_path / "e.json"),
                                               "records/a": b"\1"})
    want, want_size = bundle_segments(as_bytes)
    got, got_size = bundle_segments(as_file)
    assert got_size == want_size and list(got) == list(want)
    assert len(want) == (1 if size < OWN_PART else 3)  # the head, the part, records/a
