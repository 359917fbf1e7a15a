"""The connections under the HTTP cache client (`httpcache`): the standard library's
`http.client` connections in a pool, the proxy, the credentials and the TLS settings a remote's
URL and options call for.

- Pools: one `Pool` per client (a client reaches one host), thread-safe: keep-alive
  connections reused by every thread (up to `POOL` kept; more are opened when needed). An idle
  connection the server closed is replaced before it is used. Nothing is retried or redirected
  here: the `Breaker` retries, and a 3xx is an answer like any other.
- Proxies, as curl and requests take them from the environment: `http_proxy` / `https_proxy`
  by the URL's scheme, else `all_proxy` (each also in capitals; lower case wins), unless
  `no_proxy` names the host (`*`, host names, domain suffixes, with or without a port). An
  http remote is asked through the proxy (absolute-URI requests); an https remote is reached
  through a CONNECT tunnel. Credentials in the proxy URL are sent to it. A proxy that cannot be
  reached, or refuses the tunnel, is named (the variable that set it) in the error.
- Credentials: the URL's `user:password@`, else an `Authorization` header of the options, else
  the host's entry (or the default one) of the `.netrc` file (`$NETRC`, else `~/.netrc`).
- TLS: the options' CA bundle (else the system's CAs; OpenSSL honours `SSL_CERT_FILE`), and a
  client certificate and key for servers that require one (mutual TLS). Bad files are found
  when the client is made, with their names, not at the first request. An https proxy is
  trusted by the same settings; an https remote through an https proxy (TLS inside TLS) is
  not supported.
- Watching: each attempt's connection is handed to its `Transfer` as the pool gives it out, so
  that the watchdog can shut its socket down (whether it is sending, waiting or reading).
"""

from __future__ import annotations

import base64
import http.client
import os
import select
import socket
import threading
import urllib.parse
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any

from .deadlines import Transfer
from .transport import RemoteOptions, Stalled

if TYPE_CHECKING:
    import ssl

POOL = 48  # connections kept (the remote tier runs up to 44 requests at once)
CHUNK = 256 << 10  # bytes of a body sent at a time
PROXY_SCHEMES = ("http", "https")

_current = threading.local()  # the Transfer of the attempt running on this thread


def watching(transfer: Transfer | None) -> None:
    """Hand the connections of this thread's next requests to `transfer` (None: to none)."""
    _current.transfer = transfer
    _current.reused = False


def reused() -> bool:
    """Whether this thread's current attempt went out on a kept-alive connection."""
    return bool(getattr(_current, "reused", False))


def _taken(conn: Connection) -> None:
    transfer: Transfer | None = getattr(_current, "transfer", None)
    if transfer is not None:
        transfer.conn = conn
        transfer.connected = _current.reused = conn.sock is not None


def _connected(conn: Connection) -> None:
    transfer: Transfer | None = getattr(_current, "transfer", None)
    if transfer is not None:
        transfer.conn, transfer.connected = conn, True
        if transfer.reason is not None:  # dropped while it connected
            conn.close()
            raise Stalled(transfer.reason)


class ProxyError(OSError):
    """The proxy could not be reached, or refused the tunnel (its variable named)."""


class Connection(http.client.HTTPConnection):
    """One connection to the remote's host, opened by its pool (proxy, tunnel, TLS)."""

    def __init__(self, pool: Pool) -> None:
        super().__init__(pool.host, pool.port, timeout=pool.options.read_timeout)
        self.pool = pool
        self.opened: socket.socket | None = None  # kept while an answer reads on after close

    def connect(self) -> None:
        self.sock = self.opened = self.pool.open_socket()
        _connected(self)

    def shutdown(self) -> None:
        """End a blocked send or read at once (the watchdog's way to drop a transfer)."""
        if self.opened is not None:
            try:
                self.opened.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass


