"""A client of the Bazel HTTP remote-cache protocol: GET, HEAD and PUT of `/cas/<sha256>` and
`/ac/<key>` under a base URL (nginx WebDAV, bazel-remote, any server that stores what is PUT).

Built for a build that must never wait long on it:

- short timeouts: one to connect, one for each read (2 s and 5 s by default);
- a failed attempt (network error, timeout, HTTP 5xx) is retried with a small exponential
  backoff (`retries` more times; 50 ms, 100 ms, ...); HTTP 4xx answers are not retried;
- a circuit breaker: after `max_failures` failed attempts in a row the remote is disabled for
  the rest of the process (`disabled` says why) and every call raises `Unavailable` at once.

Large bodies are streamed (`get_into`): each chunk goes to a sink as it arrives (a blob
writer hashes and stores it), so a download is never held in memory whole. A body longer than
the reader's limit is cut there (its sink then fails its own check).

One keep-alive connection per thread. Only the standard library (`http.client`).
"""

from __future__ import annotations

import base64
import http.client
import threading
import time
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from .. import __version__

OK_PUT = (200, 201, 204)
STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)
CHUNK = 256 << 10  # bytes read at a time from a streamed body


class Sink(Protocol):
    """Where a streamed body goes: `write` each chunk; `abort` when the attempt failed."""

    def write(self, chunk: memoryview) -> None: ...

    def abort(self) -> None: ...


S = TypeVar("S", bound=Sink)


@dataclass(frozen=True)
class RemoteOptions:
    connect_timeout: float = 2.0
    read_timeout: float = 5.0
    retries: int = 2
    max_failures: int = 3  # failed attempts in a row that disable the remote
    backoff: float = 0.05  # seconds before the first retry; doubles each time


class RemoteError(Exception):
    """A request failed (after its retries)."""


class Unavailable(RemoteError):
    """The remote is disabled for the rest of this process (the circuit breaker is open)."""


