"""The S3 transport against moto's real S3 server (tests/store/moto_s3.py): a recipe round-trips
through a bucket, poisoned objects are refused, large blobs stream, credentials come from the
environment or a profile, and a missing bucket or a dead server leaves a build local.

Builds run the real planner and engine on the engine tests' project (the stand-in kinds of
tests/builder/fakes.py), as tests/store/test_remote.py does against nginx.
"""

from __future__ import annotations

import hashlib
import http.server
import os
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from udo_build.store import ActionResult, Output, Store
from udo_build.store.counters import Counters
from udo_build.store.remote import trust as T
from udo_build.store.remote.connect import open_transport
from udo_build.store.remote.s3cache import S3Cache, parse_url
from udo_build.store.remote.tier import STREAM_FROM, Remote
from udo_build.store.remote.transport import Refused, RemoteError, RemoteOptions, Unavailable
from udo_build.store.remote.trust import generate

from ..builder.fakes import fake_kinds
from ..builder.test_engine import Project
from .moto_s3 import KEYS, MotoS3
from .nginx import free_port
from .remote_fixtures import Keys, build, chain_key, executed, out_files
from .s3_fixtures import BUCKET, PREFIX, URL, isolate


@dataclass
class Warm:
    """The bucket filled by a build with uploads (once per module), restored before each test."""

    server: MotoS3
    keys: Keys
    source: Project
    summary: dict[str, Any]
    snapshot: dict[str, bytes]

    def restore(self) -> None:
        self.server.empty(BUCKET)
        for key, data in self.snapshot.items():
            self.server.put(BUCKET, key, data)

    def key(self, action: str) -> str:
        return next(a["key"] for a in self.summary["actions"] if a["id"] == action)

    def result(self, action: str) -> ActionResult:
        result = Store(self.source.store, create=False).ac.get(self.key(action))
        assert result is not None
        return result

    @property
    def read(self) -> list[str]:
        return ["--remote", URL, "--trusted-key", self.keys.public]


@pytest.fixture(scope="module")
def warm(moto: MotoS3, tmp_path_factory: pytest.TempPathFactory, keys: Keys) -> Iterator[Warm]:
    folder = tmp_path_factory.mktemp("warm-s3")
    with pytest.MonkeyPatch.context() as env, fake_kinds():
        isolate(env, folder)
        for name, value in moto.env().items():
            env.setenv(name, value)
        source = Project(folder / "a")
        summary, err = build(source, "--remote", URL, "--remote-upload", "--signing-key",
                             str(keys.writer_file))
        assert err == ""
        yield Warm(moto, keys, source, summary, moto.objects(BUCKET))


@pytest.fixture
def shared(warm: Warm, aws: MotoS3) -> Iterator[Warm]:
    warm.restore()
    with fake_kinds():
        yield warm


# -- sharing --------------------------------------------------------------------------------------

def test_a_build_with_uploads_fills_the_bucket_under_its_prefix(shared: Warm) -> None:
    assert shared.summary["executed"] == 9
    assert shared.summary["remote"]["entries_uploaded"] == 9
    entries = {k.rpartition("/")[2] for k in shared.snapshot if k.startswith(f"{PREFIX}/ac/")}
    blobs = {k: v for k, v in shared.snapshot.items() if k.startswith(f"{PREFIX}/cas/")}
    keys = {a["key"] for a in shared.summary["actions"]}  # and index entries, by chain key
    assert entries == keys | {chain_key(shared.source, a["id"])
                              for a in shared.summary["actions"]}
    assert len(blobs) == shared.summary["remote"]["blobs_uploaded"] > 8
    assert len(shared.snapshot) == len(entries) + len(blobs)  # nothing outside the two spaces
    for key, data in blobs.items():
        assert hashlib.sha256(data).hexdigest() == key.rpartition("/")[2]


def test_a_fresh_checkout_executes_nothing_and_gets_identical_outputs(
        shared: Warm, tmp_path: Path) -> None:
    other = Project(tmp_path / "clone")
    summary, err = build(other, *shared.read)
    assert (summary["executed"], summary["cached"]) == (0, 9) and err == ""
    assert {a["source"] for a in summary["actions"]} == {"remote"}
    assert summary["remote"]["hits"] == 9 and summary["remote"]["rejected"] == {}
    assert out_files(other.out) == out_files(shared.source.out)


def _wrong_action_key(w: Warm) -> tuple[str, str]:  # a genuine entry of another action
    data = w.snapshot[f"{PREFIX}/ac/{w.key('convert')}"]
    for key in (w.key("quantize"), chain_key(w.source, "quantize")):  # and its index entry
        w.server.put(BUCKET, f"{PREFIX}/ac/{key}", data)
    return "quantize", T.WRONG_KEY


