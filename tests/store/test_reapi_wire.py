"""The gRPC transport's REAPI requests and answers in plain Python (`reapi`'s wire functions)
against protobuf itself (`reapi`'s classes): every request is byte for byte what protobuf's
deterministic serialization writes, every answer protobuf writes reads back the same (unknown
fields and fields out of order too), bad bytes are Malformed, and a build's calls import no
protobuf."""

from __future__ import annotations

import subprocess
import sys

import pytest

from udo_build.store.remote import reapi as R

A, B = "a" * 64, "b" * 64


def _pb(message: object) -> bytes:
    return bytes(message.SerializeToString(deterministic=True))  # type: ignore[attr-defined]


def _digest(hash_: str, size: int) -> object:
    return R.Digest(hash=hash_, size_bytes=size)


@pytest.mark.parametrize("instance", ["", "team/a"])
def test_requests_are_protobufs_bytes(instance: str) -> None:
    entry = R.entry_bytes(R.Pointer(A, 321), {"record": (B, 1 << 40), "empty": ("", 0)})
    pairs = [
        (R.get_action_result(instance, A, [R.ENTRY_PATH, ""]),
         R.GetActionResultRequest(instance_name=instance, action_digest=R.action_digest(A),
                                  inline_output_files=[R.ENTRY_PATH, ""])),
        (R.get_action_result(instance, A),
         R.GetActionResultRequest(instance_name=instance, action_digest=R.action_digest(A))),
        (R.update_action_result(instance, B, entry),
         R.UpdateActionResultRequest(instance_name=instance, action_digest=R.action_digest(B),
                                     action_result=R.ActionResult.FromString(entry))),
        (R.find_missing_blobs(instance, [(A, 0), (B, 7)]),
         R.FindMissingBlobsRequest(instance_name=instance,
                                   blob_digests=[_digest(A, 0), _digest(B, 7)])),
        (R.find_missing_blobs(instance, []), R.FindMissingBlobsRequest(instance_name=instance)),
        (R.batch_read_blobs(instance, [(A, 1 << 33)]),
         R.BatchReadBlobsRequest(instance_name=instance, digests=[_digest(A, 1 << 33)])),
        (R.batch_update_blobs(instance, [(A, b"\x00\xff"), (B, b"")]),
         R.BatchUpdateBlobsRequest(instance_name=instance, requests=[
             R.BatchUpdateBlobsRequest.Request(digest=_digest(A, 2), data=b"\x00\xff"),
             R.BatchUpdateBlobsRequest.Request(digest=_digest(B, 0), data=b"")])),
        (R.read_request(f"{instance}/blobs/{A}/3"),
         R.ReadRequest(resource_name=f"{instance}/blobs/{A}/3")),
        (R.write_request("r", 0, b"xy", False), R.WriteRequest(resource_name="r", data=b"xy")),
        (R.write_request("", 1 << 20, b"z", True),
         R.WriteRequest(write_offset=1 << 20, data=b"z", finish_write=True)),
    ]
    for ours, theirs in pairs:
        assert ours == _pb(theirs), type(theirs).__name__


def test_batch_answers_read_what_protobuf_wrote() -> None:
    read = R.BatchReadBlobsResponse(responses=[
        R.BatchReadBlobsResponse.Response(digest=_digest(A, 2), data=b"hi",
                                          status=R.Status(code=0)),
        R.BatchReadBlobsResponse.Response(digest=_digest(B, 9),
                                          status=R.Status(code=5, message="not found")),
        R.BatchReadBlobsResponse.Response(digest=_digest(A, 1), status=R.Status(code=-2))])
    assert R.batch_answers(_pb(read), read=True) == [
        R.BlobAnswer(A, b"hi", 0, ""), R.BlobAnswer(B, b"", 5, "not found"),
        R.BlobAnswer(A, b"", -2, "")]
    update = R.BatchUpdateBlobsResponse(responses=[R.BatchUpdateBlobsResponse.Response(
        digest=_digest(B, 3), status=R.Status(code=8, message="full"))])
    assert R.batch_answers(_pb(update), read=False) == [R.BlobAnswer(B, b"", 8, "full")]


def test_other_answers_read_what_protobuf_wrote() -> None:
    missing = R.FindMissingBlobsResponse(missing_blob_digests=[_digest(A, 1), _digest(B, 2)])
    assert R.missing_blobs(_pb(missing)) == {A, B}
    assert R.missing_blobs(b"") == set()
    assert R.read_data(_pb(R.ReadResponse(data=b"\x00" * 70_000))) == b"\x00" * 70_000
    assert R.committed_size(_pb(R.WriteResponse(committed_size=1 << 40))) == 1 << 40
    assert R.committed_size(_pb(R.WriteResponse(committed_size=-1))) == -1


def test_unknown_fields_and_any_order_are_read_as_protobuf_reads_them() -> None:
    unknown = bytes.fromhex("f8 07 01") + bytes.fromhex("82 08 02 68 69")  # 127 varint, 128 LEN
    status = R.Status(code=3, message="bad")
    response = _pb(R.BatchReadBlobsResponse.Response(status=status)) + unknown \
        + _pb(R.BatchReadBlobsResponse.Response(digest=_digest(A, 2), data=b"ok"))
    answer = unknown + bytes([0x0A, len(response)]) + response
    parsed = R.BatchReadBlobsResponse.FromString(answer).responses[0]
    assert R.batch_answers(answer, read=True) == [R.BlobAnswer(
        parsed.digest.hash, parsed.data, parsed.status.code, parsed.status.message)]
    data = _pb(R.ReadResponse(data=b"first")) + unknown + _pb(R.ReadResponse(data=b"last"))
    assert R.read_data(data) == R.ReadResponse.FromString(data).data == b"last"


@pytest.mark.parametrize("bad", [b"\x0a\x05ab", b"\x0a\x02\x0a\xff", b"\xff\xff\xff"])
def test_bad_answers_are_malformed(bad: bytes) -> None:
    with pytest.raises(R.Malformed):
        R.batch_answers(bad, read=True)


def test_the_transports_calls_import_no_protobuf() -> None:
    code = """
import sys
from udo_build.store.remote.grpccache import GrpcCache
from udo_build.store.remote.transport import RemoteError, RemoteOptions
cache = GrpcCache("grpc://127.0.0.1:1/i", RemoteOptions(retries=0, connect_timeout=0.5))
for call in (lambda: cache.get("ac", "a" * 64), lambda: cache.missing({"a" * 64: 1}),
             lambda: cache.get("cas", "a" * 64, limit=3)):
    try:
        call()
    except RemoteError:
        pass
cache.close()
print(sorted(name for name in sys.modules if name.startswith("google")))
"""
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60, check=True)
    assert done.stdout.strip() == "[]", done.stdout + done.stderr
