"""Crafted files of every format udo-build reads: each is refused as the user's error (exit 2,
a UserError naming the file and the part or field), never a crash, and a crafted record or
bundle costs bounded memory (under 300 MB, measured in a child process).

The records and bundles here are written by hand with correct digests and sizes, so that only
their content is wrong: bad JSON, wrong types, missing keys, out-of-range references, huge
declared sizes, zstd bombs, truncation.
"""

from __future__ import annotations

import copy
import hashlib
import json
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import zstandard

from udo_build.compiler import read_header, read_record
from udo_build.compiler.record import FORMAT as RECORD_FORMAT
from udo_build.compiler.record import MAGIC as RECORD_MAGIC
from udo_build.compiler.record import VERSION as RECORD_VERSION
from udo_build.errors import UserError
from udo_build.ir import encodings, qmodel
from udo_build.ir.bundle import FORMAT as BUNDLE_FORMAT
from udo_build.ir.bundle import MAGIC as BUNDLE_MAGIC
from udo_build.ir.bundle import read_bundle
from udo_build.model.input_list import load_tensor
from udo_build.recipe.load import load_recipe
from udo_build.source import read_limited
from udo_build.store.manifest import read_manifest

from .compiler.helpers import REPO, prepare, softplus_bundle

MAX_RSS_KB = 300 * 1024


# -- writing crafted records and bundles --------------------------------------------------------


