"""A client of the Bazel HTTP remote-cache protocol: GET, HEAD and PUT of `/cas/<sha256>` and
`/ac/<key>` under a base URL (nginx WebDAV, bazel-remote, any server that stores what is PUT).

Requests run through the transports' shared `Breaker` (see `transport`): short timeouts (one
to connect, one for each read: 2 s and 5 s by default), a deadline and minimum rate for each
request, retries of network errors and HTTP 5xx answers, circuit breakers (GET reads; PUT, and
the HEAD an upload asks first, write) and a budget. HTTP 4xx answers (but a read's 404) are
refusals, not retried.

Large bodies are streamed (`get_into`): each chunk goes to a sink as it arrives (a blob
writer hashes and stores it), so a download is never held in memory whole. A body longer than
the reader's limit is cut there (its sink then fails its own check).

One keep-alive connection per thread. Only the standard library (`http.client`).
"""

from __future__ import annotations

import base64
import http.client
import threading
import urllib.parse
from collections.abc import Callable
from typing import Any

from .. import __version__
from .deadlines import Transfer
from .transport import Breaker, Buffer, Failed, Refused, RemoteOptions, S, Sink, Stalled

OK_PUT = (200, 201, 204)
STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)
CHUNK = 256 << 10  # bytes read at a time from a streamed body


class HttpCache(Breaker):
    TRANSIENT = (OSError, http.client.HTTPException, Failed)

    def __init__(self, url: str, options: RemoteOptions | None = None) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"a remote cache URL is http://HOST[:PORT][/PATH] or https://..., "
                             f"not {url!r}")
        self.https = parts.scheme == "https"
        self.host = parts.hostname
        self.port = parts.port
        self.base = parts.path.rstrip("/")
        super().__init__(urllib.parse.urlunsplit((parts.scheme, parts.netloc.rpartition("@")[2],
                                                  self.base, "", "")), options)
        self.headers = {"User-Agent": f"udo-build/{__version__}", **dict(self.options.headers)}
        if parts.username is not None:
            secret = f"{urllib.parse.unquote(parts.username)}:" \
                     f"{urllib.parse.unquote(parts.password or '')}"
            self.headers["Authorization"] = "Basic " + base64.b64encode(secret.encode()).decode()
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

    def _request(self, method: str, space: str, name: str, body: bytes | None = None, *,
                 limit: int | None = None, open_sink: Callable[[], Sink] | None = None
                 ) -> tuple[int, Any]:
        path = f"{self.base}/{space}/{name}"
        side = "read" if method == "GET" else "write"  # a HEAD asks before an upload

        def attempt(transfer: Transfer) -> tuple[int, Any]:
            status, data = self._attempt(method, path, body, limit, open_sink, transfer)
            if status >= 500:
                raise Failed(f"HTTP {status}")
            if status in (OK_PUT if method == "PUT" else (200, 404)):
                return status, data
            raise Refused(status, http.client.responses.get(status, ""))

        expected = len(body) if body is not None else limit or 0
        return self.attempts(side, f"{method} {path}", expected, attempt)

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
