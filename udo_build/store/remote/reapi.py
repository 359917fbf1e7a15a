"""The messages of the Remote Execution API (REAPI v2) that udo-build's remote cache uses: the
gRPC transport's requests and answers in plain Python, and the same messages as protobuf
classes, declared as data (the oracle of the tests, and the benches' plain client).

The transport (`grpccache`) writes its requests and reads its answers by their wire format
(the varints and length-delimited fields of `entries`): a fresh checkout against a gRPC cache
does not import protobuf (40 ms of imports at a light load, more than the rest of this
transport but grpc itself), and grpcio needs no protobuf either. The bytes are those of
protobuf's deterministic serialization (fields in number order, defaults left out:
tests/store/test_reapi_wire.py compares every request with protobuf's, and reads answers that
protobuf wrote), and reading follows protobuf's rules as `entries` does (fields in any order,
unknown fields skipped, the last value of a scalar kept).

The protobuf classes (`Digest`, `ActionResult`, `BatchReadBlobsResponse`, ...) are made on
first use from descriptors written below as data (the `protobuf` package's descriptor_pb2 and
message_factory, in a private descriptor pool): no generated code, no .proto files. Only the
fields udo-build reads or writes are declared, with the numbers and types of the public protos
(build/bazel/remote/execution/v2/remote_execution.proto, google/bytestream/bytestream.proto,
google/rpc/status.proto). The action-cache entry, an `ActionResult` naming the signed envelope,
is written and read by `entries`, whose names are re-exported here.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from functools import cache
from typing import Any

from .entries import (  # the wire format's pieces with the entry's names
    ENTRY_PATH,
    LENGTH,
    OUTPUTS_DIR,
    SHA256,
    VARINT,
    Malformed,
    Pointer,
    _digest,
    _field,
    _read_digest,
    _text,
    _varint,
    entry_bytes,
    entry_envelope,
    fields,
)

__all__ = ["ENTRY_PATH", "OUTPUTS_DIR", "SHA256", "Malformed", "Pointer", "entry_bytes",
           "entry_envelope"]

REAPI = "build.bazel.remote.execution.v2"
ACTION_SIZE = 1  # the size_bytes of an action digest (see `action_digest`)

# (file, package, dependencies, {message: fields}); a field is (name, number, type): a scalar
# type's name, or a message's name (relative to the package, or absolute with a leading dot);
# "*" before the type: repeated. A message "A.B" is B nested in A.
Fields = tuple[tuple[str, int, str], ...]
FILES: tuple[tuple[str, str, tuple[str, ...], dict[str, Fields]], ...] = (
    ("google/rpc/status.proto", "google.rpc", (), {
        "Status": (("code", 1, "int32"), ("message", 2, "string")),
    }),
    ("google/bytestream/bytestream.proto", "google.bytestream", (), {
        "ReadRequest": (("resource_name", 1, "string"), ("read_offset", 2, "int64"),
                        ("read_limit", 3, "int64")),
        "ReadResponse": (("data", 10, "bytes"),),
        "WriteRequest": (("resource_name", 1, "string"), ("write_offset", 2, "int64"),
                         ("finish_write", 3, "bool"), ("data", 10, "bytes")),
        "WriteResponse": (("committed_size", 1, "int64"),),
    }),
    ("build/bazel/remote/execution/v2/remote_execution.proto", REAPI,
     ("google/rpc/status.proto",), {
        "Digest": (("hash", 1, "string"), ("size_bytes", 2, "int64")),
        "OutputFile": (("path", 1, "string"), ("digest", 2, "Digest"),
                       ("is_executable", 4, "bool"), ("contents", 5, "bytes")),
        "ActionResult": (("output_files", 2, "*OutputFile"), ("exit_code", 4, "int32")),
        "GetActionResultRequest": (("instance_name", 1, "string"),
                                   ("action_digest", 2, "Digest"),
                                   ("inline_output_files", 5, "*string")),
        "UpdateActionResultRequest": (("instance_name", 1, "string"),
                                      ("action_digest", 2, "Digest"),
                                      ("action_result", 3, "ActionResult")),
        "FindMissingBlobsRequest": (("instance_name", 1, "string"),
                                    ("blob_digests", 2, "*Digest")),
        "FindMissingBlobsResponse": (("missing_blob_digests", 2, "*Digest"),),
        "BatchUpdateBlobsRequest": (("instance_name", 1, "string"),
                                    ("requests", 2, "*BatchUpdateBlobsRequest.Request")),
        "BatchUpdateBlobsRequest.Request": (("digest", 1, "Digest"), ("data", 2, "bytes")),
        "BatchUpdateBlobsResponse": (("responses", 1, "*BatchUpdateBlobsResponse.Response"),),
        "BatchUpdateBlobsResponse.Response": (("digest", 1, "Digest"),
                                              ("status", 2, ".google.rpc.Status")),
        "BatchReadBlobsRequest": (("instance_name", 1, "string"), ("digests", 2, "*Digest")),
        "BatchReadBlobsResponse": (("responses", 1, "*BatchReadBlobsResponse.Response"),),
        "BatchReadBlobsResponse.Response": (("digest", 1, "Digest"), ("data", 2, "bytes"),
                                            ("status", 3, ".google.rpc.Status")),
        "GetCapabilitiesRequest": (("instance_name", 1, "string"),),
        "ServerCapabilities": (("cache_capabilities", 1, "CacheCapabilities"),),
        "CacheCapabilities": (("max_batch_total_size_bytes", 4, "int64"),),
    }),
)

SCALARS = ("string", "bytes", "int64", "int32", "bool")


def _file(name: str, package: str, deps: tuple[str, ...], messages: dict[str, Fields]) -> Any:
    """The FileDescriptorProto of one of FILES."""
    from google.protobuf import descriptor_pb2

    spec_type = descriptor_pb2.FieldDescriptorProto
    types = {kind: getattr(spec_type, f"TYPE_{kind.upper()}") for kind in SCALARS}
    proto = descriptor_pb2.FileDescriptorProto(name=name, package=package, syntax="proto3",
                                               dependency=list(deps))
    made: dict[str, Any] = {}
    for full, declared in messages.items():
        outer, _, inner = full.rpartition(".")
        parent = made[outer].nested_type if outer else proto.message_type
        message = made[full] = parent.add(name=inner)
        for field, number, kind in declared:
            repeated, kind = kind.startswith("*"), kind.lstrip("*")
            spec = message.field.add(name=field, number=number, label=spec_type.LABEL_REPEATED
                                     if repeated else spec_type.LABEL_OPTIONAL)
            if kind in types:
                spec.type = types[kind]
            else:
                spec.type = spec_type.TYPE_MESSAGE
                spec.type_name = kind if kind.startswith(".") else f".{package}.{kind}"
    return proto


@cache
def _classes() -> dict[str, Any]:
    from google.protobuf import descriptor_pool, message_factory

    pool = descriptor_pool.DescriptorPool()  # private: no clash with generated REAPI code
    for spec in FILES:
        pool.Add(_file(*spec))
    return {f"{package}.{message}": message_factory.GetMessageClass(
                pool.FindMessageTypeByName(f"{package}.{message}"))
            for _, package, _, messages in FILES for message in messages}


def __getattr__(name: str) -> Any:
    """A protobuf class by its message's name (`Digest`, `BatchReadBlobsResponse`, ...), made
    on first use."""
    for _, package, _, messages in FILES:
        if name in messages:
            return _classes()[f"{package}.{name}"]
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def action_digest(key: str) -> Any:
    """The Digest an action cache is asked under for an action key (a protobuf `Digest`; the
    transport writes the same as `_action(key)`). The key is the sha256 of the action's
    canonical JSON, which no server ever sees; servers key the action cache on hash and size
    and refuse a size of 0 with a hash that is not the empty blob's, so the size is a fixed
    ACTION_SIZE."""
    return _classes()[f"{REAPI}.Digest"](hash=key, size_bytes=ACTION_SIZE)


# -- the transport's requests, by their wire format ----------------------------------------------

def _string(number: int, text: str) -> bytes:
    return _field(number, text.encode()) if text else b""


def _int(number: int, value: int) -> bytes:
    return _varint(number << 3 | VARINT) + _varint(value) if value else b""


def _action(key: str) -> bytes:
    return _field(2, _digest(key, ACTION_SIZE))


def get_action_result(instance: str, key: str, inline: Iterable[str] = ()) -> bytes:
    """GetActionResultRequest: instance_name 1, action_digest 2, inline_output_files 5."""
    return _string(1, instance) + _action(key) + b"".join(_field(5, p.encode()) for p in inline)


def update_action_result(instance: str, key: str, result: bytes) -> bytes:
    """UpdateActionResultRequest: instance_name 1, action_digest 2, action_result 3 (a
    serialized ActionResult, as `entries` writes it)."""
    return _string(1, instance) + _action(key) + _field(3, result)


def find_missing_blobs(instance: str, blobs: Iterable[tuple[str, int]]) -> bytes:
    """FindMissingBlobsRequest: instance_name 1, blob_digests 2 (hash, size each)."""
    return _string(1, instance) + b"".join(_field(2, _digest(h, n)) for h, n in blobs)


def batch_read_blobs(instance: str, blobs: Iterable[tuple[str, int]]) -> bytes:
    """BatchReadBlobsRequest: instance_name 1, digests 2."""
    return _string(1, instance) + b"".join(_field(2, _digest(h, n)) for h, n in blobs)


def batch_update_blobs(instance: str, blobs: Iterable[tuple[str, bytes]]) -> bytes:
    """BatchUpdateBlobsRequest: instance_name 1, requests 2 (digest 1, data 2 each)."""
    return _string(1, instance) + b"".join(
        _field(2, _field(1, _digest(h, len(data))) + (_field(2, data) if data else b""))
        for h, data in blobs)


def read_request(resource: str) -> bytes:
    """ByteStream ReadRequest: resource_name 1 (from the start, to the end)."""
    return _string(1, resource)


def write_request(resource: str, offset: int, data: bytes, finish: bool) -> bytes:
    """ByteStream WriteRequest: resource_name 1, write_offset 2, finish_write 3, data 10."""
    return (_string(1, resource) + _int(2, offset) + _int(3, int(finish))
            + (_field(10, data) if data else b""))


# -- the answers ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class BlobAnswer:
    """One answer of a batch call: the blob's hash, its bytes (reads), its status."""

    hash: str
    data: bytes
    code: int  # google.rpc.Code: 0 OK, 5 NOT_FOUND, ...
    message: str


