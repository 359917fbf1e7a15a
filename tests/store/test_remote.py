"""The remote tier against a real nginx WebDAV server: sharing between checkouts, trust,
faults, and uploads that never become visible half-done.

Builds run the real planner and engine (`udo-build build --json` through `main()`) on the engine
tests' project, with the stand-in kinds of tests/builder/fakes.py for the steps udo-build does not
implement yet.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import socket
import time
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from udo_build.store import ActionResult, Output, Store
from udo_build.store.remote import reapi as R
from udo_build.store.remote import trust as T
from udo_build.store.remote.httpcache import HttpCache
from udo_build.store.remote.tier import Remote
from udo_build.store.remote.transport import Refused, RemoteError, RemoteOptions, Unavailable

from ..builder.fakes import fake_kinds
from ..builder.test_engine import Project
from .nginx import Nginx, free_port
from .remote_fixtures import Keys, build, cli, entry_files, executed, out_files
from .warm_remote import Warm, clone, write

pytestmark = pytest.mark.usefixtures("clean_env")


# -- sharing --------------------------------------------------------------------------------------

def test_a_build_with_uploads_fills_the_remote_with_signed_entries_and_raw_blobs(
        warm: Warm) -> None:
    warm.restore()
    assert warm.summary["executed"] == 9
    keys = {a["key"] for a in warm.summary["actions"]}
    entries = entry_files(warm.server)
    assert keys <= set(entries) and warm.summary["remote"]["entries_uploaded"] == 9
    for name in keys:
        pointer = R.entry_envelope(entries[name].read_bytes(), 1 << 20)
        assert isinstance(pointer, R.Pointer), pointer
        doc = json.loads(warm.blob(pointer.digest).read_bytes())
        assert doc["signer"] == warm.keys.public and doc["result"]["key"] == name
    # the others are index entries (by chain key, see builder.lookahead): each the same bytes
    # as the entry of an action that has upstream actions
    by_bytes = {entries[k].read_bytes(): k for k in keys}
    index = set(entries) - keys
    assert 0 < len(index) < len(keys)
    assert all(entries[name].read_bytes() in by_bytes for name in index)
    blobs = warm.server.files("cas")
    assert len(blobs) == warm.summary["remote"]["blobs_uploaded"] > 8  # trees hold many files
    for path in blobs:  # raw bytes under the sha256 of those bytes: any Bazel cache checks that
        assert hashlib.sha256(path.read_bytes()).hexdigest() == path.name


def test_a_clean_checkout_with_an_empty_store_gets_every_action_from_the_remote(
        shared: Warm, tmp_path: Path) -> None:
    other = clone(tmp_path)
    summary, err = build(other, *shared.read, "--download", "all")
    assert (summary["executed"], summary["cached"], summary["hit_rate"]) == (0, 9, 1.0)
    assert {a["source"] for a in summary["actions"]} == {"remote"}
    assert [a["key"] for a in summary["actions"]] == [a["key"] for a in shared.summary["actions"]]
    assert summary["remote"]["hits"] == 9 and summary["remote"]["rejected"] == {}
    assert out_files(other.out) == out_files(shared.source.out)
    assert err == ""
    again, _ = build(other, *shared.read)  # now everything is local: the remote is not asked
    assert {a["source"] for a in again["actions"]} == {"local"}
    assert (again["remote"]["hits"], again["remote"]["misses"]) == (0, 0)
    code, out, _ = cli("store", "verify", "--store", str(other.store), "--json")
    assert code == 0 and json.loads(out)["problems"] == 0
    cache = json.loads(cli("store", "stats", "--store", str(other.store), "--json")[1])["cache"]
    assert (cache["builds"], cache["remote_hits"], cache["local_hits"]) == (2, 9, 9)
    assert cache["bytes_downloaded"] == summary["remote"]["bytes_downloaded"] > 0


def test_a_clean_checkout_links_its_output_folder_to_raw_downloads(
        shared: Warm, tmp_path: Path) -> None:
    """What a clean checkout downloads for its output folder is stored raw, and the folder's
    files are hard links to those blobs: no compression on the way in, no copy on the way out
    (a file made of parts, the deployable bundle, is written whole)."""
    other = clone(tmp_path)
    build(other, *shared.read)
    stored = {p.name.removesuffix(".zst"): p for p in (other.store / "cas").glob("*/*")}
    files = {p: hashlib.sha256(p.read_bytes()).hexdigest() for p in other.out.rglob("*")
             if p.is_file() and not p.name.startswith(".udo") and not os.access(p, os.X_OK)}
    blobs = {p: stored[digest] for p, digest in files.items() if digest in stored}
    assert len(blobs) >= len(files) - 1  # all but the bundle
    assert any(len(zlib.compress(p.read_bytes())) < 0.8 * p.stat().st_size > 256 for p in blobs)
    assert [p for p, blob in blobs.items() if not os.path.samefile(p, blob)] == []
    assert [blob for blob in blobs.values() if blob.suffix == ".zst"] == []


def test_a_dry_run_reads_the_entries_and_writes_nothing(shared: Warm, tmp_path: Path) -> None:
    other = clone(tmp_path)
    summary, _ = build(other, "--dry-run", *shared.read)
    assert summary["cached"] == 9 and {a["source"] for a in summary["actions"]} == {"remote"}
    assert summary["remote"]["bytes_downloaded"] == 0
    assert not list((other.store / "ac").rglob("*.json"))
    assert not (other.store / "stats.json").exists()


def test_without_trusted_keys_the_remote_is_not_used(shared: Warm, tmp_path: Path) -> None:
    log = shared.server.prefix / "access.log"
    requests = len(log.read_text().splitlines())
    summary, err = build(clone(tmp_path), "--remote", shared.server.url)
    assert summary["executed"] == 9 and summary["remote"] is None
    assert err.count("warning:") == 1 and "no trusted keys" in err
    assert len(log.read_text().splitlines()) == requests


# -- trust: a corpus of poisoned entries and blobs -----------------------------------------------

def _envelope(warm: Warm, action: str) -> dict[str, Any]:
    return json.loads(warm.envelope(action).read_bytes())


def bad_signature(w: Warm) -> tuple[str, str]:
    doc = _envelope(w, "quantize")
    sig = bytearray(base64.b64decode(doc["signature"]))
    sig[10] ^= 0x01
    doc["signature"] = base64.b64encode(bytes(sig)).decode()
    w.file_envelope("quantize", json.dumps(doc).encode())
    return "quantize", T.BAD_SIGNATURE


def untrusted_key(w: Warm) -> tuple[str, str]:
    w.file_envelope("quantize", T.sign_entry(w.result("quantize"), w.keys.other))
    return "quantize", T.UNTRUSTED


def forged_signer(w: Warm) -> tuple[str, str]:  # signed by another key, claims the trusted one
    doc = json.loads(T.sign_entry(w.result("quantize"), w.keys.other))
    doc["signer"] = w.keys.public
    w.file_envelope("quantize", json.dumps(doc).encode())
    return "quantize", T.BAD_SIGNATURE


def tampered_result(w: Warm) -> tuple[str, str]:  # another genuine blob, the old signature
    doc = _envelope(w, "quantize")
    outputs = doc["result"]["outputs"]
    outputs["bundle"]["digest"] = outputs["encodings"]["digest"]
    w.file_envelope("quantize", json.dumps(doc).encode())
    return "quantize", T.BAD_SIGNATURE


def unsigned(w: Warm) -> tuple[str, str]:
    w.file_envelope("quantize", json.dumps(w.result("quantize").to_json()).encode())
    return "quantize", T.UNSIGNED


def wrong_action_key(w: Warm) -> tuple[str, str]:  # a genuine entry of another action
    w.file_entry("quantize", w.entry("convert").read_bytes())
    return "quantize", T.WRONG_KEY


def truncated(w: Warm) -> tuple[str, str]:  # a cut envelope, filed under its own digest
    w.file_envelope("quantize", w.envelope("quantize").read_bytes()[:-40])
    return "quantize", T.MALFORMED


def corrupt_blob(w: Warm) -> tuple[str, str]:
    path = w.blob(w.result("convert").outputs["bundle"].digest)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    write(path, bytes(data))
    return "convert", T.CORRUPT_BLOB


def _tree(w: Warm, action: str) -> str:
    return next(o.digest for o in w.result(action).outputs.values() if o.type == "tree")


def corrupt_tree_file(w: Warm) -> tuple[str, str]:
    store = Store(w.source.store, create=False)
    entries = store.cas.tree_entries(_tree(w, "package:HTP"))
    assert entries
    path = w.blob(entries[-1]["digest"])
    write(path, path.read_bytes() + b"\n// injected\n")
    return "package:HTP", T.CORRUPT_BLOB


def corrupt_tree_manifest(w: Warm) -> tuple[str, str]:
    path = w.blob(_tree(w, "package:HTP"))
    doc = json.loads(path.read_bytes())
    doc["entries"] = doc["entries"][:-1]
    write(path, json.dumps(doc).encode())
    return "package:HTP", T.CORRUPT_BLOB


CORPUS: list[Callable[[Warm], tuple[str, str]]] = [
    bad_signature, untrusted_key, forged_signer, tampered_result, unsigned, wrong_action_key,
    truncated, corrupt_blob, corrupt_tree_file, corrupt_tree_manifest]


@pytest.mark.parametrize("poison", CORPUS, ids=[p.__name__ for p in CORPUS])
def test_a_poisoned_entry_or_blob_is_refused_counted_and_built_locally(
        shared: Warm, tmp_path: Path, poison: Callable[[Warm], tuple[str, str]]) -> None:
    action, why = poison(shared)
    bad = {hashlib.sha256(p.read_bytes()).hexdigest() for p in shared.server.files("cas")
           if hashlib.sha256(p.read_bytes()).hexdigest() != p.name}
    other = clone(tmp_path)
    summary, err = build(other, *shared.read)
    assert executed(summary) == [action]  # built here; what follows it still comes from the remote
    assert summary["remote"]["rejected"] == {why: 1}
    assert err.count("warning:") == 1 and f"({why})" in err
    local = Store(other.store, create=False)
    assert not any(local.cas.has(d) for d in bad)  # corrupt bytes were never stored
    code, out, _ = cli("store", "verify", "--store", str(other.store), "--json")
    assert code == 0 and json.loads(out)["problems"] == 0
    cache = json.loads(cli("store", "stats", "--store", str(other.store), "--json")[1])["cache"]
    assert cache["rejected"] == {why: 1} and cache["rejected_total"] == 1


def test_no_flipped_or_truncated_byte_of_a_signed_entry_is_accepted(keys: Keys) -> None:
    result = ActionResult("ab" * 32, "prepare", "prepare sm8550",
                          {"record": Output("12" * 32, 10, "blob")}, {"r.bin": "record"}, 1.5,
                          created=1.0)
    data = T.sign_entry(result, keys.writer)
    trusted = T.trusted_set([keys.writer.public()])
    assert T.open_entry(data, result.key, trusted).result == result
    accepted = refused = 0
    for i in range(len(data)):
        for mask in (0x01, 0x20, 0x80):
            flipped = bytearray(data)
            flipped[i] ^= mask
            verdict = T.open_entry(bytes(flipped), result.key, trusted)
            assert verdict.result in (None, result), (i, mask)  # never a different result
            accepted += verdict.result is not None
            refused += verdict.result is None
    for end in range(len(data)):
        assert T.open_entry(data[:end], result.key, trusted).result is None
    assert refused > 0.95 * (accepted + refused)  # what passes changes no signed byte (a name)
    assert T.open_entry(data, "cd" * 32, trusted).rejected == T.WRONG_KEY
    assert T.open_entry(data, result.key, {}).rejected == T.UNTRUSTED


# -- faults ---------------------------------------------------------------------------------------

def test_killing_the_server_mid_build_degrades_to_local_building(
        shared: Warm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    looked_up: list[str] = []
    entry = Remote.entry

    def entry_then_die(self: Remote, key: str, **options: Any) -> Any:
        looked_up.append(key)
        if len(looked_up) == 2:  # opdef came from the remote; then the server dies
            shared.server.kill()
        return entry(self, key, **options)

    monkeypatch.setattr(Remote, "entry", entry_then_die)
    try:
        other = clone(tmp_path)
        summary, err = build(other, *shared.read, "--remote-upload", "--signing-key",
                             str(shared.keys.writer_file))
    finally:
        shared.server.start()
    cached = [a for a in summary["actions"] if a["status"] == "cached"]
    assert len(cached) == summary["remote"]["hits"] <= 1 and len(looked_up) >= 2
    assert len(executed(summary)) == 9 - len(cached) and summary["failed"] == 0
    assert all(a["source"] == "remote" for a in cached)
    # the outage told once per cause: the server found unreachable (connections refused), or,
    # when it dies while a download is in flight, its reads failing in a row; with uploads on,
    # reads found failing first can be followed by the link found unreachable or the uploads
    # failing (both stop the uploads). Either way the build goes local, and nothing else is
    # warned about.
    warnings = [line for line in err.splitlines() if line.startswith("warning:")]
    causes = ("remote cache unreachable", "reads failed", "uploads failed")
    told = [next((c for c in causes if c in w), None) for w in warnings]
    assert warnings and None not in told and len(set(told)) == len(told), err
    assert "building locally" in err and summary["remote"]["disabled"]
    assert summary["remote"]["entries_uploaded"] == 0
    code, out, _ = cli("store", "verify", "--store", str(other.store), "--json")
    assert code == 0 and json.loads(out)["problems"] == 0


def test_an_unresponsive_server_costs_a_few_short_timeouts(shared: Warm, tmp_path: Path) -> None:
    with socket.socket() as silent:  # accepts connections (the kernel does), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(64)
        other = clone(tmp_path)
        (other.root / "udo-build.toml").write_text(
            f'[remote]\nurl = "http://127.0.0.1:{silent.getsockname()[1]}"\n'
            f'trusted_keys = ["{shared.keys.public}"]\n'
            "connect_timeout = 0.2\nread_timeout = 0.2\nretries = 1\nmax_failures = 2\n")
        started = time.perf_counter()
        summary, err = build(other)
        seconds = time.perf_counter() - started
    assert summary["executed"] == 9 and summary["remote"]["disabled"]
    assert err.count("warning:") == 1 and "remote cache: reads failed" in err
    assert "stalled: no answer" in err or "timed out" in err
    assert seconds < 3.0


def test_the_client_retries_then_opens_its_circuit_breaker() -> None:
    http = HttpCache(f"http://127.0.0.1:{free_port()}/base",
                     RemoteOptions(retries=2, max_failures=3, backoff=0.001))
    with pytest.raises(RemoteError, match="connection refused"):
        http.get("ac", "ab" * 32)
    assert http.errors == 3 and http.disabled and "3 failures in a row" in http.disabled
    started = time.perf_counter()
    with pytest.raises(Unavailable):
        http.head("cas", "ab" * 32)
    assert time.perf_counter() - started < 0.01 and http.errors == 3
    with pytest.raises(Unavailable):  # unreachable: uploads too
        http.put("cas", "ab" * 32, b"x")


def test_a_refusal_is_not_a_failure_of_the_server(nginx_server: Nginx) -> None:
    http = HttpCache(nginx_server.url, RemoteOptions(max_failures=1))
    http.put("cas", "ab" * 32, b"x")
    assert http.get("cas", "ab" * 32) == b"x" and http.get("cas", "cd" * 32) is None
    with pytest.raises(Refused):
        http.put("cas", "", b"x")  # a PUT to a folder
    assert http.disabled is None and http.head("cas", "ab" * 32)


# -- partial uploads ------------------------------------------------------------------------------

def test_an_entry_is_uploaded_only_after_all_its_blobs(
        nginx_server: Nginx, keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    put = HttpCache.put

    def put_failing_encodings(self: HttpCache, space: str, name: str, data: bytes) -> None:
        if space == "cas" and b'"activation_encodings"' in data[:64]:  # quantize's encodings
            raise Refused(507, "Insufficient Storage")
        put(self, space, name, data)

    monkeypatch.setattr(HttpCache, "put", put_failing_encodings)
    with fake_kinds():
        writer = Project(tmp_path / "a")
        summary, err = build(writer, "--remote", nginx_server.url, "--remote-upload",
                             "--signing-key", str(keys.writer_file))
        assert "refuses uploads (HTTP 507 Insufficient Storage)" in err
        monkeypatch.setattr(HttpCache, "put", put)
        quantize = next(a["key"] for a in summary["actions"] if a["id"] == "quantize")
        assert quantize not in entry_files(nginx_server)
        reader, _ = build(clone(tmp_path), "--remote", nginx_server.url, "--trusted-key",
                          keys.public)
    assert "quantize" in executed(reader) and reader["remote"]["rejected"] == {}


def test_a_server_killed_between_blobs_and_entry_shows_no_entry(
        nginx_server: Nginx, keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    put = HttpCache.put

    def die_before_the_first_entry(self: HttpCache, space: str, name: str, data: bytes) -> None:
        if space == "ac":
            nginx_server.kill()
        put(self, space, name, data)

    monkeypatch.setattr(HttpCache, "put", die_before_the_first_entry)
    with fake_kinds():
        summary, err = build(Project(tmp_path / "a"), "--remote", nginx_server.url,
                             "--remote-upload", "--signing-key", str(keys.writer_file))
        assert summary["executed"] == 9 and err.count("remote cache unreachable") == 1
        monkeypatch.setattr(HttpCache, "put", put)
        nginx_server.start()
        assert nginx_server.files("cas") and not nginx_server.files("ac")
        reader, err = build(clone(tmp_path), "--remote", nginx_server.url, "--trusted-key",
                            keys.public)
    assert reader["executed"] == 9 and reader["remote"]["rejected"] == {} and err == ""


# -- settings -------------------------------------------------------------------------------------

def test_settings_options_beat_environment_beats_project_beats_user(tmp_path: Path) -> None:
    from udo_build.builder.settings import settings

    user = tmp_path / "xdg/udo-build/config.toml"
    user.parent.mkdir(parents=True)
    user.write_text('[remote]\nurl = "http://user"\ntrusted_keys = ["u:AAAA"]\nretries = 1\n')
    project = tmp_path / "project"
    (project / "recipes").mkdir(parents=True)
    (project / ".udo-build-root").write_text("")
    (project / ".udo-build").mkdir()
    (project / ".udo-build/config.toml").write_text(
        '[remote]\nurl = "http://project"\nsigning_key = "keys/ci.key"\n'
        'trusted_keys = ["p:AAAA"]\n')
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    got = settings(project / "recipes", env=env)
    assert (got.url, got.retries, got.upload) == ("http://project", 1, False)
    assert got.signing_key == project / ".udo-build/keys/ci.key"
    assert [k for k, _ in got.trusted_keys] == ["u:AAAA", "p:AAAA"]
    env |= {"UDO_BUILD_REMOTE": "http://env", "UDO_BUILD_REMOTE_UPLOAD": "yes",
            "UDO_BUILD_TRUSTED_KEYS": "e:AAAA,f:AAAA"}
    got = settings(project / "recipes", env=env, trusted_keys=["o:AAAA"])
    assert (got.url, got.upload) == ("http://env", True)
    assert [k for k, _ in got.trusted_keys] == ["u:AAAA", "p:AAAA", "e:AAAA", "f:AAAA", "o:AAAA"]
    got = settings(project / "recipes", env=env, url="http://option", upload=False)
    assert (got.url, got.upload) == ("http://option", False)
    assert settings(project / "recipes", env=env, url="http://x", no_remote=True).url is None
    assert settings(None, env={}).url is None  # no files, no environment: no remote
