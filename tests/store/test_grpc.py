"""The remote tier over REAPI gRPC against a real BuildGrid server (tests/store/buildgrid.py):
the same recipe round-trips, poisoned entries are refused, large blobs go through ByteStream,
instance names keep caches apart, headers reach the server, faults open the breaker."""

from __future__ import annotations

import hashlib
import os
import socket
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from udo_build.store import ActionResult, Output, Store
from udo_build.store.counters import Counters
from udo_build.store.remote import reapi as R
from udo_build.store.remote import trust as T
from udo_build.store.remote.connect import open_transport
from udo_build.store.remote.grpccache import BATCH_LIMIT, GrpcCache
from udo_build.store.remote.tier import Remote
from udo_build.store.remote.transport import (
    Buffer,
    Refused,
    RemoteError,
    RemoteOptions,
    Unavailable,
)
from udo_build.store.remote.trust import generate

from ..builder.fakes import fake_kinds
from ..builder.test_engine import Project
from .buildgrid import BuildGrid, bgd_binary, token
from .nginx import free_port
from .remote_fixtures import ENV, Keys, build, chain_key, executed, out_files

pytestmark = pytest.mark.usefixtures("clean_env")
TEAM = "team/a"


def start_buildgrid(folder: Path, **options: Any) -> BuildGrid:
    binary = bgd_binary()
    if binary is None:
        pytest.skip("BuildGrid is not installed (python3 -m venv /opt/buildgrid && "
                    "/opt/buildgrid/bin/pip install buildgrid; or UDO_BUILD_BUILDGRID_BGD)")
    return BuildGrid(folder, binary, **options).start()


@dataclass
class Grid:
    """A BuildGrid filled by a build with uploads under the instance TEAM (once per module)."""

    server: BuildGrid
    keys: Keys
    source: Project
    summary: dict[str, Any]

    @property
    def url(self) -> str:
        return f"{self.server.url}/{TEAM}"

    def key(self, action: str) -> str:
        return next(a["key"] for a in self.summary["actions"] if a["id"] == action)

    def keys_of(self, action: str) -> tuple[str, str]:
        """Where the action's entry is filed: its key, and its chain key (an index entry)."""
        return self.key(action), chain_key(self.source, action)

    def file_entry(self, action: str, entry: bytes) -> None:
        """Put `entry` as the action's entry (under its key and its chain key)."""
        client = self.client()
        for key in self.keys_of(action):
            client.put("ac", key, entry)
        client.close()

    def result(self, action: str) -> ActionResult:
        got = Store(self.source.store, create=False).ac.get(self.key(action))
        assert got is not None
        return got

    def client(self) -> GrpcCache:
        return GrpcCache(self.url)

    @property
    def read(self) -> list[str]:
        return ["--remote", self.url, "--trusted-key", self.keys.public]


@pytest.fixture(scope="module")
def grid(tmp_path_factory: pytest.TempPathFactory, keys: Keys) -> Iterator[Grid]:
    folder = tmp_path_factory.mktemp("grid")
    with pytest.MonkeyPatch.context() as env, fake_kinds():
        for name in ENV:
            env.delenv(name, raising=False)
        env.setenv("XDG_CONFIG_HOME", str(folder / "xdg-config"))
        server = start_buildgrid(folder / "bgd", instances=("", TEAM))
        try:
            source = Project(folder / "a")
            summary, _ = build(source, "--remote", f"{server.url}/{TEAM}", "--remote-upload",
                               "--signing-key", str(keys.writer_file))
            yield Grid(server, keys, source, summary)
        finally:
            server.kill()


@pytest.fixture
def shared(grid: Grid) -> Iterator[Grid]:
    """The grid; the entry of "quantize" put back as it was after the test."""
    client = grid.client()
    entry = client.get("ac", grid.key("quantize"), limit=1 << 20)
    assert entry is not None
    try:
        with fake_kinds():
            yield grid
    finally:
        client.close()
        with fake_kinds():
            grid.file_entry("quantize", entry)