def batch_answers(answer: bytes, *, read: bool) -> list[BlobAnswer]:
    """The responses (1) of a BatchReadBlobsResponse (`read`: digest 1, data 2, status 3) or
    a BatchUpdateBlobsResponse (digest 1, status 2)."""
    status_at = 3 if read else 2
    found = []
    for number, wire, value in fields(answer):
        if number != 1 or wire != LENGTH:
            continue
        assert isinstance(value, bytes)
        digest, data, status = ("", 0), b"", (0, "")
        for inner, inner_wire, item in fields(value):
            if inner_wire != LENGTH:
                continue
            assert isinstance(item, bytes)
            if inner == 1:
                digest = _read_digest(item, digest)
            elif inner == 2 and read:
                data = item
            elif inner == status_at:
                status = _status(item, status)
        found.append(BlobAnswer(digest[0], data, *status))
    return found


def _status(data: bytes, found: tuple[int, str]) -> tuple[int, str]:
    """A google.rpc.Status (code 1: int32, message 2) merged into `found`."""
    code, message = found
    for number, wire, value in fields(data):
        if number == 1 and wire == VARINT:
            assert isinstance(value, int)
            code = _signed(value) & 0xFFFFFFFF
            code = code - (1 << 32) if code >= 1 << 31 else code  # int32
        elif number == 2 and wire == LENGTH:
            message = _text(value)
    return code, message


def missing_blobs(answer: bytes) -> set[str]:
    """The hashes of a FindMissingBlobsResponse's missing_blob_digests (2)."""
    return {_read_digest(value, ("", 0))[0] for number, wire, value in fields(answer)
            if number == 2 and wire == LENGTH and isinstance(value, bytes)}


def read_data(answer: bytes) -> bytes:
    """The data (10) of a ByteStream ReadResponse."""
    data = b""
    for number, wire, value in fields(answer):
        if number == 10 and wire == LENGTH:
            assert isinstance(value, bytes)
            data = value
    return data


def committed_size(answer: bytes) -> int:
    """The committed_size (1, int64) of a ByteStream WriteResponse."""
    size = 0
    for number, wire, value in fields(answer):
        if number == 1 and wire == VARINT:
            assert isinstance(value, int)
            size = _signed(value)
    return size


def _signed(value: int) -> int:
    """A varint's 64 bits as an int64."""
    return value - (1 << 64) if value >= 1 << 63 else value
