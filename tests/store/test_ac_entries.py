"""Action-cache entries as REAPI ActionResults, against a real nginx: what a validating server
(bazel-remote, BuildGrid) checks of an uploaded entry holds, and entries it would accept but
that are not trustworthy (or not ours) are refused as misses."""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from udo_build.store.remote import reapi as R
from udo_build.store.remote import trust as T

from .remote_fixtures import build, executed
from .warm_remote import Warm, clone, write

pytestmark = pytest.mark.usefixtures("clean_env")
REQUEST = re.compile(r'"(PUT|HEAD|GET) /(ac|cas)/([0-9a-f]{64}) HTTP/[0-9.]+" (\d+) ')


def test_every_entry_is_an_action_result_naming_blobs_the_server_has(warm: Warm) -> None:
    warm.restore()
    for key in (a["key"] for a in warm.summary["actions"]):
        result = R.ActionResult.FromString(warm.entry(key_action(warm, key)).read_bytes())
        paths = [f.path for f in result.output_files]
        outputs = warm.result(key_action(warm, key)).outputs
        assert paths == [R.ENTRY_PATH, *(f"{R.OUTPUTS_DIR}/{n}" for n in sorted(outputs))]
        for file in result.output_files:  # bazel-remote's check: each digest is in the CAS
            blob = warm.blob(file.digest.hash)
            assert blob.is_file() and blob.stat().st_size == file.digest.size_bytes
            assert hashlib.sha256(blob.read_bytes()).hexdigest() == file.digest.hash
        envelope = json.loads(warm.blob(result.output_files[0].digest.hash).read_bytes())
        assert envelope["schema"] == T.ENVELOPE_SCHEMA and envelope["result"]["key"] == key


def test_an_entry_is_put_only_after_every_blob_it_names(warm: Warm) -> None:
    log = warm.server.settled_log()
    seen: set[str] = set()
    entries = 0
    for method, space, name, status in REQUEST.findall(log):
        if space == "cas" and (method == "PUT" or status == "200"):
            seen.add(name)  # stored, or found there by the HEAD an upload asks first
        elif space == "ac" and method == "PUT":  # an entry, or an index entry (chain key)
            named = R.ActionResult.FromString((warm.server.root / "ac" / name).read_bytes())
            assert {f.digest.hash for f in named.output_files} <= seen, name
            entries += any(a["key"] == name for a in warm.summary["actions"])
    assert entries == 9


def key_action(warm: Warm, key: str) -> str:
    return next(a["id"] for a in warm.summary["actions"] if a["key"] == key)


# -- entries a validating server may hold that a reader refuses -----------------------------------

def garbage_entry(w: Warm) -> tuple[str, str]:
    w.file_entry("quantize", b"\x12\x07not a protobuf at all \xff\xfe")
    return "quantize", T.MALFORMED


def former_json_entry(w: Warm) -> tuple[str, str]:  # what udo-build wrote before: the envelope
    w.file_entry("quantize", w.envelope("quantize").read_bytes())
    return "quantize", T.MALFORMED


def no_envelope_named(w: Warm) -> tuple[str, str]:  # a valid ActionResult, not udo-build's
    w.file_entry("quantize", bytes(R.ActionResult(exit_code=0).SerializeToString()))
    return "quantize", T.MALFORMED


def envelope_blob_swapped(w: Warm) -> tuple[str, str]:  # other bytes under the envelope's name
    not_inlined(w, "quantize")  # (inlined bytes that hash to the name are read instead)
    write(w.envelope("quantize"), w.envelope("convert").read_bytes())
    return "quantize", T.CORRUPT_BLOB


def not_inlined(w: Warm, action: str) -> None:
    """File the action's entry without the envelope's bytes inlined (as written before)."""
    pointer = R.entry_envelope(w.entry(action).read_bytes(), 1 << 20)
    assert isinstance(pointer, R.Pointer) and pointer.contents is not None
    outputs = {n: (o.digest, o.size) for n, o in w.result(action).outputs.items()}
    w.file_entry(action, R.entry_bytes(R.Pointer(pointer.digest, pointer.size), outputs))