def test_a_clean_checkout_gets_every_action_from_buildgrid(shared: Grid, tmp_path: Path) -> None:
    assert shared.summary["executed"] == 9 and shared.summary["remote"]["entries_uploaded"] == 9
    other = Project(tmp_path / "clone")
    summary, err = build(other, *shared.read)
    assert (summary["executed"], summary["cached"]) == (0, 9) and err == ""
    assert {a["source"] for a in summary["actions"]} == {"remote"}
    assert summary["remote"]["rejected"] == {} and summary["remote"]["hits"] == 9
    assert out_files(other.out) == out_files(shared.source.out)


def test_a_minimal_clone_asks_findmissingblobs_and_reads_no_blob(shared: Grid,
                                                                  tmp_path: Path) -> None:
    other = Project(tmp_path / "clone")
    summary, err = build(other, *shared.read, "--download", "minimal")
    assert (summary["executed"], summary["cached"], err) == (0, 9, "")
    assert summary["remote"]["bytes_downloaded"] == 0 and summary["download"][
        "remote_only_actions"] == 9
    client = shared.client()
    record = shared.result("prepare:sm8550/O2/native/default/int8").outputs["record"]
    absent = hashlib.sha256(b"never uploaded").hexdigest()
    assert client.missing({record.digest: record.size, absent: 14}) == {absent}
    client.close()


def test_buildgrid_holds_every_blob_an_entry_names(shared: Grid) -> None:
    client = shared.client()
    for action in (a["id"] for a in shared.summary["actions"]):
        entry = client.get("ac", shared.key(action), limit=1 << 20)
        assert entry is not None
        files = R.ActionResult.FromString(entry).output_files
        assert files[0].path == R.ENTRY_PATH and len(files) == 1 + len(
            shared.result(action).outputs)
        for file in files:
            data = client.get("cas", file.digest.hash, limit=file.digest.size_bytes)
            assert data is not None and hashlib.sha256(data).hexdigest() == file.digest.hash
    client.close()


# -- poisoned entries: what a writer with access to the server could put there -----------------

def _file(grid: Grid, action: str, envelope: bytes) -> None:
    """Put `envelope` as the action's entry, as a writer would (blob, then entry)."""
    client = grid.client()
    digest = hashlib.sha256(envelope).hexdigest()
    client.put("cas", digest, envelope)
    client.close()
    outputs = {n: (o.digest, o.size) for n, o in grid.result(action).outputs.items()}
    grid.file_entry(action, R.entry_bytes(R.Pointer(digest, len(envelope)), outputs))


def untrusted_key(g: Grid) -> str:
    _file(g, "quantize", T.sign_entry(g.result("quantize"), g.keys.other))
    return T.UNTRUSTED


def forged_signer(g: Grid) -> str:
    import json

    doc = json.loads(T.sign_entry(g.result("quantize"), g.keys.other))
    doc["signer"] = g.keys.public
    _file(g, "quantize", json.dumps(doc).encode())
    return T.BAD_SIGNATURE


def unsigned(g: Grid) -> str:
    import json

    _file(g, "quantize", json.dumps(g.result("quantize").to_json()).encode())
    return T.UNSIGNED


def wrong_action_key(g: Grid) -> str:
    client = g.client()
    entry = client.get("ac", g.key("convert"), limit=1 << 20)
    client.close()
    assert entry is not None
    g.file_entry("quantize", entry)
    return T.WRONG_KEY


def not_an_entry_of_ours(g: Grid) -> str:  # a valid ActionResult without the envelope
    g.file_entry("quantize", bytes(R.ActionResult(exit_code=0).SerializeToString()))
    return T.MALFORMED


CORPUS: list[Callable[[Grid], str]] = [untrusted_key, forged_signer, unsigned, wrong_action_key,
                                       not_an_entry_of_ours]


