"""The messages of the Remote Execution API (REAPI v2) that udo-build's remote cache uses, and
the action-cache entry built from them.

The message classes are made at import time from descriptors written below as data (the
`protobuf` package's descriptor_pb2 and message_factory, in a private descriptor pool): no
generated code, no .proto files. Only the fields udo-build reads or writes are declared, with
the numbers and types of the public protos (build/bazel/remote/execution/v2/
remote_execution.proto, google/bytestream/bytestream.proto, google/rpc/status.proto), so any
REAPI server parses what we send; fields we do not declare are kept as unknown fields when a
server sends them, and ignored.

Only the gRPC transport imports this module (protobuf costs a fresh checkout tens of
milliseconds); the action-cache entry, an `ActionResult` naming the signed envelope, is written
and read without protobuf by `entries`, whose names are re-exported here.
"""

from __future__ import annotations

from typing import Any

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

from .entries import ENTRY_PATH, OUTPUTS_DIR, SHA256, Pointer, entry_bytes, entry_envelope

__all__ = ["ENTRY_PATH", "OUTPUTS_DIR", "SHA256", "Pointer", "entry_bytes", "entry_envelope"]

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

_F = descriptor_pb2.FieldDescriptorProto
SCALARS = {"string": _F.TYPE_STRING, "bytes": _F.TYPE_BYTES, "int64": _F.TYPE_INT64,
           "int32": _F.TYPE_INT32, "bool": _F.TYPE_BOOL}


def _file(name: str, package: str, deps: tuple[str, ...],
          messages: dict[str, Fields]) -> descriptor_pb2.FileDescriptorProto:
    proto = descriptor_pb2.FileDescriptorProto(name=name, package=package, syntax="proto3",
                                               dependency=list(deps))
    made: dict[str, Any] = {}
    for full, fields in messages.items():
        outer, _, inner = full.rpartition(".")
        parent = made[outer].nested_type if outer else proto.message_type
        message = made[full] = parent.add(name=inner)
        for field, number, kind in fields:
            repeated, kind = kind.startswith("*"), kind.lstrip("*")
            spec = message.field.add(name=field, number=number, label=_F.LABEL_REPEATED
                                     if repeated else _F.LABEL_OPTIONAL)
            if kind in SCALARS:
                spec.type = SCALARS[kind]
            else:
                spec.type = _F.TYPE_MESSAGE
                spec.type_name = kind if kind.startswith(".") else f".{package}.{kind}"
    return proto


def _classes() -> dict[str, Any]:
    pool = descriptor_pool.DescriptorPool()  # private: no clash with generated REAPI code
    for spec in FILES:
        pool.Add(_file(*spec))
    return {f"{package}.{message}": message_factory.GetMessageClass(
                pool.FindMessageTypeByName(f"{package}.{message}"))
            for _, package, _, messages in FILES for message in messages}


_MESSAGES = _classes()
Status = _MESSAGES["google.rpc.Status"]
ReadRequest = _MESSAGES["google.bytestream.ReadRequest"]
ReadResponse = _MESSAGES["google.bytestream.ReadResponse"]
WriteRequest = _MESSAGES["google.bytestream.WriteRequest"]
WriteResponse = _MESSAGES["google.bytestream.WriteResponse"]
Digest = _MESSAGES[f"{REAPI}.Digest"]
OutputFile = _MESSAGES[f"{REAPI}.OutputFile"]
ActionResult = _MESSAGES[f"{REAPI}.ActionResult"]
GetActionResultRequest = _MESSAGES[f"{REAPI}.GetActionResultRequest"]
UpdateActionResultRequest = _MESSAGES[f"{REAPI}.UpdateActionResultRequest"]
FindMissingBlobsRequest = _MESSAGES[f"{REAPI}.FindMissingBlobsRequest"]
FindMissingBlobsResponse = _MESSAGES[f"{REAPI}.FindMissingBlobsResponse"]
BatchUpdateBlobsRequest = _MESSAGES[f"{REAPI}.BatchUpdateBlobsRequest"]
BatchUpdateBlobsResponse = _MESSAGES[f"{REAPI}.BatchUpdateBlobsResponse"]
BatchReadBlobsRequest = _MESSAGES[f"{REAPI}.BatchReadBlobsRequest"]
BatchReadBlobsResponse = _MESSAGES[f"{REAPI}.BatchReadBlobsResponse"]
GetCapabilitiesRequest = _MESSAGES[f"{REAPI}.GetCapabilitiesRequest"]
ServerCapabilities = _MESSAGES[f"{REAPI}.ServerCapabilities"]


def action_digest(key: str) -> Any:
    """The Digest an action cache is asked under for an action key. The key is the sha256 of
    the action's canonical JSON, which no server ever sees; servers key the action cache on
    hash and size and refuse a size of 0 with a hash that is not the empty blob's, so the size
    is a fixed ACTION_SIZE."""
    return Digest(hash=key, size_bytes=ACTION_SIZE)