class Refused(RemoteError):
    """The server answered with an HTTP 4xx status (other than 404 for a read)."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"HTTP {status} {reason}".strip())
        self.status = status


class HttpCache:
    def __init__(self, url: str, options: RemoteOptions | None = None) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"a remote cache URL is http://HOST[:PORT][/PATH] or https://..., "
                             f"not {url!r}")
        self.options = options or RemoteOptions()
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port
        self.base = parts.path.rstrip("/")
        self.url = urllib.parse.urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2],
                                            self.base, "", ""))
        self.headers = {"User-Agent": f"udo-build/{__version__}"}
        if parts.username is not None:
            secret = f"{urllib.parse.unquote(parts.username)}:" \
                     f"{urllib.parse.unquote(parts.password or '')}"
            self.headers["Authorization"] = "Basic " + base64.b64encode(secret.encode()).decode()
        self.disabled: str | None = None
        self.failures = 0  # failed attempts in a row
        self.errors = 0  # failed attempts in all
        self._lock = threading.Lock()
        self._local = threading.local()

    # -- the protocol -----------------------------------------------------------------------------

    def get(self, space: str, name: str, *, limit: int | None = None) -> bytes | None:
        """The bytes stored under /<space>/<name>, or None when the server has none (404).
        At most `limit` + 1 bytes are read."""
        status, data = self._request("GET", space, name, limit=limit)
        return None if status == 404 else data

    def get_into(self, space: str, name: str, open_sink: Callable[[], S], *,
                 limit: int | None = None) -> S | None:
        """Stream the body under /<space>/<name> into a sink that `open_sink` makes for each
        attempt (the sink of a failed attempt is aborted); that sink, or None on a 404. At
        most `limit` + 1 bytes are read."""
        status, sink = self._request("GET", space, name, limit=limit, open_sink=open_sink)
        return None if status == 404 else sink

    def head(self, space: str, name: str) -> bool:
        status, _ = self._request("HEAD", space, name)
        return status == 200

    def put(self, space: str, name: str, data: bytes) -> None:
        self._request("PUT", space, name, data)

    def close(self) -> None:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            conn.close()
            self._local.conn = None

    # -- retries and the breaker ------------------------------------------------------------------

    def _request(self, method: str, space: str, name: str, body: bytes | None = None, *,
                 limit: int | None = None, open_sink: Callable[[], Sink] | None = None
                 ) -> tuple[int, Any]:
        path = f"{self.base}/{space}/{name}"
        last = ""
        for attempt in range(self.options.retries + 1):
            if self.disabled is not None:
                raise Unavailable(self.disabled)
            if attempt:
                time.sleep(self.options.backoff * 2 ** (attempt - 1))
            try:
                status, data = self._attempt(method, path, body, limit, open_sink)
            except (OSError, http.client.HTTPException) as exc:
                last = _describe(exc)
            else:
                if status < 500:
                    self._succeeded()
                    return self._check(method, status, data)
                last = f"HTTP {status}"
            self._failed(last)
        raise RemoteError(f"{method} {path}: {last}")

    def _check(self, method: str, status: int, data: Any) -> tuple[int, Any]:
        if status in (OK_PUT if method == "PUT" else (200, 404)):
            return status, data
        reason = http.client.responses.get(status, "")
        raise Refused(status, reason)

    def _succeeded(self) -> None:
        with self._lock:
            self.failures = 0

    def _failed(self, error: str) -> None:
        with self._lock:
            self.failures += 1
            self.errors += 1
            if self.failures >= self.options.max_failures and self.disabled is None:
                self.disabled = f"{self.url}: {error}; {self.failures} failures in a row"

    # -- one attempt ------------------------------------------------------------------------------

    def _attempt(self, method: str, path: str, body: bytes | None, limit: int | None,
                 open_sink: Callable[[], Sink] | None) -> tuple[int, Any]:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            try:
                return self._exchange(conn, method, path, body, limit, open_sink)
            except STALE:
                pass  # the server closed the idle keep-alive connection: reconnect once, free
            except BaseException:
                self.close()
                raise
            self.close()
        conn = self._connect()
        try:
            return self._exchange(conn, method, path, body, limit, open_sink)
        except BaseException:
            self.close()
            raise

    def _connect(self) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        conn = cls(self.host, self.port, timeout=self.options.connect_timeout)
        self._local.conn = conn
        conn.connect()
        assert conn.sock is not None
        conn.sock.settimeout(self.options.read_timeout)
        return conn

    def _exchange(self, conn: http.client.HTTPConnection, method: str, path: str,
                  body: bytes | None, limit: int | None, open_sink: Callable[[], Sink] | None
                  ) -> tuple[int, Any]:
        headers = dict(self.headers)
        if body is not None:
            headers["Content-Type"] = "application/octet-stream"
        conn.request(method, path, body=body, headers=headers)
        response = conn.getresponse()
        data: Any
        if open_sink is not None and response.status == 200:
            data = _stream(response, open_sink(), limit)
        elif limit is None:
            data = response.read()
        else:
            data = response.read(limit + 1)
            if len(data) <= limit:
                _check_complete(response)
        if response.will_close or not response.isclosed():  # closed, or cut at the limit
            self.close()
        return response.status, data


def _stream(response: http.client.HTTPResponse, sink: S, limit: int | None) -> S:
    buffer = bytearray(CHUNK)
    view = memoryview(buffer)
    left = -1 if limit is None else limit + 1
    try:
        while left:
            count = response.readinto(view if left < 0 or left >= CHUNK else view[:left])
            if not count:
                _check_complete(response)
                break
            sink.write(view[:count])
            left -= count if left > 0 else 0
    except BaseException:
        sink.abort()
        raise
    return sink


def _check_complete(response: http.client.HTTPResponse) -> None:
    """A body that ended before its Content-Length is a failed transfer (http.client's
    bounded reads return what came, silently)."""
    if response.length:
        raise http.client.IncompleteRead(b"", response.length)


def _describe(exc: BaseException) -> str:
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return text[0].lower() + text[1:] if text else type(exc).__name__