@pytest.mark.parametrize("poison", CORPUS, ids=[p.__name__ for p in CORPUS])
def test_a_poisoned_entry_is_refused_and_built_locally(
        shared: Grid, tmp_path: Path, poison: Callable[[Grid], str]) -> None:
    why = poison(shared)
    summary, err = build(Project(tmp_path / "clone"), *shared.read)
    assert executed(summary) == ["quantize"] and summary["remote"]["rejected"] == {why: 1}
    assert err.count("warning:") == 1 and f"({why})" in err


# -- the transport --------------------------------------------------------------------------------

def test_large_blobs_go_through_bytestream_into_the_store(
        grid: Grid, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    streamed: list[str] = []
    for name in ("_read_stream", "_write_stream"):
        real = getattr(GrpcCache, name)

        def spy(self: GrpcCache, resource: str, *args: Any, _real: Any = real) -> Any:
            streamed.append(resource.split("/")[0 if not self.prefix else 2])
            return _real(self, resource, *args)

        monkeypatch.setattr(GrpcCache, name, spy)
    small, big = os.urandom(BATCH_LIMIT), os.urandom(3 * (1 << 20) + 17)
    writer = Store(tmp_path / "writer")
    result = ActionResult("ef" * 32, "prepare", "a record", {
        "small": Output(writer.cas.put(small).digest, len(small)),
        "big": Output(writer.cas.put(big).digest, len(big))})
    writer.ac.put(result)
    key = generate("ci")
    up = Remote(writer.cas, writer.ac, GrpcCache(grid.url), {}, Counters(), signing_key=key)
    assert up.upload(result)
    up.close()
    assert streamed == ["uploads"]  # the small blob and the envelope went in batches
    reader = Store(tmp_path / "reader")
    down = Remote(reader.cas, reader.ac, GrpcCache(grid.url),
                  T.trusted_set([key.public()]), Counters())
    assert down.fetch(result.key) == result
    down.close()
    assert streamed == ["uploads", "blobs"]
    assert reader.cas.get(result.outputs["big"].digest) == big
    assert reader.cas.get(result.outputs["small"].digest) == small


def test_instances_keep_their_entries_apart(grid: Grid) -> None:
    key = grid.key("convert")
    assert GrpcCache(grid.url).get("ac", key, limit=1 << 20) is not None
    assert GrpcCache(grid.server.url).get("ac", key, limit=1 << 20) is None  # instance ""
    named = GrpcCache(grid.server.url, RemoteOptions(instance=TEAM))
    assert named.instance == TEAM and named.get("ac", key, limit=1 << 20) is not None
    assert GrpcCache(f"{grid.server.url}/{TEAM}/", RemoteOptions(instance="x")).instance == TEAM


def test_headers_go_with_every_call(tmp_path: Path) -> None:
    server = start_buildgrid(tmp_path / "bgd", jwt_secret="s3cret-for-tests")
    try:
        data = b"a blob"
        digest = hashlib.sha256(data).hexdigest()
        bare = GrpcCache(server.url, RemoteOptions(max_failures=1))
        with pytest.raises(Refused, match="UNAUTHENTICATED|PERMISSION_DENIED"):
            bare.put("cas", digest, data)
        assert bare.disabled is None  # a refusal is not a failure of the server
        forged = GrpcCache(server.url, RemoteOptions(
            headers=(("Authorization", f"Bearer {token('another secret')}"),)))
        with pytest.raises(Refused):
            forged.get("cas", digest, limit=len(data))
        signed = GrpcCache(server.url, RemoteOptions(
            headers=(("Authorization", f"Bearer {token('s3cret-for-tests')}"),)))
        signed.put("cas", digest, data)
        assert signed.get("cas", digest, limit=len(data)) == data
        sink = signed.get_into("cas", digest, Buffer, limit=len(data))
        assert sink is not None and bytes(sink.data) == data
    finally:
        server.kill()


def _certificate(folder: Path, name: str, issuer: tuple[Any, Any] | None = None,
                 ip: str | None = None) -> tuple[Any, Any]:
    """A key and certificate (PEM files NAME.key, NAME.pem in `folder`): a CA's when
    `issuer` is None, else one it signs, for `ip` when given."""
    import datetime
    import ipaddress

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    signer_key, signer_cert = issuer if issuer else (key, None)
    now = datetime.datetime.now(datetime.timezone.utc)
    builder = (x509.CertificateBuilder().subject_name(subject)
               .issuer_name(signer_cert.subject if signer_cert else subject)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5))
               .not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.BasicConstraints(ca=issuer is None, path_length=None),
                              critical=True))
    if ip:
        builder = builder.add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(ip))]), False)
    cert = builder.sign(signer_key, hashes.SHA256())
    (folder / f"{name}.key").write_bytes(key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption()))
    (folder / f"{name}.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    return key, cert


def test_grpcs_with_a_ca_bundle_and_a_client_certificate(tmp_path: Path) -> None:
    ca = _certificate(tmp_path, "ca")
    _certificate(tmp_path, "server", ca, ip="127.0.0.1")
    _certificate(tmp_path, "client", ca)
    server = start_buildgrid(tmp_path / "bgd", tls=(
        tmp_path / "server.key", tmp_path / "server.pem", tmp_path / "ca.pem"))
    try:
        assert server.url.startswith("grpcs://")
        data = b"over TLS"
        digest = hashlib.sha256(data).hexdigest()
        mutual = GrpcCache(server.url, RemoteOptions(
            ca_bundle=str(tmp_path / "ca.pem"), client_cert=str(tmp_path / "client.pem"),
            client_key=str(tmp_path / "client.key")))
        mutual.put("cas", digest, data)
        assert mutual.get("cas", digest, limit=len(data)) == data
        anonymous = GrpcCache(server.url, RemoteOptions(ca_bundle=str(tmp_path / "ca.pem"),
                                                        retries=0))
        with pytest.raises(RemoteError):  # the server asks for a client certificate
            anonymous.get("cas", digest, limit=len(data))
        untrusting = GrpcCache(server.url, RemoteOptions(retries=0))  # the system's CAs
        with pytest.raises(RemoteError):
            untrusting.get("cas", digest, limit=len(data))
    finally:
        server.kill()


def test_an_unreachable_server_opens_the_breaker_at_once() -> None:
    client = GrpcCache(f"grpc://127.0.0.1:{free_port()}", RemoteOptions(
        retries=2, max_failures=3, backoff=0.001))
    with pytest.raises(RemoteError, match="UNAVAILABLE"):
        client.get("ac", "ab" * 32, limit=100)
    assert client.errors == 3 and client.why == {"read": "unreachable", "write": "unreachable"}
    started = time.perf_counter()
    with pytest.raises(Unavailable):
        client.put("cas", "ab" * 32, b"x")
    assert time.perf_counter() - started < 0.01


def test_a_silent_server_is_dropped_within_the_read_timeout() -> None:
    with socket.socket() as silent:  # accepts connections (the kernel does), never answers
        silent.bind(("127.0.0.1", 0))
        silent.listen(8)
        client = GrpcCache(f"grpc://127.0.0.1:{silent.getsockname()[1]}", RemoteOptions(
            connect_timeout=0.2, read_timeout=0.3, retries=1, max_failures=2))
        started = time.perf_counter()
        with pytest.raises(RemoteError):
            client.get("cas", "ab" * 32, limit=10)
        assert time.perf_counter() - started < 3.0 and client.errors >= 1


def test_urls_and_the_missing_extra_are_clear_errors(monkeypatch: pytest.MonkeyPatch) -> None:
    for url in ("grpc://host", "grpc://:80", "grpcx://host:1"):
        with pytest.raises(ValueError, match="grpc://HOST:PORT"):
            open_transport(url)
    assert GrpcCache("grpcs://cache.example:8980/main").instance == "main"
    monkeypatch.setitem(sys.modules, "grpc", None)
    with pytest.raises(ValueError, match=r"pip install 'udo-build\[grpc\]'"):
        open_transport("grpc://127.0.0.1:1")