class Pool:
    """The kept-alive connections to one remote (through its proxy, if one applies)."""

    def __init__(self, url: str, options: RemoteOptions, env: Mapping[str, str]) -> None:
        """ValueError naming the setting or file at fault."""
        parts = urllib.parse.urlsplit(url)
        https = parts.scheme == "https"
        self.options = options
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if https else 80)
        self.tls = tls_context(options) if https else None
        self.proxy_from: str | None = None  # the variable that named the proxy
        self.proxy: tuple[str, int] | None = None
        self.proxy_tls: ssl.SSLContext | None = None
        self.proxy_headers: dict[str, str] = {}  # sent to the proxy (its credentials)
        self.prefix = ""  # before each path: the origin, when the proxy is asked for it
        found = proxy_for(parts.scheme, parts.netloc.rpartition("@")[2], env)
        if found is not None:
            proxy_url, self.proxy_from = found
            proxy = urllib.parse.urlsplit(proxy_url)
            if proxy.scheme == "https":
                if https:
                    raise ValueError(f"${self.proxy_from}: an https remote through an https "
                                     "proxy is not supported; name the proxy as http://")
                self.proxy_tls = tls_context(options)
            self.proxy = (proxy.hostname or "", proxy.port or (443 if self.proxy_tls else 80))
            self.proxy_headers = _proxy_auth(proxy)
            if not https:
                self.prefix = f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"
        self._idle: list[Connection] = []
        self._lock = threading.Lock()

    def request(self, method: str, path: str, headers: Mapping[str, str], body: bytes | None,
                moved: Callable[[int], None]) -> tuple[Connection, http.client.HTTPResponse]:
        """Send a request on a connection of the pool (a body in pieces of `CHUNK`, each
        counted by `moved` once sent) and read its answer's head. The caller reads the body,
        then gives the connection back (`give`) or closes it."""
        conn = self.take()
        try:
            conn.putrequest(method, self.prefix + path)  # Host, Accept-Encoding: identity
            for name, value in headers.items():
                conn.putheader(name, value)
            if self.prefix:  # asked of the proxy (a tunnel's got its credentials at CONNECT)
                for name, value in self.proxy_headers.items():
                    conn.putheader(name, value)
            conn.endheaders()
            if body is not None:
                view = memoryview(body)
                for start in range(0, len(view), CHUNK):
                    piece = view[start:start + CHUNK]
                    conn.send(piece)
                    moved(len(piece))
            return conn, conn.getresponse()
        except BaseException:
            conn.close()
            raise

    def take(self) -> Connection:
        """A connected connection: a kept-alive one the server has not closed, else a new
        one. Handed to this thread's transfer first (see `watching`)."""
        while True:
            with self._lock:
                conn = self._idle.pop() if self._idle else None
            if conn is None or not _dropped(conn.sock):
                break
            conn.close()
        conn = conn or Connection(self)
        _taken(conn)
        if conn.sock is None:
            conn.connect()
        return conn

    def give(self, conn: Connection) -> None:
        """Keep a connection whose answer was read whole (one the server closes is closed)."""
        if conn.sock is not None:
            with self._lock:
                if len(self._idle) < POOL:
                    self._idle.append(conn)
                    return
        conn.close()

    def clear(self) -> None:
        """Close the kept-alive connections."""
        with self._lock:
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()

    def open_socket(self) -> socket.socket:
        """A new socket to the host, through the proxy and TLS as set (the proxy's errors
        named), with the read timeout."""
        timeout = self.options.connect_timeout
        if self.proxy is None:
            sock = socket.create_connection((self.host, self.port), timeout)
        else:
            sock = self._through_proxy(self.proxy, timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self.tls is not None:
                sock = self.tls.wrap_socket(sock, server_hostname=self.host)
            sock.settimeout(self.options.read_timeout)
        except BaseException:
            sock.close()
            raise
        return sock

    def _through_proxy(self, proxy: tuple[str, int], timeout: float) -> socket.socket:
        try:
            sock = socket.create_connection(proxy, timeout)
        except OSError as exc:
            raise ProxyError(f"the proxy (${self.proxy_from}): {_phrase(exc)}") from exc
        try:
            if self.proxy_tls is not None:
                sock = self.proxy_tls.wrap_socket(sock, server_hostname=proxy[0])
            if self.tls is not None:
                self._tunnel(sock)
        except OSError as exc:
            sock.close()
            if isinstance(exc, ProxyError):
                raise
            raise ProxyError(f"the proxy (${self.proxy_from}): {_phrase(exc)}") from exc
        return sock

    def _tunnel(self, sock: socket.socket) -> None:
        """Ask the proxy for a tunnel to the host (CONNECT); ProxyError if it refuses."""
        target = f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"
        lines = [f"CONNECT {target} HTTP/1.1", f"Host: {target}",
                 *(f"{k}: {v}" for k, v in self.proxy_headers.items()), "", ""]
        sock.sendall("\r\n".join(lines).encode("latin-1"))
        response = http.client.HTTPResponse(sock, method="CONNECT")
        try:
            response.begin()
        finally:
            response.close()  # the socket stays open: the tunnel
        if response.status != 200:
            raise ProxyError(f"the proxy (${self.proxy_from}) refused the tunnel to {target}: "
                             f"HTTP {response.status} {response.reason}".rstrip())


def _dropped(sock: Any) -> bool:
    """Whether an idle connection's socket is readable: closed by the server (or sent
    something unasked); either way it will not do for a request."""
    if sock is None:
        return True
    if not hasattr(select, "poll"):  # Windows
        return bool(select.select([sock], [], [], 0)[0])
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


def proxy_for(scheme: str, netloc: str, env: Mapping[str, str]) -> tuple[str, str] | None:
    """(the proxy's URL, the variable that named it) for a request to `netloc`, or None."""
    found = None
    for name in (f"{scheme}_proxy", "all_proxy"):
        for variant in (name, name.upper()):
            if env.get(variant, "").strip():
                found = (env[variant].strip(), variant)
                break
        if found:
            break
    if found is None:
        return None
    no_proxy = env.get("no_proxy", env.get("NO_PROXY", ""))
    if no_proxy.strip():
        from urllib.request import proxy_bypass_environment  # a build without one: no import

        if proxy_bypass_environment(netloc, {"no": no_proxy}):
            return None
    value, where = found
    if "://" not in value:
        value = "http://" + value  # as curl: a bare host:port is an HTTP proxy
    proxy = urllib.parse.urlsplit(value)
    if proxy.scheme not in PROXY_SCHEMES or not proxy.hostname:
        raise ValueError(f"${where}: a proxy is http://HOST:PORT or https://HOST:PORT, not "
                         f"{proxy.scheme}://... (SOCKS proxies are not supported)")
    return value, where


def _proxy_auth(proxy: urllib.parse.SplitResult) -> dict[str, str]:
    if proxy.username is None:
        return {}
    return {"Proxy-Authorization": basic(proxy.username, proxy.password)}


def basic(user: str, password: str | None) -> str:
    """The Authorization value of HTTP basic auth (URL-quoted parts are unquoted)."""
    secret = f"{urllib.parse.unquote(user)}:{urllib.parse.unquote(password or '')}"
    return "Basic " + base64.b64encode(secret.encode()).decode()


def netrc_auth(host: str, env: Mapping[str, str]) -> str | None:
    """The Authorization value from the .netrc entry of `host` (or its default entry)."""
    path = env.get("NETRC") or os.path.join(env.get("HOME") or os.path.expanduser("~"),
                                            ".netrc")
    if not os.path.isfile(path):
        return None
    import netrc  # only with a .netrc file

    try:
        found = netrc.netrc(path).authenticators(host)
    except netrc.NetrcParseError as exc:
        raise ValueError(f"{exc.filename}:{exc.lineno}: not a valid .netrc file "
                         f"({exc.msg})") from None
    except OSError as exc:
        raise ValueError(f"{path}: cannot be read ({exc.strerror})") from None
    if found is None:
        return None
    login, _, password = found
    return basic(urllib.parse.quote(login), urllib.parse.quote(password or ""))


def tls_context(options: RemoteOptions) -> ssl.SSLContext:
    """The TLS settings of an https remote: its CAs (the options' bundle, else the system's)
    and the client certificate; ValueError naming a file that will not do."""
    import ssl  # only for https

    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)  # verifies the certificate and host
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.options |= ssl.OP_NO_COMPRESSION
    context.post_handshake_auth = True  # a server may ask for the client certificate late
    try:
        if options.ca_bundle:
            context.load_verify_locations(cafile=options.ca_bundle)
        else:
            context.load_default_certs()
    except (OSError, ssl.SSLError) as exc:
        raise ValueError(f"the CA bundle {options.ca_bundle}: {_tls_reason(exc)}; it must be "
                         "a PEM file of CA certificates") from None
    if options.client_key and not options.client_cert:
        raise ValueError("a client key is set without its client certificate (client_cert)")
    if options.client_cert:
        try:
            context.load_cert_chain(options.client_cert, options.client_key)
        except (OSError, ssl.SSLError) as exc:
            files = " and ".join(f for f in (options.client_cert, options.client_key) if f)
            raise ValueError(f"the client certificate {files}: {_tls_reason(exc)}; it must be "
                             "a PEM certificate with its private key (unencrypted)") from None
    return context


def tls_error(exc: BaseException) -> BaseException:
    """A TLS error of an https remote's attempt (its handshake, or the alert a server sends
    after it) as an OSError saying what to do; other errors as they are."""
    import ssl  # already imported: the pool's context made it

    if not isinstance(exc, ssl.SSLError):
        return exc
    if isinstance(exc, ssl.SSLCertVerificationError):
        return OSError(
            f"the TLS handshake failed: certificate verify failed ({exc.verify_message}): the "
            "server's certificate is not signed by a CA this machine trusts, or is not for "
            "this host; set [remote] ca_bundle to the PEM file of its CA")
    text = _tls_reason(exc)
    if "certificate required" in text:
        text += ": the server requires a client certificate; set [remote] client_cert"
    elif isinstance(exc, ssl.SSLEOFError):
        text += " (does the server require a client certificate, [remote] client_cert?)"
    return OSError(f"the TLS handshake failed: {text}")


def _phrase(exc: BaseException) -> str:
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__


def _tls_reason(exc: BaseException) -> str:
    text = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or str(exc)
    return str(text).replace("_", " ").lower()