def _pad(n: int) -> int:
    return -(-n // 64) * 64


def craft_record(body: Any, constants: bytes = b"", *, key: Any = None,
                 sizes: dict[str, Any] | None = None, text: bytes | None = None,
                 zeros: int = 0) -> bytes:
    """A record whose digest and sizes fit its payload: JSON `body` (or raw `text`), then the
    constants (or `zeros` zero bytes, streamed into the frame)."""
    text = json.dumps(body).encode() if text is None else text
    head = struct.pack("<Q", len(text)) + text
    tail = (b"\0" * (_pad(len(head)) - len(head)) + constants) if constants or zeros else b""
    length = len(head) + len(tail) + zeros
    digest = hashlib.sha256(head + tail)
    compressor = zstandard.ZstdCompressor(level=3, write_content_size=True).compressobj(
        size=length)
    chunks = [compressor.compress(head + tail)]
    block = bytes(1 << 22)
    for start in range(0, zeros, len(block)):
        piece = block[:min(len(block), zeros - start)]
        digest.update(piece)
        chunks.append(compressor.compress(piece))
    chunks.append(compressor.flush())
    compressed = b"".join(chunks)
    header = {"format": RECORD_FORMAT, "version": RECORD_VERSION,
              "key": {"name": "crafted", "precision": "fp16"} if key is None else key,
              "sizes": {"graph_json": len(text), "payload": length,
                        "compressed": len(compressed), **(sizes or {})},
              "payload": {"sha256": digest.hexdigest(), "codec": "zstd"}}
    raw = json.dumps(header).encode()
    return RECORD_MAGIC + struct.pack("<II", RECORD_VERSION, len(raw)) + raw + compressed


def craft_bundle(parts: list[tuple[dict[str, Any], bytes]], meta: Any = None,
                 header: dict[str, Any] | None = None) -> bytes:
    """A bundle whose part entries carry the right offsets, sizes and digests."""
    index = [{**e, "size": len(d), "sha256": hashlib.sha256(d).hexdigest()} for e, d in parts]
    base = 4096  # the header fits below; parts follow at 64-byte aligned offsets
    offsets, position = [], base
    for _, data in parts:
        offsets.append(position)
        position = _pad(position + len(data))
    doc = {"format": BUNDLE_FORMAT, "version": 1, "meta": {} if meta is None else meta,
           "parts": [{**e, "offset": o} for e, o in zip(index, offsets, strict=True)],
           **(header or {})}
    raw = json.dumps(doc).encode()
    out = bytearray(BUNDLE_MAGIC + struct.pack("<IQ", 1, len(raw)) + raw)
    for (_, data), offset in zip(parts, offsets, strict=True):
        out.extend(b"\0" * (offset - len(out)))
        out.extend(data)
    return bytes(out)


GRAPH = {"name": "g", "inputs": [{"name": "x", "dtype": "float32", "shape": [1, 4]}],
         "outputs": [{"name": "y", "dtype": "float32", "shape": [1, 4]}],
         "nodes": [{"name": "n", "op": "Relu", "inputs": ["x"], "outputs": ["y"], "attrs": {}}]}


def graph_part(doc: Any) -> tuple[dict[str, Any], bytes]:
    return {"name": "graph.json"}, json.dumps(doc).encode()


@pytest.fixture(scope="module")
def record() -> tuple[bytes, dict[str, Any], dict[str, Any]]:
    """A real record, its header and its payload's JSON."""
    bundle, _ = softplus_bundle()
    data = prepare(bundle).record()
    return data, read_header(data)[0], read_record(data).body


def _refused(call: Callable[[], Any], field: str | None, message: str = "") -> UserError:
    with pytest.raises(UserError) as info:
        call()
    problem = info.value.problem
    assert problem.file, problem
    assert problem.field == field, problem
    assert message in problem.message, problem
    return info.value


# -- records ------------------------------------------------------------------------------------


def _edit(body: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    body = copy.deepcopy(body)
    target = body
    for part in path[:-1]:
        target = target[part]
    if value is KeyError:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return body


BODY_CASES = [
    (("values", 0, "shape"), "1x4", "values[0].shape"),
    (("values", 1, "dtype"), "object", "values[1].dtype"),
    (("values", 2, "id"), 7, "values[2].id"),
    (("ops", 0, "op"), KeyError, "ops[0].op"),
    (("ops", 1, "inputs"), [10 ** 6], "ops[1].inputs[0]"),
    (("ops", 1, "outputs"), [0], "ops[1].outputs[0]"),
    (("ops", 2, "attrs"), [], "ops[2].attrs"),
    (("outputs", 0), {"name": "logits"}, "outputs[0].value"),
    (("io", "inputs"), None, "io.inputs"),
    (("io", "outputs"), {}, "io.outputs"),
    (("ops", 0, "layout"), "diagonal", "ops[0].layout"),
    (("log", "rules"), [{"pass": 1, "rule": "r", "count": 1}], "log.rules[0].pass"),
    (("notes",), [3], "notes[0]"),
    (("name",), KeyError, "name"),
]


@pytest.mark.parametrize(("path", "value", "field"), BODY_CASES,
                         ids=[c[2] for c in BODY_CASES])
def test_a_record_with_a_malformed_payload_is_refused_naming_the_field(
        record: tuple[bytes, dict[str, Any], dict[str, Any]], path: tuple[Any, ...],
        value: Any, field: str) -> None:
    _, header, body = record
    data = craft_record(_edit(body, path, value), key=header["key"])
    _refused(lambda: read_record(data, "r.udr"), field)


def test_a_record_with_bad_constants_is_refused(
        record: tuple[bytes, dict[str, Any], dict[str, Any]]) -> None:
    _, header, body = record
    const = next(i for i, v in enumerate(body["values"]) if "const" in v)
    huge = _edit(body, ("values", const, "const", "shape"), [1 << 20, 1 << 20])
    _refused(lambda: read_record(craft_record(huge, key=header["key"]), "r.udr"),
             f"values[{const}].const.shape", "over the limit")
    odd = _edit(body, ("values", const, "const", "offset"), 3)
    _refused(lambda: read_record(craft_record(odd, key=header["key"]), "r.udr"),
             f"values[{const}].const.offset")
    # constants that do not fill the payload exactly (here: none at all)
    _refused(lambda: read_record(craft_record(body, key=header["key"]), "r.udr"),
             "sizes.payload")


HEADER_CASES = [
    ({"key": {"name": "x"}}, "key.precision"),
    ({"key": {"precision": "fp16", "input_dimensions": {"x": "1x4"}}},
     "key.input_dimensions.x"),
    ({"key": {"precision": "fp16", "output_tensors": "y"}}, "key.output_tensors"),
    ({"sizes": {"payload": 1 << 60}}, "sizes.payload"),
    ({"sizes": {"graph_json": -1}}, "sizes.graph_json"),
    ({"sizes": {"constant_bytes": "many"}}, "sizes.constant_bytes"),
]


@pytest.mark.parametrize(("change", "field"), HEADER_CASES, ids=[c[1] for c in HEADER_CASES])
def test_a_record_with_a_malformed_header_is_refused_naming_the_field(
        change: dict[str, Any], field: str) -> None:
    body = {"name": "g"}
    data = craft_record(body, key=change.get("key"), sizes=change.get("sizes"))
    _refused(lambda: read_record(data, "r.udr"), field)


def test_records_with_broken_framing_are_refused(
        record: tuple[bytes, dict[str, Any], dict[str, Any]]) -> None:
    data, header, body = record
    _refused(lambda: read_record(craft_record(None, text=b"{nope", key=header["key"]),
                                 "r.udr"), "payload", "JSON")
    _refused(lambda: read_record(craft_record([1, 2], key=header["key"]), "r.udr"), "payload")
    _refused(lambda: read_record(data[:-7], "r.udr"), "sizes.compressed", "truncated")
    _refused(lambda: read_record(_with_header(data, ("payload", "codec"), "gzip"), "r.udr"),
             "payload.codec")
    _refused(lambda: read_record(_with_header(data, ("payload", "sha256"), "beef"), "r.udr"),
             "payload.sha256")
    _refused(lambda: read_record(_with_header(data, ("sizes", "payload"), 99), "r.udr"),
             "payload", "the zstd frame holds")
    with pytest.raises(UserError, match="header is truncated or corrupt"):
        read_record(data[:16] + b"[" * 100_000 + data[16:], "r.udr")


def _with_header(data: bytes, path: tuple[str, ...], value: Any) -> bytes:
    length = struct.unpack_from("<I", data, 12)[0]
    header = _edit(json.loads(data[16:16 + length]), path, value)
    raw = json.dumps(header).encode()
    return data[:12] + struct.pack("<I", len(raw)) + raw + data[16 + length:]


# -- bundles -------------------------------------------------------------------------------------


BUNDLE_CASES: list[tuple[str, Callable[[], bytes], str | None]] = [
    ("graph not JSON", lambda: craft_bundle([({"name": "graph.json"}, b"{x")]), "graph.json"),
    ("graph a list", lambda: craft_bundle([graph_part([])]), "graph.json"),
    ("node inputs a number", lambda: craft_bundle([graph_part(
        _edit(GRAPH, ("nodes", 0, "inputs"), 5))]), "graph.json.nodes[0].inputs"),
    ("node without op", lambda: craft_bundle([graph_part(
        _edit(GRAPH, ("nodes", 0, "op"), KeyError))]), "graph.json.nodes[0].op"),
    ("absurd input shape", lambda: craft_bundle([graph_part(
        _edit(GRAPH, ("inputs", 0, "shape"), [1 << 20, 1 << 20, 1 << 20]))]),
     "graph.json.inputs[0].shape"),
    ("graph without inputs", lambda: craft_bundle([graph_part(
        _edit(GRAPH, ("inputs",), KeyError))]), "graph.json.inputs"),
    ("record row a string", lambda: craft_bundle([graph_part(GRAPH)], meta={
        "records": ["r"]}), "meta.records[0]"),
    ("record row naming a missing part", lambda: craft_bundle([graph_part(GRAPH)], meta={
        "records": [{"arch": "v73", "vtcm_mb": 8, "name": "n", "part": "records/x.udr"}]}),
     "meta.records[0].part"),
    ("record row with dims as text", lambda: craft_bundle([graph_part(GRAPH), (
        {"name": "records/x.udr"}, b"")], meta={"records": [{
            "arch": "v73", "vtcm_mb": 8, "name": "n", "part": "records/x.udr",
            "input_dimensions": {"x": "1x4"}}]}), "meta.records[0].input_dimensions.x"),
    ("no graph", lambda: craft_bundle([({"name": "notes.txt"}, b"hi")]), "parts"),
    ("meta a list", lambda: craft_bundle([graph_part(GRAPH)], meta=[1]), "meta"),
    ("parts not a list", lambda: craft_bundle([], header={"parts": {}}), "parts"),
    ("offset a string", lambda: craft_bundle([graph_part(GRAPH)], header={"parts": [
        {"name": "graph.json", "offset": "4096", "size": 2, "sha256": "0" * 64}]}),
     "parts[0].offset"),
    ("weight of objects", lambda: craft_bundle([graph_part(GRAPH), (
        {"name": "weights/0", "tensor": "w", "dtype": "object", "shape": [1]}, b"\0" * 8)]),
     "parts[1].dtype"),
    ("weight shape too big for its bytes", lambda: craft_bundle([graph_part(GRAPH), (
        {"name": "weights/0", "tensor": "w", "dtype": "float32", "shape": [3]}, b"\0" * 8)]),
     "parts[1].shape"),
    ("weight of absurd shape", lambda: craft_bundle([graph_part(GRAPH), (
        {"name": "weights/0", "tensor": "w", "dtype": "float32", "shape": [1 << 40]}, b"")]),
     "parts[1].shape"),
    ("weight without tensor", lambda: craft_bundle([graph_part(GRAPH), (
        {"name": "weights/0", "dtype": "float32", "shape": [2]}, b"\0" * 8)]),
     "parts[1].tensor"),
    ("part twice", lambda: craft_bundle([graph_part(GRAPH), graph_part(GRAPH)]),
     "parts[1].name"),
    ("opdefs without a name", lambda: craft_bundle([graph_part(GRAPH), (
        {"name": "opdefs.json"}, b'{"domain": "d"}')]), "opdefs.json.name"),
    ("opdefs not JSON", lambda: craft_bundle([graph_part(GRAPH), (
        {"name": "opdefs.json"}, b"\xff")]), "opdefs.json"),
    ("bad digest", lambda: craft_bundle([graph_part(GRAPH)])[:-1] + b"]", "parts[0].sha256"),
    ("truncated", lambda: craft_bundle([graph_part(GRAPH)])[:-5], "parts[0].size"),
    ("header not JSON", lambda: BUNDLE_MAGIC + struct.pack("<IQ", 1, 3) + b"{x]", None),
    ("header size past the end", lambda: BUNDLE_MAGIC + struct.pack("<IQ", 1, 1 << 40), None),
]


@pytest.mark.parametrize(("name", "make", "field"), BUNDLE_CASES,
                         ids=[c[0] for c in BUNDLE_CASES])
def test_a_malformed_bundle_is_refused_naming_the_part(
        name: str, make: Callable[[], bytes], field: str | None) -> None:
    _refused(lambda: read_bundle(make(), "b.udb"), field)


def test_a_bundle_with_malformed_encodings_is_refused() -> None:
    for data, field in [(b"{x", "encodings.json"),
                        (b'{"param_encodings": {"w": ["8 bits"]}}',
                         "encodings.json: param_encodings.w[0]"),
                        (b'{"activation_encodings": {"y": [{"bitwidth": 1000000000}]}}',
                         "encodings.json: activation_encodings.y[0]")]:
        bundle = read_bundle(craft_bundle([graph_part(GRAPH),
                                           ({"name": "encodings.json"}, data)]), "q.udb")
        _refused(lambda b=bundle: qmodel.from_bundle(b, "q.udb"), field)


# -- encodings, manifests, input files, plain reads ---------------------------------------------


ENCODING_CASES = [
    ([], None),
    ({"activation_encodings": []}, "activation_encodings"),
    ({"activation_encodings": {"x": "int8"}}, "activation_encodings.x[0]"),
    ({"activation_encodings": {"x": []}}, "activation_encodings.x"),
    ({"param_encodings": {"w": [{"bitwidth": 8, "scale": "inf", "offset": 0}]}},
     "param_encodings.w[0]"),
    ({"param_encodings": {"w": [{"bitwidth": 8, "scale": 0.1, "offset": 1e300}]}},
     "param_encodings.w[0]"),
    ({"param_encodings": {"w": [{"bitwidth": 8, "min": -1e308, "max": 1e308}]}},
     "param_encodings.w[0]"),
    ({"param_encodings": {"w": [{"bitwidth": 2 ** 40, "min": 0, "max": 1}]}},
     "param_encodings.w[0]"),
]


@pytest.mark.parametrize(("doc", "field"), ENCODING_CASES, ids=[str(c[1]) for c in
                                                                ENCODING_CASES])
def test_a_malformed_encodings_file_is_refused(tmp_path: Path, doc: Any,
                                               field: str | None) -> None:
    path = tmp_path / "enc.json"
    path.write_text(json.dumps(doc))
    _refused(lambda: encodings.load(path), field)


def test_a_damaged_manifest_reads_as_its_sound_entries(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    good = "a" * 64
    path.write_text(json.dumps({"ok/file": good, "../escape": good, "x": 3, "y": "short",
                                "a/./b": good, "/abs": good}))
    assert read_manifest(path) == {"ok/file": good}
    for text in ("[1, 2]", "{nope", "[" * 100_000, "\ud800"):
        path.write_text(text, errors="surrogatepass")
        assert read_manifest(path) == {}
    path.write_bytes(b" " * ((64 << 20) + 1))
    assert read_manifest(path) == {}


def test_crafted_input_files_are_refused(tmp_path: Path) -> None:
    npy = tmp_path / "big.npy"
    npy.write_bytes(b"\x93NUMPY\x01\x00" + _npy_header("{'descr': '<f4', 'fortran_order': "
                                                        "False, 'shape': (1099511627776,), }"))
    _refused(lambda: load_tensor(npy, "x", "float32", None), None, "input 'x'")
    npy.write_bytes(b"\x93NUMPY\x01\x00" + _npy_header("{'descr': '|O', 'fortran_order': "
                                                        "False, 'shape': (1,), }"))
    _refused(lambda: load_tensor(npy, "x", "float32", None), None, "input 'x'")
    raw = tmp_path / "x.raw"
    raw.write_bytes(b"\0" * 12)
    _refused(lambda: load_tensor(raw, "x", "float32", (1, 4)), None, "expected 16 bytes")
    _refused(lambda: load_tensor(raw, "x", "float32", (1 << 20, 1 << 20)), None,
             "over the limit")


def _npy_header(text: str) -> bytes:
    body = text.encode() + b" " * (118 - len(text)) + b"\n"
    return struct.pack("<H", len(body)) + body


def test_read_limited_does_not_allocate_its_limit(tmp_path: Path) -> None:
    """With 1 GiB of address space, a small file still reads with a 16 GiB limit."""
    path = tmp_path / "small.txt"
    path.write_bytes(b"hello")
    script = ("import resource, sys\n"
              "from udo_build.source import read_limited\n"
              "resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))\n"
              f"print(read_limited({str(path)!r}, 16 << 30, 'file'))\n")
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         cwd=REPO, env=_env(), check=False)
    assert (out.returncode, out.stdout.strip()) == (0, "b'hello'"), out.stderr
    with pytest.raises(UserError, match="over the limit of 4 bytes"):
        read_limited(path, 4, "file")


# -- recipes ------------------------------------------------------------------------------------


def _recipe(tmp_path: Path, text: str) -> Path:
    (tmp_path / ".udo-build-root").touch()
    path = tmp_path / "r.yaml"
    path.write_text(text)
    return path


def test_a_recipe_merging_itself_is_refused_at_its_line(tmp_path: Path) -> None:
    path = _recipe(tmp_path, "recipe: 1\nname: x\npackage: &p {<<: *p}\n")
    error = _refused(lambda: load_recipe(path), "package", "merges a mapping into itself")
    assert error.problem.line == 3


def test_recipe_dimensions_implying_absurd_memory_are_refused_at_their_line(
        tmp_path: Path) -> None:
    model = tmp_path / "m.onnx"
    model.write_bytes(b"")
    path = _recipe(tmp_path, "recipe: 1\nname: x\nmodel: {onnx: m.onnx}\nprepare:\n"
                   "  matrix:\n    soc: [sm8550]\n    input_dimensions:\n"
                   "      - {x: [1, 3, 32, 32]}\n      - {x: [64, 3, 100000, 100000]}\n")
    error = _refused(lambda: load_recipe(path), "prepare.matrix.input_dimensions[1].x",
                     "absurd memory")
    assert error.problem.line == 9


# -- through the command line, with the memory measured ------------------------------------------


def _env() -> dict[str, str]:
    import os

    return {**os.environ, "PYTHONPATH": str(REPO), "NO_COLOR": "1"}


MEASURE = """
import resource, subprocess, sys
out = subprocess.run(sys.argv[1:], capture_output=True, text=True)
peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(out.returncode, peak)
print(out.stderr)
"""


def udo_build(*args: str, cwd: Path) -> tuple[int, int, str]:
    """Exit code, peak RSS (KiB) and stderr of a udo-build command, measured by a parent that
    runs nothing else."""
    out = subprocess.run([sys.executable, "-c", MEASURE, sys.executable, "-m", "udo_build",
                          *args], capture_output=True, text=True, cwd=cwd, env=_env(),
                         check=True)
    head, _, stderr = out.stdout.partition("\n")
    code, peak = head.split()
    return int(code), int(peak), stderr


def test_bombs_and_crafted_files_through_the_cli(
        tmp_path: Path, record: tuple[bytes, dict[str, Any], dict[str, Any]]) -> None:
    _, header, body = record
    # 1 GiB of zeros declared and compressed (a 40 KB file): the length of JSON it begins
    # with (0) is not the header's, refused after 8 bytes
    (tmp_path / "bomb.udr").write_bytes(craft_record(None, text=b"", zeros=1 << 30,
                                                     sizes={"graph_json": 100}))
    # a payload whose JSON is sound and whose one constant is 1 GiB of zeros, with a wrong
    # digest: hashed in chunks, then refused
    values = [{"id": 0, "name": "c", "shape": [1 << 28], "dtype": "float32",
               "const": {"offset": 0, "dtype": "float32", "shape": [1 << 28]}}]
    sound = {**body, "values": values, "ops": [], "inputs": [], "outputs": [],
             "tensors": [], "io": {"inputs": {}, "outputs": {}}}
    bomb = bytearray(craft_record(sound, key=header["key"], zeros=1 << 30))
    digest_at = bomb.index(b'"sha256": "') + 11
    bomb[digest_at:digest_at + 4] = b"0000" if bomb[digest_at:digest_at + 4] != b"0000" \
        else b"1111"
    (tmp_path / "digest.udr").write_bytes(bytes(bomb))
    (tmp_path / "bad.udb").write_bytes(craft_bundle([graph_part(
        _edit(GRAPH, ("nodes", 0, "attrs"), "none"))]))
    (tmp_path / "rec.yaml").write_text("recipe: 1\nname: x\npackage: &p {<<: *p}\n")
    (tmp_path / ".udo-build-root").touch()
    cases = [(("info", "bomb.udr"), "sizes.graph_json"),
             (("info", "digest.udr"), "digest mismatch"),
             (("info", "bad.udb"), "graph.json.nodes[0].attrs"),
             (("validate", "rec.yaml"), "rec.yaml:3")]
    for args, expected in cases:
        code, peak, stderr = udo_build(*args, cwd=tmp_path)
        assert code == 2, (args, stderr)
        assert expected in stderr and args[1] in stderr, (args, stderr)
        assert peak < MAX_RSS_KB, (args, peak)


def test_a_sound_record_with_huge_constants_shows_its_info_in_bounded_memory(
        tmp_path: Path, record: tuple[bytes, dict[str, Any], dict[str, Any]]) -> None:
    """`info` needs no constant: a record holding 1 GiB of them (valid digest) is listed
    without reading them into memory; the graph reads them when asked."""
    _, header, body = record
    values = [{"id": 0, "name": "c", "shape": [1 << 28], "dtype": "float32",
               "const": {"offset": 0, "dtype": "float32", "shape": [1 << 28]}}]
    sound = {**body, "values": values, "ops": [], "inputs": [], "outputs": [{
        "name": "c", "value": 0}], "tensors": [], "io": {"inputs": {}, "outputs": {
            "c": [1 << 28]}}}
    (tmp_path / "big.udr").write_bytes(craft_record(sound, key=header["key"], zeros=1 << 30))
    code, peak, stderr = udo_build("info", "big.udr", cwd=tmp_path)
    assert code == 0, stderr
    assert peak < MAX_RSS_KB, peak


def test_constant_of_shape_of_terabytes_is_refused_at_convert(tmp_path: Path) -> None:
    import onnx
    from onnx import TensorProto, helper

    shape = helper.make_tensor("shape", TensorProto.INT64, [4], [1024, 1024, 1024, 1024])
    graph = helper.make_graph(
        [helper.make_node("ConstantOfShape", ["shape"], ["big"], name="fill"),
         helper.make_node("ReduceSum", ["big"], ["y"], keepdims=0, name="sum")],
        "g", [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, [])], [shape])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, tmp_path / "m.onnx")
    code, peak, stderr = udo_build("convert", "m.onnx", "--out", "m.udb", cwd=tmp_path)
    assert code == 2, stderr
    assert "m.onnx" in stderr and "big" in stderr and "over the limit" in stderr, stderr
    assert peak < MAX_RSS_KB, peak