def _corrupt_blob(w: Warm) -> tuple[str, str]:
    key = f"{PREFIX}/cas/{w.result('convert').outputs['bundle'].digest}"
    data = bytearray(w.snapshot[key])
    data[len(data) // 2] ^= 0xFF
    w.server.put(BUCKET, key, bytes(data))
    return "convert", T.CORRUPT_BLOB


@pytest.mark.parametrize("poison", [_wrong_action_key, _corrupt_blob],
                         ids=["wrong_action_key", "corrupt_blob"])
def test_a_poisoned_object_is_refused_and_built_locally(shared: Warm, tmp_path: Path,
                                                        poison: Any) -> None:
    action, why = poison(shared)
    other = Project(tmp_path / "clone")
    summary, err = build(other, *shared.read)
    assert executed(summary) == [action]
    assert summary["remote"]["rejected"] == {why: 1}
    assert err.count("warning:") == 1 and f"({why})" in err
    assert out_files(other.out) == out_files(shared.source.out)


# -- streaming ------------------------------------------------------------------------------------

def test_a_large_blob_streams_into_the_store_in_chunks(aws: MotoS3, tmp_path: Path) -> None:
    data = os.urandom(6 * STREAM_FROM + 12_345)
    digest = hashlib.sha256(data).hexdigest()
    aws.put(BUCKET, f"{PREFIX}/cas/{digest}", data)
    store = Store(tmp_path / "store")
    writer, chunks = store.cas.writer, []

    def counting_writer(name: str, size: int, **options: bool) -> Any:
        blob = writer(name, size, **options)
        write = blob.write

        def counted(chunk: memoryview) -> None:
            chunks.append(len(chunk))
            write(chunk)

        blob.write = counted  # type: ignore[method-assign]
        return blob

    store.cas.writer = counting_writer  # type: ignore[method-assign]
    remote = Remote(store.cas, store.ac, S3Cache(URL), {}, Counters(),
                    signing_key=generate("ci"))
    result = ActionResult("ab" * 32, "prepare", "a record", {"record": Output(digest, len(data))})
    try:
        assert remote.download(result)
        assert remote.transport.get("cas", digest, limit=1000) == data[:1001]  # cut at limit
    finally:
        remote.close()
    assert store.cas.get(digest) == data and sum(chunks) == len(data)
    assert len(chunks) >= 6 and max(chunks) <= STREAM_FROM  # never the whole blob at once


# -- credentials, region and endpoint ------------------------------------------------------------

def _profile(folder: Path, endpoint: str) -> tuple[Path, Path]:
    config, creds = folder / "config", folder / "credentials"
    config.write_text(f"[default]\nregion = eu-north-1\n\n[profile ci]\nregion = us-east-1\n"
                      f"endpoint_url = {endpoint}\n")
    creds.write_text(f"[ci]\naws_access_key_id = {KEYS['AWS_ACCESS_KEY_ID']}-ci\n"
                     f"aws_secret_access_key = ci-secret\n")
    return config, creds


def test_a_named_profile_gives_keys_region_and_endpoint(
        moto: MotoS3, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    isolate(monkeypatch, tmp_path)
    config, creds = _profile(tmp_path, moto.endpoint)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(creds))
    monkeypatch.setenv("AWS_PROFILE", "ci")
    s3 = S3Cache(f"s3://{BUCKET}/profiled")
    try:
        assert (s3.aws.key_id, s3.aws.region, s3.endpoint) == (
            "testing-ci", "us-east-1", moto.endpoint)
        assert s3.aws.source == f"profile ci ({creds})" and not s3.aws.anonymous
        s3.put("cas", "ab" * 32, b"through the profile")  # signed with the profile's keys
        assert s3.get("cas", "ab" * 32) == b"through the profile"
    finally:
        s3.close()
    monkeypatch.delenv("AWS_PROFILE")  # (boto3, behind the transport's back, reads it too)
    assert moto.objects(BUCKET)[f"profiled/cas/{'ab' * 32}"] == b"through the profile"
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "from-env")  # the environment's keys win
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "env-secret")
    monkeypatch.setenv("AWS_REGION", "ap-south-1")
    s3 = S3Cache(f"s3://{BUCKET}")
    assert (s3.aws.key_id, s3.aws.region, s3.aws.source) == ("from-env", "ap-south-1",
                                                             "environment")


def test_profile_errors_name_the_files(aws: MotoS3, monkeypatch: pytest.MonkeyPatch,
                                       tmp_path: Path) -> None:
    config, creds = _profile(tmp_path, aws.endpoint)
    monkeypatch.setenv("AWS_CONFIG_FILE", str(config))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(creds))
    monkeypatch.setenv("AWS_PROFILE", "nightly")
    with pytest.raises(ValueError, match=f"AWS_PROFILE=nightly: there is no \\[nightly\\] in "
                                         f"{creds} and no \\[profile nightly\\] in {config}"):
        open_transport(URL)
    creds.write_text("[ci\naws_access_key_id = x\n")
    monkeypatch.setenv("AWS_PROFILE", "ci")
    with pytest.raises(ValueError, match=f"{creds}: not an AWS config file"):
        open_transport(URL)