def envelope_of_another_action(w: Warm) -> tuple[str, str]:  # a genuine envelope, wrong action
    convert = w.envelope("convert").read_bytes()
    outputs = {n: (o.digest, o.size) for n, o in w.result("quantize").outputs.items()}
    pointer = R.Pointer(hashlib.sha256(convert).hexdigest(), len(convert))
    w.file_entry("quantize", R.entry_bytes(pointer, outputs))
    return "quantize", T.WRONG_KEY


def envelope_size_lies(w: Warm) -> tuple[str, str]:
    pointer = R.entry_envelope(w.entry("quantize").read_bytes(), 1 << 20)
    assert isinstance(pointer, R.Pointer)
    outputs = {n: (o.digest, o.size) for n, o in w.result("quantize").outputs.items()}
    w.file_entry("quantize", R.entry_bytes(R.Pointer(pointer.digest, pointer.size - 1),
                                           outputs))
    return "quantize", T.CORRUPT_BLOB


CORPUS: list[Callable[[Warm], tuple[str, str]]] = [
    garbage_entry, former_json_entry, no_envelope_named, envelope_blob_swapped,
    envelope_of_another_action, envelope_size_lies]


@pytest.mark.parametrize("poison", CORPUS, ids=[p.__name__ for p in CORPUS])
def test_a_bad_entry_is_refused_counted_and_built_locally(
        shared: Warm, tmp_path: Path, poison: Callable[[Warm], tuple[str, str]]) -> None:
    action, why = poison(shared)
    summary, err = build(clone(tmp_path), *shared.read)
    assert executed(summary) == [action]
    assert summary["remote"]["rejected"] == {why: 1} and summary["remote"]["hits"] == 8
    assert err.count("warning:") == 1 and f"({why})" in err


def test_an_entry_whose_envelope_blob_is_gone_is_a_plain_miss(
        shared: Warm, tmp_path: Path) -> None:
    not_inlined(shared, "quantize")
    shared.envelope("quantize").unlink()  # evicted by the server, say
    summary, err = build(clone(tmp_path), *shared.read)
    assert executed(summary) == ["quantize"] and summary["remote"]["rejected"] == {}
    assert summary["remote"]["incomplete"] == 1 and err == ""


def test_an_entry_inlines_its_envelope_so_a_lookup_is_one_request(
        shared: Warm, tmp_path: Path) -> None:
    envelopes = {shared.envelope(a["id"]).name for a in shared.summary["actions"]}
    shared.envelope("quantize").unlink()  # not needed: the entry holds its bytes
    since = len(shared.server.settled_log())
    summary, err = build(clone(tmp_path), *shared.read)
    assert executed(summary) == [] and summary["remote"]["hits"] == 9 and err == ""
    read = {name for _, space, name, _ in REQUEST.findall(shared.server.settled_log()[since:])
            if space == "cas"}
    assert not read & envelopes  # no envelope blob was asked for


def test_inlined_bytes_that_do_not_match_the_digest_are_not_used(
        shared: Warm, tmp_path: Path) -> None:
    pointer = R.entry_envelope(shared.entry("quantize").read_bytes(), 1 << 20)
    assert isinstance(pointer, R.Pointer) and pointer.contents is not None
    forged = pointer.contents.replace(b'"seconds":', b'"seconds": ')  # unsigned bytes differ
    outputs = {n: (o.digest, o.size) for n, o in shared.result("quantize").outputs.items()}
    shared.file_entry("quantize", R.entry_bytes(R.Pointer(pointer.digest, pointer.size, forged),
                                                outputs))
    since = len(shared.server.settled_log())
    summary, err = build(clone(tmp_path), *shared.read)
    assert executed(summary) == [] and summary["remote"]["hits"] == 9 and err == ""
    read = [name for _, space, name, _ in REQUEST.findall(shared.server.settled_log()[since:])
            if space == "cas"]
    assert pointer.digest in read  # the blob was read instead
