"""The REAPI messages built from descriptors as data: encodings checked byte by byte against
the protobuf wire format (worked out by hand below), round trips, and action-cache entries."""

from __future__ import annotations

import pytest

from udo_build.store.remote import reapi as R

ENVELOPE = R.Pointer("ab" * 32, 321)


def test_a_known_action_result_encodes_to_the_bytes_worked_out_by_hand() -> None:
    result = R.ActionResult(output_files=[R.OutputFile(
        path="e", digest=R.Digest(hash="h", size_bytes=300))])
    # OutputFile: path (1, LEN) 0a 01 'e'; digest (2, LEN) 12 06 + Digest: hash (1, LEN)
    # 0a 01 'h', size_bytes (2, VARINT) 10, 300 = 0b10_0101100 -> ac 02.
    # ActionResult: output_files (2, LEN) 12 0b + the 11 bytes of the OutputFile.
    assert result.SerializeToString() == bytes.fromhex("12 0b 0a 01 65 12 06 0a 01 68 10 ac 02")


def test_bytestream_and_status_fields_have_their_public_numbers() -> None:
    write = R.WriteRequest(resource_name="r", write_offset=5, finish_write=True, data=b"xy")
    # resource_name 1 (0a), write_offset 2 (10), finish_write 3 (18), data 10 (LEN: 10<<3|2 = 52)
    assert write.SerializeToString() == bytes.fromhex("0a 01 72 10 05 18 01 52 02 78 79")
    assert R.ReadResponse(data=b"z").SerializeToString() == bytes.fromhex("52 01 7a")
    read = R.ReadRequest(resource_name="r", read_offset=1, read_limit=2)
    assert read.SerializeToString() == bytes.fromhex("0a 01 72 10 01 18 02")
    assert R.WriteResponse(committed_size=3).SerializeToString() == bytes.fromhex("08 03")
    assert R.Status(code=5, message="nf").SerializeToString() == bytes.fromhex("08 05 12 02 6e 66")


def test_nested_responses_carry_a_status_message() -> None:
    response = R.BatchReadBlobsResponse(responses=[R.BatchReadBlobsResponse.Response(
        digest=R.Digest(hash="h"), data=b"z", status=R.Status(code=5))])
    # Response: digest (1) 0a 03 0a 01 68; data (2) 12 01 7a; status (3) 1a 02 08 05
    assert response.SerializeToString() == bytes.fromhex(
        "0a 0c 0a 03 0a 01 68 12 01 7a 1a 02 08 05")
    update = R.BatchUpdateBlobsResponse(responses=[R.BatchUpdateBlobsResponse.Response(
        digest=R.Digest(hash="h"), status=R.Status(code=3))])
    assert update.SerializeToString() == bytes.fromhex("0a 09 0a 03 0a 01 68 12 02 08 03")
    missing = R.FindMissingBlobsResponse(missing_blob_digests=[R.Digest(hash="h", size_bytes=1)])
    assert missing.SerializeToString() == bytes.fromhex("12 05 0a 01 68 10 01")


def test_requests_round_trip_through_their_bytes() -> None:
    digests = [R.Digest(hash=c * 64, size_bytes=n) for c, n in (("a", 1), ("b", 1 << 40))]
    messages = [
        R.GetActionResultRequest(instance_name="main/x", action_digest=digests[0]),
        R.UpdateActionResultRequest(instance_name="i", action_digest=digests[1],
                                    action_result=R.ActionResult(exit_code=0)),
        R.FindMissingBlobsRequest(instance_name="i", blob_digests=digests),
        R.BatchUpdateBlobsRequest(instance_name="i", requests=[
            R.BatchUpdateBlobsRequest.Request(digest=digests[0], data=b"\x00\xff")]),
        R.BatchReadBlobsRequest(instance_name="i", digests=digests),
        R.ServerCapabilities(cache_capabilities={"max_batch_total_size_bytes": 4 << 20}),
        R.GetCapabilitiesRequest(instance_name="i"),
    ]
    for message in messages:
        again = type(message).FromString(message.SerializeToString())
        assert again == message and again.SerializeToString() == message.SerializeToString()
    assert R.action_digest("cd" * 32) == R.Digest(hash="cd" * 32, size_bytes=R.ACTION_SIZE)


def test_an_entry_names_the_envelope_then_the_outputs_in_order() -> None:
    data = R.entry_bytes(ENVELOPE, {"b": ("cd" * 32, 7), "a": ("ef" * 32, 0)})
    assert data == R.entry_bytes(ENVELOPE, {"a": ("ef" * 32, 0), "b": ("cd" * 32, 7)})
    result = R.ActionResult.FromString(data)
    assert [(f.path, f.digest.hash, f.digest.size_bytes) for f in result.output_files] == [
        (R.ENTRY_PATH, "ab" * 32, 321), (f"{R.OUTPUTS_DIR}/a", "ef" * 32, 0),
        (f"{R.OUTPUTS_DIR}/b", "cd" * 32, 7)]
    assert R.entry_envelope(data, 1000) == ENVELOPE
    # fields a server adds (execution_metadata, 9; stdout_raw, 5) are kept as unknown, not errors
    assert R.entry_envelope(data + bytes.fromhex("4a 00 2a 02 6f 6b"), 1000) == ENVELOPE


def _result(*files: tuple[str, str, int]) -> bytes:
    return bytes(R.ActionResult(output_files=[
        R.OutputFile(path=p, digest=R.Digest(hash=h, size_bytes=s)) for p, h, s in files]
    ).SerializeToString())


@pytest.mark.parametrize(("data", "why"), [
    (b'{"schema": "udo-build/signed-action-result"}', "former JSON format"),
    (b"\x12\xff\xff\xff\xff\x0f", "not a REAPI ActionResult"),
    (b"", "without one output file"),
    (_result(("other", "ab" * 32, 1)), "without one output file"),
    (_result((R.ENTRY_PATH, "ab" * 32, 1), (R.ENTRY_PATH, "cd" * 32, 1)), "(it has 2)"),
    (_result((R.ENTRY_PATH, "AB" * 32, 1)), "not a sha256"),
    (_result((R.ENTRY_PATH, "ab" * 31, 1)), "not a sha256"),
    (_result((R.ENTRY_PATH, "ab" * 32, 0)), "not within 1..1000"),
    (_result((R.ENTRY_PATH, "ab" * 32, 1001)), "not within 1..1000"),
    (_result((R.ENTRY_PATH, "ab" * 32, -1)), "not within 1..1000"),
])
def test_a_malformed_entry_says_why_and_never_raises(data: bytes, why: str) -> None:
    got = R.entry_envelope(data, 1000)
    assert isinstance(got, str) and why in got


def test_no_truncation_of_an_entry_names_another_envelope() -> None:
    data = R.entry_bytes(ENVELOPE, {"a": ("ef" * 32, 5)})
    got = [R.entry_envelope(data[:end], 1000) for end in range(len(data))]
    assert all(g == ENVELOPE or isinstance(g, str) for g in got)
    assert sum(g == ENVELOPE for g in got) == 1  # cut where the outputs begin: still valid