def test_without_keys_a_custom_endpoint_is_read_anonymously(aws: MotoS3,
                                                            monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    aws.put(BUCKET, "public/cas/" + "cd" * 32, b"public bytes", public=True)
    for name in KEYS:
        monkeypatch.delenv(name)
    s3 = S3Cache(f"s3://{BUCKET}/public")
    try:
        assert s3.aws.anonymous and s3.get("cas", "cd" * 32) == b"public bytes"
    finally:
        s3.close()


# -- faults ---------------------------------------------------------------------------------------

def test_a_missing_bucket_is_one_clear_warning_and_a_local_build(aws: MotoS3,
                                                                  tmp_path: Path, keys: Keys
                                                                  ) -> None:
    with fake_kinds():
        summary, err = build(Project(tmp_path / "a"), "--remote", "s3://no-such-bucket/x",
                             "--trusted-key", keys.public)
    assert summary["executed"] == 9 and summary["failed"] == 0
    assert err.count("warning:") == 1
    assert f"there is no bucket 'no-such-bucket' at {aws.endpoint}" in err


def test_a_dead_server_disables_the_remote_and_the_build_succeeds(
        aws: MotoS3, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, keys: Keys) -> None:
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{free_port()}")
    started = time.perf_counter()
    with fake_kinds():
        summary, err = build(Project(tmp_path / "a"), "--remote", URL, "--trusted-key",
                             keys.public, "--remote-upload", "--signing-key",
                             str(keys.writer_file))
    assert summary["executed"] == 9 and summary["remote"]["disabled"]
    assert err.count("warning:") == 1 and "remote cache unreachable" in err
    assert "connection refused" in err and time.perf_counter() - started < 20


class _Answer(http.server.BaseHTTPRequestHandler):
    """Answers every request with the server's `status` and an S3 error document."""

    def do_GET(self) -> None:  # noqa: N802 - the handler's protocol
        body = f"<Error><Code>{self.server.code}</Code></Error>".encode()  # type: ignore[attr-defined]
        self.send_response(self.server.status)  # type: ignore[attr-defined]
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_PUT = do_GET

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def answering(aws: MotoS3, monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{server.server_address[1]}")
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def test_throttling_is_retried_then_opens_the_breaker(answering: Any) -> None:
    answering.status, answering.code = 503, "SlowDown"
    s3 = S3Cache(URL, RemoteOptions(retries=2, max_failures=3, backoff=0.001))
    with pytest.raises(RemoteError, match="HTTP 503 SlowDown"):
        s3.get("ac", "ab" * 32)
    assert s3.errors == 3 and s3.why == {"read": "failing"}
    with pytest.raises(Unavailable):
        s3.get("ac", "ab" * 32)
    assert s3.disabled_for("write") is None  # failing reads do not stop uploads
    s3.close()


def test_a_forbidden_request_is_refused_not_retried(answering: Any) -> None:
    answering.status, answering.code = 403, "AccessDenied"
    s3 = S3Cache(URL, RemoteOptions(retries=2, max_failures=1))
    with pytest.raises(Refused, match="HTTP 403 AccessDenied"):
        s3.get("ac", "ab" * 32)
    with pytest.raises(Refused, match="HTTP 403 AccessDenied"):
        s3.put("cas", "ab" * 32, b"x")
    assert s3.errors == 0 and s3.disabled is None
    s3.close()


def test_a_silent_server_is_dropped_by_the_watchdog(aws: MotoS3,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as silent:  # accepts connections (the kernel does), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"http://127.0.0.1:{silent.getsockname()[1]}")
        s3 = S3Cache(URL, RemoteOptions(read_timeout=0.5, retries=2, max_failures=5))
        started = time.perf_counter()
        with pytest.raises(RemoteError, match="stalled: no answer"):
            s3.get("ac", "ab" * 32)
        assert time.perf_counter() - started < 1.5 and s3.errors == 1  # a stall: no retry
        s3 = S3Cache(URL, RemoteOptions(read_timeout=30, retries=0))
        threading.Timer(0.3, s3.drop_in_flight, ["the build is over"]).start()
        started = time.perf_counter()
        with pytest.raises(RemoteError, match="the build is over"):
            s3.get("ac", "ab" * 32)
        assert time.perf_counter() - started < 1.0
        s3.close()


# -- the URL and the extra ------------------------------------------------------------------------

def test_the_url_names_a_bucket_and_a_prefix() -> None:
    assert parse_url("s3://udo-cache/team/v1/") == ("udo-cache", "team/v1")
    assert parse_url("s3://udo-cache") == ("udo-cache", "")
    for bad in ("s3://", "s3://UPPER/x", "s3://ab", "s3://udo-cache/x?versionId=1"):
        with pytest.raises(ValueError, match="s3://BUCKET\\[/PREFIX\\]"):
            parse_url(bad)


def test_without_the_extra_the_error_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    from udo_build.store.remote import s3cache

    monkeypatch.setattr(s3cache, "obstore", None)
    with pytest.raises(ValueError, match=r"pip install 'udo-build\[s3\]'"):
        open_transport(URL)
