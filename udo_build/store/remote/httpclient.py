"""The connections under the HTTP cache client (`httpcache`): urllib3 pools, the proxy, the
credentials and the TLS settings a remote's URL and options call for.

- Pools: one urllib3 `PoolManager` per client, thread-safe, keep-alive connections reused by
  every thread (up to `POOL` kept per host; more are opened when needed). urllib3's own retries
  and redirects are off: the `Breaker` retries.
- Proxies, as curl and requests take them from the environment: `http_proxy` / `https_proxy`
  by the URL's scheme, else `all_proxy` (each also in capitals; lower case wins), unless
  `no_proxy` names the host (`*`, host names, domain suffixes, with or without a port). An
  https remote is reached through a CONNECT tunnel. Credentials in the proxy URL are sent to it.
- Credentials: the URL's `user:password@`, else an `Authorization` header of the options, else
  the host's entry (or the default one) of the `.netrc` file (`$NETRC`, else `~/.netrc`).
- TLS: the options' CA bundle (else the system's CAs; OpenSSL honours `SSL_CERT_FILE`), and a
  client certificate and key for servers that require one (mutual TLS). Bad files are found
  when the client is made, with their names, not at the first request.
- Watching: each attempt's connection is handed to its `Transfer` as the pool gives it out, so
  that the watchdog can shut its socket down (whether it is sending, waiting or reading).
"""

from __future__ import annotations

import base64
import os
import ssl
import threading
import urllib.parse
from collections.abc import Mapping
from typing import Any

import urllib3
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool
from urllib3.util.ssl_ import create_urllib3_context

from .deadlines import Transfer
from .transport import RemoteOptions, Stalled

POOL = 48  # connections kept per host (the remote tier runs up to 44 requests at once)
PROXY_SCHEMES = ("http", "https")

_current = threading.local()  # the Transfer of the attempt running on this thread


def watching(transfer: Transfer | None) -> None:
    """Hand the connections of this thread's next requests to `transfer` (None: to none)."""
    _current.transfer = transfer
    _current.reused = False


def reused() -> bool:
    """Whether this thread's current attempt went out on a kept-alive connection."""
    return bool(getattr(_current, "reused", False))


def _taken(conn: Any) -> None:
    transfer: Transfer | None = getattr(_current, "transfer", None)
    if transfer is not None:
        transfer.conn = conn
        transfer.connected = _current.reused = conn.sock is not None


def _connected(conn: Any) -> None:
    transfer: Transfer | None = getattr(_current, "transfer", None)
    if transfer is not None:
        transfer.conn, transfer.connected = conn, True
        if transfer.reason is not None:  # dropped while it connected
            conn.close()
            raise Stalled(transfer.reason)


class _WatchedConnection(HTTPConnection):
    def connect(self) -> None:
        super().connect()
        _connected(self)


class _WatchedTLSConnection(HTTPSConnection):
    def connect(self) -> None:
        super().connect()
        _connected(self)


class _WatchedPool(HTTPConnectionPool):
    ConnectionCls = _WatchedConnection

    def _get_conn(self, timeout: float | None = None) -> Any:
        conn = super()._get_conn(timeout)
        _taken(conn)
        return conn


class _WatchedTLSPool(HTTPSConnectionPool):
    ConnectionCls = _WatchedTLSConnection

    def _get_conn(self, timeout: float | None = None) -> Any:
        conn = super()._get_conn(timeout)
        _taken(conn)
        return conn


def pool_manager(url: str, options: RemoteOptions, env: Mapping[str, str]
                 ) -> urllib3.PoolManager:
    """The pools that reach `url` (through its proxy, if one applies); ValueError naming the
    setting or file at fault."""
    parts = urllib.parse.urlsplit(url)
    timeout = urllib3.Timeout(connect=options.connect_timeout, read=options.read_timeout)
    kw: dict[str, Any] = {"maxsize": POOL, "block": False, "retries": False,
                          "timeout": timeout}
    if parts.scheme == "https":
        kw["ssl_context"] = tls_context(options)
    proxy = proxy_for(parts.scheme, parts.netloc.rpartition("@")[2], env)
    manager: urllib3.PoolManager
    if proxy is None:
        manager = urllib3.PoolManager(**kw)
    else:
        proxy_url, where = proxy
        manager = urllib3.ProxyManager(proxy_url, proxy_headers=_proxy_auth(proxy_url), **kw)
        manager.proxy_from = where  # type: ignore[attr-defined]
    manager.pool_classes_by_scheme = {"http": _WatchedPool, "https": _WatchedTLSPool}
    return manager


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


def _proxy_auth(proxy_url: str) -> dict[str, str]:
    parts = urllib.parse.urlsplit(proxy_url)
    if parts.username is None:
        return {}
    return {"Proxy-Authorization": basic(parts.username, parts.password)}


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
    context = create_urllib3_context()
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


def _tls_reason(exc: BaseException) -> str:
    text = getattr(exc, "reason", None) or getattr(exc, "strerror", None) or str(exc)
    return str(text).replace("_", " ").lower()
