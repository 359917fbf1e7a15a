"""The HTTP cache client's connections: keep-alive pools shared by threads, proxies from the
environment (and no_proxy), .netrc credentials, custom headers, https with a private CA, and
client certificates. Real servers, started here: a cache server that keeps what is PUT in
memory and records each request (over TLS, and requiring a certificate, when asked), and a
forward proxy (CONNECT tunnels and absolute-URI requests) that records what it forwards."""

from __future__ import annotations

import base64
import datetime
import hashlib
import http.server
import ipaddress
import select
import socket
import socketserver
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from udo_build.builder.settings import settings
from udo_build.errors import UserError
from udo_build.store.remote import httpcache, httpclient
from udo_build.store.remote.httpcache import HttpCache
from udo_build.store.remote.transport import Buffer, Refused, RemoteError, RemoteOptions

from ..builder.fakes import fake_kinds
from ..builder.test_engine import Project
from .remote_fixtures import Keys, build, out_files

BODY = b"a blob of the cache " * 1000
NAME = hashlib.sha256(BODY).hexdigest()


# -- servers --------------------------------------------------------------------------------------

class Cache(http.server.ThreadingHTTPServer):
    """A cache server: GET, HEAD and PUT of what was PUT; each request recorded as (method,
    path, headers, client port, client certificate's common name)."""

    daemon_threads = True

    def __init__(self, tls: ssl.SSLContext | None = None, password: str | None = None) -> None:
        super().__init__(("127.0.0.1", 0), CacheHandler)
        self.tls, self.password = tls, password  # password: "user:secret" basic auth required
        # how bodies are answered: "" plainly; "chunked"; "chunked-cut" (half, then closed);
        # "short" (half of the Content-Length, then closed); "close" (whole, then the
        # connection closed without saying so)
        self.mode = ""
        self.closed = threading.Semaphore(0)  # released as each connection is closed
        self.blobs: dict[str, bytes] = {}
        self.requests: list[tuple[str, str, dict[str, str], int, str | None]] = []
        threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.server_address[1]}"

    def finish_request(self, request: Any, client_address: Any) -> None:
        if self.tls is not None:
            request = self.tls.wrap_socket(request, server_side=True,
                                           do_handshake_on_connect=False)
            try:
                request.do_handshake()
            except ssl.SSLError:  # refused: let the client read the alert before closing
                request.settimeout(2.0)
                while socket.socket.recv(request, 65536):  # the raw bytes, not TLS
                    pass
                raise
        super().finish_request(request, client_address)

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # refused handshakes: what some tests want

    def shutdown_request(self, request: Any) -> None:
        super().shutdown_request(request)
        self.closed.release()

    def close(self) -> None:
        self.shutdown()
        self.server_close()


