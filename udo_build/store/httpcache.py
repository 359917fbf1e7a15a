"""A client of the Bazel HTTP remote-cache protocol: GET, HEAD and PUT of `/cas/<sha256>` and
`/ac/<key>` under a base URL (nginx WebDAV, bazel-remote, any server that stores what is PUT).

Built for a build that must never wait long on it:

- short timeouts: one to connect, one for each read (2 s and 5 s by default);
- a deadline for each request, whatever the server does (see `deadlines`): it must answer
  within the read timeout and then move its bytes at `min_rate` or faster; a server that
  trickles or hangs is dropped, and the whole request ends by connect + read timeout + its
  expected bytes at `min_rate`;
- a failed attempt (network error, HTTP 5xx) is retried with a small exponential backoff
  (`retries` more times; 50 ms, 100 ms, ...); HTTP 4xx answers and dropped (stalled) attempts
  are not retried;
- circuit breakers: after `max_failures` failed attempts in a row the remote is disabled for
  the rest of the process, and every call raises `Unavailable` at once. Reads (GET) and writes
  (PUT, and the HEAD an upload asks first) fail separately: failing uploads do not stop reads.
  A server that cannot be connected to is unreachable for both;
- a budget: once the failed attempts of this process took `budget` seconds of wall time in all
  (overlapping ones counted once), the remote is disabled for both, and what is in flight is
  dropped. A remote that stalls costs a build at most about that long.

`disabled_for(side)` says why a side is disabled (None: it is not); `disabled` is the reads'.

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
from .deadlines import Transfer, Watchdog

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
    min_rate: float = 32 * 1024  # bytes per second a transfer keeps up (or it is dropped)
    budget: float = 10.0  # seconds of failed requests in all before the remote is disabled


SIDES = ("read", "write")


class RemoteError(Exception):
    """A request failed (after its retries)."""


class Unavailable(RemoteError):
    """The remote is disabled for the rest of this process (the circuit breaker is open)."""


class Stalled(OSError):
    """The watchdog dropped the attempt: it missed its deadline or trickled."""


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
        self.failures = {"link": 0, "read": 0, "write": 0}  # failed attempts in a row
        self.broken: dict[str, str] = {}  # side ("read", "write") -> why it is disabled
        self.why: dict[str, str] = {}  # side -> "unreachable" | "failing" | "too slow"
        self.errors = 0  # failed attempts in all
        self.lost = 0.0  # seconds of wall time the failed attempts took (see the budget)
        self._lost_until = 0.0
        self._lock = threading.Lock()
        self._local = threading.local()
        self._watchdog = Watchdog()

    @property
    def disabled(self) -> str | None:
        """Why reads are disabled (None: they are not)."""
        return self.broken.get("read")

    def disabled_for(self, side: str) -> str | None:
        return self.broken.get(side)

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

    def drop_in_flight(self, reason: str) -> None:
        """Drop every request in flight (the build is over, or gave up on the remote)."""
        self._watchdog.drop_all(None, reason)

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
        side = "read" if method == "GET" else "write"  # a HEAD asks before an upload
        last = ""
        for attempt in range(self.options.retries + 1):
            if side in self.broken:
                raise Unavailable(self.broken[side])
            if attempt:
                time.sleep(self.options.backoff * 2 ** (attempt - 1))
            transfer = self._transfer(side, len(body) if body is not None else limit or 0)
            stalled = False
            try:
                status, data = self._attempt(method, path, body, limit, open_sink, transfer)
            except (OSError, http.client.HTTPException) as exc:
                stalled = transfer.connected and isinstance(exc, (Stalled, TimeoutError))
                last = transfer.reason or (
                    f"stalled: no answer in {self.options.read_timeout:g} s"
                    if stalled else _describe(exc))
            else:
                if status < 500:
                    self._succeeded(side)
                    return self._check(method, status, data)
                last = f"HTTP {status}"
            finally:
                self._watchdog.forget(transfer)
            self._failed(transfer, f"{method} {path}: {last}")
            if stalled:
                break  # a server that stalled (or did not answer in time) does again: no retry
        raise RemoteError(f"{method} {path}: {last}")

    def _transfer(self, side: str, expected: int) -> Transfer:
        o = self.options
        deadline = time.monotonic() + o.connect_timeout + o.read_timeout + expected / o.min_rate
        transfer = Transfer(side, deadline, o.min_rate, o.read_timeout)
        self._watchdog.watch(transfer)
        return transfer

    def _check(self, method: str, status: int, data: Any) -> tuple[int, Any]:
        if status in (OK_PUT if method == "PUT" else (200, 404)):
            return status, data
        reason = http.client.responses.get(status, "")
        raise Refused(status, reason)

    def _succeeded(self, side: str) -> None:
        with self._lock:
            self.failures["link"] = self.failures[side] = 0

    def _failed(self, transfer: Transfer, error: str) -> None:
        """Count a failed attempt against its breaker (the link's when it could not connect)
        and the budget; open what it trips."""
        now = time.monotonic()
        limit = self.options.max_failures
        with self._lock:
            self.errors += 1
            self.lost += max(0.0, now - max(transfer.started, self._lost_until))
            self._lost_until = max(self._lost_until, now)
            which = transfer.side if transfer.connected else "link"
            self.failures[which] += 1
            if self.lost >= self.options.budget:
                self._open(SIDES, "too slow", f"{self.url}: {error}; failed requests took "
                           f"{self.lost:.1f} s, over the budget of {self.options.budget:g} s")
            elif self.failures[which] >= limit:
                self._open(SIDES if which == "link" else (which,),
                           "unreachable" if which == "link" else "failing",
                           f"{self.url}: {error}; {self.failures[which]} failures in a row")

    def _open(self, sides: tuple[str, ...], why: str, detail: str) -> None:
        """Disable `sides` (under the lock) and drop what they have in flight."""
        for side in sides:
            if side not in self.broken:
                self.broken[side] = detail
                self.why[side] = why
                self._watchdog.drop_all(side, f"the remote is disabled ({why})")

    # -- one attempt ------------------------------------------------------------------------------

    def _attempt(self, method: str, path: str, body: bytes | None, limit: int | None,
                 open_sink: Callable[[], Sink] | None, transfer: Transfer) -> tuple[int, Any]:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            transfer.conn, transfer.connected = conn, True
            try:
                return self._exchange(conn, method, path, body, limit, open_sink, transfer)
            except STALE:
                pass  # the server closed the idle keep-alive connection: reconnect once, free
            except BaseException:
                self.close()
                raise
            self.close()
        transfer.connected = False
        try:
            conn = self._connect(transfer)
            return self._exchange(conn, method, path, body, limit, open_sink, transfer)
        except BaseException:
            self.close()
            raise

    def _connect(self, transfer: Transfer) -> http.client.HTTPConnection:
        cls = http.client.HTTPSConnection if self.https else http.client.HTTPConnection
        conn = cls(self.host, self.port, timeout=self.options.connect_timeout)
        self._local.conn = conn
        conn.connect()
        transfer.conn, transfer.connected = conn, True
        assert conn.sock is not None
        conn.sock.settimeout(self.options.read_timeout)
        return conn

    def _exchange(self, conn: http.client.HTTPConnection, method: str, path: str,
                  body: bytes | None, limit: int | None, open_sink: Callable[[], Sink] | None,
                  transfer: Transfer) -> tuple[int, Any]:
        try:
            response = self._send(conn, method, path, body, transfer)
            data: Any = None
            if method == "HEAD":
                response.read()
            elif open_sink is not None and response.status == 200:
                data = _stream(response, open_sink(), limit, transfer)
            else:
                data = bytes(_stream(response, Buffer(), limit, transfer).data)
        except (OSError, http.client.HTTPException) as exc:
            if transfer.reason is not None:
                raise Stalled(transfer.reason) from exc
            raise
        if transfer.reason is not None:  # dropped as it ended: its bytes may be cut
            raise Stalled(transfer.reason)
        if response.will_close or not response.isclosed():  # closed, or cut at the limit
            self.close()
        return response.status, data

    def _send(self, conn: http.client.HTTPConnection, method: str, path: str,
              body: bytes | None, transfer: Transfer) -> http.client.HTTPResponse:
        """Send the request (a body in pieces, each counted) and read the answer's head."""
        conn.putrequest(method, path)
        for name, value in self.headers.items():
            conn.putheader(name, value)
        if body is not None:
            conn.putheader("Content-Type", "application/octet-stream")
            conn.putheader("Content-Length", str(len(body)))
        conn.endheaders()
        view = memoryview(body or b"")
        for start in range(0, len(view), CHUNK):
            piece = view[start:start + CHUNK]
            conn.send(piece)
            transfer.moved(len(piece))
        return conn.getresponse()


class Buffer:
    """A sink that keeps the body in memory (small bodies: entries, small blobs)."""

    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, chunk: memoryview) -> None:
        self.data += chunk

    def abort(self) -> None:
        self.data = bytearray()


def _stream(response: http.client.HTTPResponse, sink: S, limit: int | None,
            transfer: Transfer) -> S:
    """Read the body into `sink` as it comes (each piece counted for the watchdog); at most
    `limit` + 1 bytes."""
    left = -1 if limit is None else limit + 1
    try:
        while left:
            chunk = response.read1(CHUNK if left < 0 else min(left, CHUNK))
            if not chunk:
                _check_complete(response)
                break
            transfer.moved(len(chunk))
            sink.write(memoryview(chunk))
            left -= len(chunk) if left > 0 else 0
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