def test_constants_over_the_kept_size_are_read_again_when_the_graph_is_asked_for(
        record: tuple[bytes, dict[str, Any], dict[str, Any]]) -> None:
    import numpy as np

    from udo_build.compiler.record_read import KEEP

    _, header, body = record
    count = KEEP // 4 + 1000
    values = [{"id": 0, "name": "c", "shape": [count], "dtype": "float32",
               "const": {"offset": 0, "dtype": "float32", "shape": [count]}}]
    sound = {**body, "values": values, "ops": [], "inputs": [], "outputs": [{
        "name": "c", "value": 0}], "tensors": [], "io": {"inputs": {}, "outputs": {
            "c": [count]}}}
    want = np.arange(count, dtype="<f4")
    loaded = read_record(craft_record(sound, want.tobytes(), key=header["key"]), "r.udr")
    assert loaded.constants.kept is None  # only hashed while reading
    np.testing.assert_array_equal(loaded.graph.consts[1], want)


def test_input_dimensions_whose_inner_tensors_are_absurd_are_refused_at_prepare() -> None:
    import numpy as np

    from udo_build.compiler.shapes import infer
    from udo_build.ir import Graph, Model, Node, TensorInfo

    graph = Graph("g", (TensorInfo("x", "float32", (1, 3, 8, 8)),),
                  (TensorInfo("y", "float32", (1, 64, 8, 8)),),
                  (Node.make("conv", "Conv", ["x", "w"], ["y"], {"kernel_shape": [1, 1]}),))
    model = Model(graph, {"w": np.zeros((64, 3, 1, 1), np.float32)})
    assert infer(model, {"x": (1, 3, 16, 16)}).infos["y"].shape == (1, 64, 16, 16)
    with pytest.raises(UserError, match=r"tensor y \(output of node conv \(Conv\)\).*over the "
                                        "limit") as info:
        infer(model, {"x": (1, 3, 8192, 8192)})
    assert info.value.problem.field == "y"


def test_the_constant_of_shape_kernel_refuses_terabytes() -> None:
    import numpy as np

    from udo_build.kernels.default.shape import constant_of_shape

    assert constant_of_shape(np.array([2, 3])).shape == (2, 3)
    with pytest.raises(UserError, match="ConstantOfShape: a tensor of shape 1024x1024x1024x1024"):
        constant_of_shape(np.array([1024, 1024, 1024, 1024]))