class CacheHandler(http.server.BaseHTTPRequestHandler):
    server: Cache
    protocol_version = "HTTP/1.1"

    def log_message(self, *args: Any) -> None:
        pass

    def _record(self) -> bool:
        peer = self.connection.getpeercert() if self.server.tls else None
        common = next((v for rdn in (peer or {}).get("subject", ()) for k, v in rdn
                       if k == "commonName"), None)
        self.server.requests.append((self.command, self.path, dict(self.headers),
                                     self.client_address[1], common))
        want = self.server.password
        if want and self.headers.get("Authorization") != \
                "Basic " + base64.b64encode(want.encode()).decode():
            self._answer(401, b"")
            return False
        return True

    def _answer(self, status: int, body: bytes, head: bool = False) -> None:
        mode = self.server.mode
        self.send_response(status)
        if mode.startswith("chunked") and not head:
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            pieces = [body[i:i + 3000] for i in range(0, len(body), 3000)]
            for piece in pieces[:len(pieces) // 2] if mode == "chunked-cut" else pieces:
                self.wfile.write(b"%x\r\n%s\r\n" % (len(piece), piece))
            if mode == "chunked":
                self.wfile.write(b"0\r\n\r\n")
        else:
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if not head:
                self.wfile.write(body[:len(body) // 2] if mode == "short" else body)
        if mode in ("chunked-cut", "short", "close"):
            self.close_connection = True

    def do_GET(self) -> None:
        if self._record():
            data = self.server.blobs.get(self.path)
            self._answer(404 if data is None else 200, data or b"", self.command == "HEAD")

    do_HEAD = do_GET

    def do_PUT(self) -> None:
        data = self.rfile.read(int(self.headers["Content-Length"]))
        if self._record():
            self.server.blobs[self.path] = data
            self._answer(201, b"")


class Proxy(socketserver.ThreadingTCPServer):
    """A forward proxy: CONNECT tunnels, and absolute-URI requests forwarded one per
    connection; records each request line and its headers."""

    daemon_threads = True

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        super().__init__(("127.0.0.1", 0), ProxyHandler)
        self.tls = tls  # the proxy's own TLS (an https:// proxy)
        self.refuse = False  # answer each CONNECT with a 407
        self.seen: list[tuple[str, dict[str, str]]] = []
        threading.Thread(target=self.serve_forever, args=(0.05,), daemon=True).start()

    @property
    def url(self) -> str:
        return f"{'https' if self.tls else 'http'}://127.0.0.1:{self.server_address[1]}"

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, address = super().get_request()
        if self.tls is not None:
            sock = self.tls.wrap_socket(sock, server_side=True)
        return sock, address

    def close(self) -> None:
        self.shutdown()
        self.server_close()


class ProxyHandler(socketserver.StreamRequestHandler):
    server: Proxy
    rbufsize = 0  # unbuffered: nothing past the request's head is read before the tunnel

    def handle(self) -> None:
        """Each request of the connection in turn: a tunnel (the connection's last), or one
        forwarded on a connection of its own and its whole answer relayed (the client may
        send its next request on the same connection: a kept-alive proxy)."""
        while line := self.rfile.readline().decode():
            head: dict[str, str] = {}
            while (raw := self.rfile.readline()) not in (b"\r\n", b""):
                name, _, value = raw.decode().partition(":")
                head[name.strip()] = value.strip()
            method, target = line.split()[:2]
            self.server.seen.append((f"{method} {target}", head))
            if method == "CONNECT" and self.server.refuse:
                self.wfile.write(b"HTTP/1.1 407 Proxy Authentication Required\r\n"
                                 b"Content-Length: 0\r\n\r\n")
                return
            if method == "CONNECT":
                host, _, port = target.rpartition(":")
                upstream = socket.create_connection((host, int(port)))
                self.wfile.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
                self.wfile.flush()
                _pipe(self.connection, upstream)
                return
            self._forward(method, target, head)

    def _forward(self, method: str, target: str, head: dict[str, str]) -> None:
        host, _, port = target.split("/")[2].partition(":")
        lines = [f"{method} /{target.split('/', 3)[3]} HTTP/1.1"] + [
            f"{k}: {v}" for k, v in head.items()
            if not k.lower().startswith("proxy-") and k.lower() != "connection"]
        length, body = int(head.get("Content-Length", 0)), b""
        while len(body) < length and (piece := self.rfile.read(length - len(body))):
            body += piece  # unbuffered: a read at a time
        with socket.create_connection((host, int(port))) as upstream:
            upstream.sendall(("\r\n".join([*lines, "Connection: close", "", ""])).encode()
                             + body)
            while data := upstream.recv(65536):  # the answer, to its end
                self.connection.sendall(data)


def _pipe(client: socket.socket, upstream: socket.socket) -> None:
    with upstream:
        while True:
            ready, _, _ = select.select([client, upstream], [], [], 5)
            if not ready:
                return
            for sock in ready:
                data = sock.recv(65536)
                if not data:
                    return
                (upstream if sock is client else client).sendall(data)


# -- certificates ---------------------------------------------------------------------------------

@dataclass(frozen=True)
class Pki:
    ca: Path  # the CA that signs the server's and the client's certificates
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path
    other_ca: Path  # a CA that signed nothing here


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _issue(subject: str, key: Any, issuer: tuple[str, Any] | None, *, ca: bool = False,
           ip: str | None = None) -> x509.Certificate:
    now = datetime.datetime(2024, 1, 1, tzinfo=datetime.timezone.utc)
    issuer_name, issuer_key = issuer or (subject, key)
    builder = (x509.CertificateBuilder().subject_name(_name(subject))
               .issuer_name(_name(issuer_name)).public_key(key.public_key())
               .serial_number(x509.random_serial_number()).not_valid_before(now)
               .not_valid_after(now + datetime.timedelta(days=36500))
               .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        builder = builder.add_extension(x509.KeyUsage(
            digital_signature=True, content_commitment=False, key_encipherment=False,
            data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
            encipher_only=False, decipher_only=False), critical=True)
    if ip:
        builder = builder.add_extension(x509.SubjectAlternativeName(
            [x509.IPAddress(ipaddress.ip_address(ip)), x509.DNSName("localhost")]),
            critical=False)
    return builder.sign(issuer_key, hashes.SHA256())


def _write(path: Path, cert: x509.Certificate, key: Any = None) -> Path:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    if key is not None:
        path.with_suffix(".key").write_bytes(key.private_bytes(
            serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption()))
    return path


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    folder = tmp_path_factory.mktemp("pki")
    keys = {n: ec.generate_private_key(ec.SECP256R1()) for n in ("ca", "srv", "cli", "other")}
    ca = _issue("test CA", keys["ca"], None, ca=True)
    issuer = ("test CA", keys["ca"])
    _write(folder / "server.pem", _issue("127.0.0.1", keys["srv"], issuer, ip="127.0.0.1"),
           keys["srv"])
    _write(folder / "client.pem", _issue("builder-7", keys["cli"], issuer), keys["cli"])
    return Pki(_write(folder / "ca.pem", ca), folder / "server.pem", folder / "server.key",
               folder / "client.pem", folder / "client.key",
               _write(folder / "other.pem", _issue("other CA", keys["other"], None, ca=True)))


def server_tls(pki: Pki, *, require_client: bool = False) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(pki.server_cert, pki.server_key)
    if require_client:
        context.verify_mode = ssl.CERT_REQUIRED
        context.load_verify_locations(pki.ca)
    return context


@pytest.fixture
def cache() -> Iterator[Cache]:
    server = Cache()
    yield server
    server.close()


@pytest.fixture
def proxy() -> Iterator[Proxy]:
    server = Proxy()
    yield server
    server.close()


def no_env(**env: str) -> dict[str, str]:
    return {"HOME": "/nonexistent", **env}


# -- pools ----------------------------------------------------------------------------------------

def test_threads_share_keep_alive_connections(cache: Cache) -> None:
    client = HttpCache(cache.url, env=no_env())
    client.put("cas", NAME, BODY)

    def fetch() -> None:
        for _ in range(10):
            assert client.get("cas", NAME) == BODY

    threads = [threading.Thread(target=fetch) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    client.close()
    ports = {port for method, _, _, port, _ in cache.requests if method == "GET"}
    assert len(cache.requests) == 41 and 1 <= len(ports) <= 4  # at most one per thread


def _ports(cache: Cache, method: str = "GET") -> list[int]:
    return [port for m, _, _, port, _ in cache.requests if m == method]


def test_an_idle_connection_the_server_closed_is_replaced_for_free(
        cache: Cache, monkeypatch: pytest.MonkeyPatch) -> None:
    client = HttpCache(cache.url, RemoteOptions(retries=0), env=no_env())
    client.put("cas", NAME, BODY)
    cache.mode = "close"  # each connection closed after its answer, without saying so
    monkeypatch.setattr(httpcache, "STALE", ())  # the pool must see it: no free second try
    for _ in range(2):
        assert client.get("cas", NAME) == BODY
        assert cache.closed.acquire(timeout=10)  # closed before the next request
    put, first, second = _ports(cache, "PUT") + _ports(cache)
    assert put == first != second and client.errors == 0
    # closed as the request goes out (the pool saw nothing): sent on the dead connection, it
    # fails and is tried again once on a new one, not counted as a failure
    monkeypatch.undo()
    monkeypatch.setattr(httpclient, "_dropped", lambda sock: False)
    assert client.get("cas", NAME) == BODY
    assert len(set(_ports(cache))) == 3 and client.errors == 0
    assert client.failures == {"link": 0, "read": 0, "write": 0}


def test_chunked_answers_are_read_whole_and_the_connection_kept(cache: Cache) -> None:
    client = HttpCache(cache.url, RemoteOptions(retries=0), env=no_env())
    client.put("cas", NAME, BODY)
    cache.mode = "chunked"
    assert client.get("cas", NAME) == BODY and client.get("cas", "ab" * 32) is None
    streamed = client.get_into("cas", NAME, Buffer)
    assert streamed is not None and bytes(streamed.data) == BODY
    assert client.get("cas", NAME, limit=99) == BODY[:100]  # cut: its connection closed
    assert client.get("cas", NAME) == BODY
    ports = _ports(cache)
    assert ports[:4] == [_ports(cache, "PUT")[0]] * 4 and ports[4] != ports[3]


@pytest.mark.parametrize("mode", ["chunked-cut", "short"])
def test_an_answer_cut_short_is_a_failed_attempt(cache: Cache, mode: str) -> None:
    client = HttpCache(cache.url, RemoteOptions(retries=0), env=no_env())
    client.put("cas", NAME, BODY)
    cache.mode = mode
    with pytest.raises(RemoteError, match="the server closed the connection " + (
                       "before the answer's last chunk" if mode == "chunked-cut" else
                       "10000 bytes short of the answer's Content-Length")):
        client.get("cas", NAME)
    sink = Buffer()
    with pytest.raises(RemoteError):
        client.get_into("cas", NAME, lambda: sink)
    assert client.errors == 2 and sink.data == bytearray()  # the failed attempt's sink aborted
    cache.mode = ""
    assert client.get("cas", NAME) == BODY


# -- proxies --------------------------------------------------------------------------------------

def test_http_proxy_is_used_and_no_proxy_bypasses_it(cache: Cache, proxy: Proxy,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", proxy.url.replace("//", "//me:pw@"))
    monkeypatch.delenv("http_proxy", raising=False)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    client = HttpCache(cache.url)  # the process's environment
    client.put("cas", NAME, BODY)
    assert client.get("cas", NAME) == BODY and client.get("cas", "ab" * 32) is None
    lines = [line for line, _ in proxy.seen]
    assert lines == [f"PUT {cache.url}/cas/{NAME}", f"GET {cache.url}/cas/{NAME}",
                     f"GET {cache.url}/cas/{'ab' * 32}"]
    assert all(h["Proxy-Authorization"] == "Basic " + base64.b64encode(b"me:pw").decode()
               for _, h in proxy.seen)
    assert [r[:2] for r in cache.requests][0] == ("PUT", f"/cas/{NAME}")
    assert all("Proxy-Authorization" not in r[2] for r in cache.requests)
    for no_proxy in ("127.0.0.1", f"example.org, 127.0.0.1:{cache.server_address[1]}", "*"):
        monkeypatch.setenv("NO_PROXY", no_proxy)
        assert HttpCache(cache.url).get("cas", NAME) == BODY
    assert len(proxy.seen) == 3 and len(cache.requests) == 6


def test_https_goes_through_a_connect_tunnel(pki: Pki, proxy: Proxy) -> None:
    server = Cache(server_tls(pki))
    try:
        client = HttpCache(server.url, RemoteOptions(ca_bundle=str(pki.ca)),
                           env=no_env(https_proxy=proxy.url, http_proxy="http://unused:1"))
        client.put("cas", NAME, BODY)
        assert client.get("cas", NAME) == BODY
    finally:
        server.close()
    assert proxy.seen[0][0] == f"CONNECT 127.0.0.1:{server.server_address[1]}"
    assert [r[:2] for r in server.requests] == [("PUT", f"/cas/{NAME}"), ("GET", f"/cas/{NAME}")]


def test_a_refused_tunnel_names_the_proxy_and_its_answer(pki: Pki, proxy: Proxy) -> None:
    proxy.refuse = True
    client = HttpCache("https://127.0.0.1:1", RemoteOptions(ca_bundle=str(pki.ca), retries=0),
                       env=no_env(https_proxy=proxy.url))
    with pytest.raises(RemoteError, match=r"the proxy \(\$https_proxy\) refused the tunnel to "
                       "127.0.0.1:1: HTTP 407 Proxy Authentication Required"):
        client.get("cas", NAME)
    assert proxy.seen[0][0] == "CONNECT 127.0.0.1:1" and client.failures["link"] == 1


def test_an_https_proxy_is_reached_over_tls(pki: Pki, cache: Cache) -> None:
    proxy = Proxy(server_tls(pki))
    try:
        client = HttpCache(cache.url, RemoteOptions(ca_bundle=str(pki.ca)),
                           env=no_env(http_proxy=proxy.url.replace("//", "//me:pw@")))
        client.put("cas", NAME, BODY)
        assert client.get("cas", NAME) == BODY
        with pytest.raises(ValueError, match=r"\$https_proxy: an https remote through an https "
                           "proxy is not supported"):
            HttpCache("https://127.0.0.1:1", env=no_env(https_proxy=proxy.url))
    finally:
        proxy.close()
    assert [line for line, _ in proxy.seen] == [f"PUT {cache.url}/cas/{NAME}",
                                                f"GET {cache.url}/cas/{NAME}"]
    assert proxy.seen[0][1]["Proxy-Authorization"] == "Basic " + base64.b64encode(
        b"me:pw").decode()


def test_a_socks_or_unknown_proxy_is_a_clear_error(cache: Cache) -> None:
    with pytest.raises(ValueError, match=r"\$ALL_PROXY: .*SOCKS proxies are not supported"):
        HttpCache(cache.url, env=no_env(ALL_PROXY="socks5://127.0.0.1:1080"))


def test_an_unreachable_proxy_names_itself(cache: Cache) -> None:
    dead = socket.socket()
    dead.bind(("127.0.0.1", 0))
    client = HttpCache(cache.url, RemoteOptions(retries=0),
                       env=no_env(all_proxy=f"127.0.0.1:{dead.getsockname()[1]}"))
    dead.close()
    with pytest.raises(RemoteError, match=r"the proxy \(\$all_proxy\): .*refused"):
        client.get("cas", NAME)
    assert client.disabled is None and client.failures["link"] == 1


# -- credentials and headers ----------------------------------------------------------------------

def test_netrc_gives_basic_auth_when_the_url_has_none(tmp_path: Path) -> None:
    server = Cache(password="alice:s3 cret")
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login alice password \"s3 cret\"\n"
                     "default login nobody password none\n")
    try:
        with pytest.raises(Refused, match="HTTP 401"):
            HttpCache(server.url, env=no_env()).put("cas", NAME, BODY)
        HttpCache(server.url, env=no_env(NETRC=str(netrc))).put("cas", NAME, BODY)
        home = tmp_path / "home"
        home.mkdir()
        (home / ".netrc").write_text(netrc.read_text())
        assert HttpCache(server.url, env={"HOME": str(home)}).get("cas", NAME) == BODY
        url = server.url.replace("//", "//alice:wrong@")  # the URL's credentials win
        with pytest.raises(Refused, match="HTTP 401"):
            HttpCache(url, env=no_env(NETRC=str(netrc))).get("cas", NAME)
    finally:
        server.close()
    assert server.blobs == {f"/cas/{NAME}": BODY}


def test_a_broken_netrc_names_its_line(cache: Cache, tmp_path: Path) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login alice password x\nmachine\n")
    with pytest.raises(ValueError, match=rf"{netrc}:\d: not a valid .netrc file"):
        HttpCache(cache.url, env=no_env(NETRC=str(netrc)))


def test_custom_headers_arrive_and_their_values_never_show_in_errors(cache: Cache,
                                                                   tmp_path: Path) -> None:
    netrc = tmp_path / "netrc"
    netrc.write_text("machine 127.0.0.1 login alice password from-netrc\n")
    headers = (("Authorization", "Bearer tok-123"), ("X-Api-Key", "key-456"))
    client = HttpCache(cache.url, RemoteOptions(headers=headers), env=no_env(NETRC=str(netrc)))
    client.put("cas", NAME, BODY)
    sent = cache.requests[0][2]
    assert sent["Authorization"] == "Bearer tok-123" and sent["X-Api-Key"] == "key-456"
    cache.password = "alice:other"
    with pytest.raises(Refused) as refused:
        client.get("cas", NAME)
    assert str(refused.value) == "HTTP 401 Unauthorized"
    project = tmp_path / "project"
    project.mkdir()
    (project / "udo-build.toml").write_text(
        '[remote]\nheaders = ["X-Api-Key: key-456", "Authorization Bearer tok-123"]\n')
    with pytest.raises(UserError) as bad:
        settings(project, env={})
    text = str(bad.value)
    assert "remote.headers[1]" in text and "udo-build.toml" in text
    assert "tok-123" not in text and "key-456" not in text
    with pytest.raises(UserError) as bad:
        settings(None, env={"UDO_BUILD_REMOTE_HEADERS": "X-A: 1\nno colon tok-123"})
    assert "UDO_BUILD_REMOTE_HEADERS, line 2" in str(bad.value)
    assert "tok-123" not in str(bad.value)


# -- TLS ------------------------------------------------------------------------------------------

def test_https_with_a_private_ca(pki: Pki) -> None:
    server = Cache(server_tls(pki))
    try:
        client = HttpCache(server.url, RemoteOptions(ca_bundle=str(pki.ca)), env=no_env())
        client.put("cas", NAME, BODY)
        assert client.get("cas", NAME) == BODY and client.head("cas", NAME)
        for ca in (None, str(pki.other_ca)):  # the system's CAs, or another CA
            stranger = HttpCache(server.url, RemoteOptions(ca_bundle=ca, retries=0),
                                 env=no_env())
            with pytest.raises(RemoteError) as refused:
                stranger.get("cas", NAME)
            assert "the TLS handshake failed: certificate verify failed" in str(refused.value)
            assert "set [remote] ca_bundle" in str(refused.value)
            assert stranger.failures["link"] == 1  # not connected: the link failed
    finally:
        server.close()
    assert len(server.requests) == 3


def test_a_client_certificate_is_required_and_sent(pki: Pki) -> None:
    server = Cache(server_tls(pki, require_client=True))
    try:
        bare = HttpCache(server.url, RemoteOptions(ca_bundle=str(pki.ca), retries=0),
                         env=no_env())
        with pytest.raises(RemoteError, match="the TLS handshake failed: .*certificate "
                           "required: the server requires a client certificate; set "
                           r"\[remote\] client_cert"):
            bare.get("cas", NAME)
        assert server.requests == []
        client = HttpCache(server.url, RemoteOptions(
            ca_bundle=str(pki.ca), client_cert=str(pki.client_cert),
            client_key=str(pki.client_key)), env=no_env())
        client.put("cas", NAME, BODY)
        assert client.get("cas", NAME) == BODY
    finally:
        server.close()
    assert [r[4] for r in server.requests] == ["builder-7", "builder-7"]


def test_bad_tls_files_are_named_when_the_client_is_made(pki: Pki, tmp_path: Path) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    url = "https://127.0.0.1:1"
    with pytest.raises(ValueError, match=rf"the CA bundle {junk}: .*a PEM file"):
        HttpCache(url, RemoteOptions(ca_bundle=str(junk)), env=no_env())
    with pytest.raises(ValueError, match=rf"the client certificate {junk} and "):
        HttpCache(url, RemoteOptions(client_cert=str(junk), client_key=str(pki.client_key)),
                  env=no_env())
    with pytest.raises(ValueError, match="without its client certificate"):
        HttpCache(url, RemoteOptions(client_key=str(pki.client_key)), env=no_env())


# -- settings -------------------------------------------------------------------------------------

def test_remote_access_settings(pki: Pki, tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "certs").mkdir(parents=True)
    (project / "certs" / "ca.pem").write_bytes(pki.ca.read_bytes())
    user = tmp_path / "xdg" / "udo-build" / "config.toml"
    user.parent.mkdir(parents=True)
    user.write_text('[remote]\nheaders = ["X-Api-Key: user", "X-Team: vision"]\n')
    (project / "udo-build.toml").write_text(
        '[remote]\nheaders = ["x-api-key: project"]\nca_bundle = "certs/ca.pem"\n'
        f'client_cert = "{pki.client_cert}"\nclient_key = "{pki.client_key}"\n'
        'instance_name = "main"\n')
    env = {"XDG_CONFIG_HOME": str(tmp_path / "xdg")}
    got = settings(project, env=env)
    assert got.headers == (("X-Team", "vision"), ("x-api-key", "project"))
    assert got.ca_bundle == project / "certs/ca.pem" and got.instance == "main"
    assert (got.client_cert, got.client_key) == (pki.client_cert, pki.client_key)
    got = settings(project, env={**env, "UDO_BUILD_REMOTE_HEADERS": "X-Team: audio\n\nX-B: 2"})
    assert got.headers == (("x-api-key", "project"), ("X-Team", "audio"), ("X-B", "2"))
    got = settings(None, env={"REQUESTS_CA_BUNDLE": str(pki.other_ca),
                              "SSL_CERT_FILE": str(pki.ca)})
    assert got.ca_bundle == pki.other_ca  # used only when no [remote] ca_bundle is set
    assert settings(project, env={**env, "SSL_CERT_FILE": str(pki.other_ca)}).ca_bundle == \
        project / "certs/ca.pem"
    (project / "udo-build.toml").write_text('[remote]\nclient_cert = "certs/me.pem"\n')
    with pytest.raises(UserError) as missing:
        settings(project, env=env)
    assert "no such file" in str(missing.value) and "remote.client_cert" in str(missing.value)
    with pytest.raises(UserError, match="SSL_CERT_FILE: no such file"):
        settings(None, env={"SSL_CERT_FILE": str(tmp_path / "none.pem")})


@pytest.mark.usefixtures("clean_env")
def test_a_build_reaches_an_https_remote_as_its_config_says(pki: Pki, keys: Keys,
                                                           tmp_path: Path) -> None:
    server = Cache(server_tls(pki, require_client=True))
    config = (f'[remote]\nurl = "{server.url}/udo"\ntrusted_keys = ["{keys.public}"]\n'
              f'ca_bundle = "{pki.ca}"\nclient_cert = "{pki.client_cert}"\n'
              f'client_key = "{pki.client_key}"\nheaders = ["X-Api-Key: key-456"]\n')
    try:
        with fake_kinds():
            writer, reader = Project(tmp_path / "a"), Project(tmp_path / "b")
            for project in (writer, reader):
                (project.root / "udo-build.toml").write_text(config)
            wrote, err = build(writer, "--remote-upload", "--signing-key", str(keys.writer_file))
            assert wrote["remote"]["entries_uploaded"] == 9 and err == ""
            read, err = build(reader)
    finally:
        server.close()
    assert read["executed"] == 0 and read["remote"]["hits"] == 9 and err == ""
    assert out_files(writer.out) == out_files(reader.out)
    assert all(r[2]["X-Api-Key"] == "key-456" and r[4] == "builder-7" for r in server.requests)
    assert {r[1].split("/")[2] for r in server.requests} == {"ac", "cas"}
