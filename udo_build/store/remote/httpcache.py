"""A client of the Bazel HTTP remote-cache protocol: GET, HEAD and PUT of `/cas/<sha256>` and
`/ac/<key>` under a base URL (nginx WebDAV, bazel-remote, any server that stores what is PUT).

Requests run through the transports' shared `Breaker` (see `transport`): short timeouts (one
to connect, one for each read: 2 s and 5 s by default), a deadline and minimum rate for each
request, retries of network errors and HTTP 5xx answers, circuit breakers (GET reads; PUT, and
the HEAD an upload asks first, write) and a budget. HTTP 4xx answers (but a read's 404) are
refusals, not retried.

Large bodies are streamed (`get_into`): each chunk goes to a sink as it arrives (a blob
writer hashes and stores it), so a download is never held in memory whole. A body longer than
the reader's limit is cut there (its sink then fails its own check); one shorter than its
Content-Length is a failed attempt.

Connections are the standard library's `http.client` ones (see `httpclient`: a pool shared by
the threads, proxies, .netrc, headers, TLS); a TLS error is phrased with what to do about it.
"""

from __future__ import annotations

import http.client
import os
import urllib.parse
from collections.abc import Callable, Mapping
from typing import Any

from ... import __version__
from . import httpclient
from .deadlines import Transfer
from .transport import Breaker, Buffer, Failed, Refused, RemoteOptions, S, Sink, Stalled

OK_PUT = (200, 201, 204)
STALE = (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError)
CHUNK = httpclient.CHUNK  # bytes sent or read at a time


class HttpCache(Breaker):
    TRANSIENT = (OSError, http.client.HTTPException, Failed)

    def __init__(self, url: str, options: RemoteOptions | None = None,
                 env: Mapping[str, str] | None = None) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"a remote cache URL is http://HOST[:PORT][/PATH] or https://..., "
                             f"not {url!r}")
        self.base = parts.path.rstrip("/")
        netloc = parts.netloc.rpartition("@")[2]
        super().__init__(urllib.parse.urlunsplit((parts.scheme, netloc, self.base, "", "")),
                         options)
        env = os.environ if env is None else env
        self.headers = {"User-Agent": f"udo-build/{__version__}", **dict(self.options.headers)}
        auth = next((k for k in self.headers if k.lower() == "authorization"), None)
        if parts.username is not None:
            self.headers.pop(auth or "", None)
            self.headers["Authorization"] = httpclient.basic(parts.username, parts.password)
        elif auth is None:
            found = httpclient.netrc_auth(parts.hostname, env)
            if found is not None:
                self.headers["Authorization"] = found
        self.pool = httpclient.Pool(url, self.options, env)

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

    def missing(self, blobs: dict[str, int]) -> set[str]:
        return {digest for digest in blobs
                if self._request("HEAD", "cas", digest, side="read")[0] != 200}

    def put(self, space: str, name: str, data: bytes) -> None:
        self._request("PUT", space, name, data)

    def close(self) -> None:
        self.pool.clear()

    def _request(self, method: str, space: str, name: str, body: bytes | None = None, *,
                 limit: int | None = None, open_sink: Callable[[], Sink] | None = None,
                 side: str | None = None) -> tuple[int, Any]:
        path = f"{self.base}/{space}/{name}"
        # a HEAD asks before an upload (a write), unless `side` says it proves a read
        side = side or ("read" if method == "GET" else "write")

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
        """One try; a kept-alive connection the server closed meanwhile is tried again once
        on a new one, for free."""
        for again in (True, False):
            httpclient.watching(transfer)
            try:
                conn, response = self._send(method, path, body, transfer)
            except BaseException as exc:
                error = self._plain(exc, transfer)
                if again and httpclient.reused() and isinstance(error, STALE) \
                        and transfer.reason is None:
                    transfer.connected = False
                    continue
                _reraise(error, exc)
            finally:
                httpclient.watching(None)
            # the watchdog now ends the read through the socket the connection opened (a
            # connection the server closes has let go of it, the answer reads on)
            transfer.conn, transfer.cancel = None, conn.shutdown
            try:
                return response.status, self._receive(method, conn, response, limit, open_sink,
                                                      transfer)
            except BaseException as exc:
                conn.close()
                _reraise(self._plain(exc, transfer), exc)
        raise AssertionError("unreachable")

    def _send(self, method: str, path: str, body: bytes | None, transfer: Transfer
              ) -> tuple[httpclient.Connection, http.client.HTTPResponse]:
        """Send the request (a body in pieces, each counted) and read the answer's head."""
        headers = self.headers
        if body is not None:
            headers = {**headers, "Content-Type": "application/octet-stream",
                       "Content-Length": str(len(body))}
        return self.pool.request(method, path, headers, body, transfer.moved)

    def _receive(self, method: str, conn: httpclient.Connection,
                 response: http.client.HTTPResponse, limit: int | None,
                 open_sink: Callable[[], Sink] | None, transfer: Transfer) -> Any:
        """The answer's body (bytes, the sink, or None for a HEAD); the connection goes back
        to the pool when the body was read whole, else it is closed."""
        data: Any = None
        if method == "HEAD":
            response.read()
        elif open_sink is not None and response.status == 200:
            data = _stream(response, open_sink(), limit, transfer)
        else:
            data = bytes(_stream(response, Buffer(), limit, transfer).data)
        transfer.finish()  # the watchdog leaves the socket alone from here: it may be reused
        if transfer.reason is not None:  # dropped as it ended: its bytes may be cut
            raise Stalled(transfer.reason)
        if response.isclosed():
            self.pool.give(conn)
        else:  # cut at the limit
            conn.close()
        return data

    def _plain(self, exc: BaseException, transfer: Transfer) -> BaseException:
        """An attempt's error as the plain one the breaker knows: Stalled when the watchdog
        dropped it, a TLS error saying what to do."""
        if transfer.reason is not None and isinstance(exc, (OSError,
                                                            http.client.HTTPException)):
            return Stalled(transfer.reason)
        return httpclient.tls_error(exc) if self.pool.tls is not None else exc


def _reraise(error: BaseException, exc: BaseException) -> None:
    if error is exc:
        raise exc
    raise error from exc


def _stream(response: http.client.HTTPResponse, sink: S, limit: int | None,
            transfer: Transfer) -> S:
    """Read the body into `sink` as it comes (each piece counted for the watchdog); at most
    `limit` + 1 bytes. A body that ends before its Content-Length (or its last chunk) is a
    ConnectionError."""
    left = -1 if limit is None else limit + 1
    try:
        while left:
            chunk = response.read1(CHUNK if left < 0 else min(left, CHUNK))
            if not chunk:
                break
            transfer.moved(len(chunk))
            sink.write(memoryview(chunk))
            left -= len(chunk) if left > 0 else 0
        if left:  # the body ended (else it was cut at the limit: its connection is closed)
            if response.length:
                raise ConnectionError(f"the server closed the connection {response.length} "
                                      "bytes short of the answer's Content-Length")
            response.read()  # nothing left: read1 leaves the answer open, this ends it
    except http.client.IncompleteRead:  # a chunked answer cut short
        sink.abort()
        raise ConnectionError("the server closed the connection before the answer's last "
                              "chunk") from None
    except BaseException:
        sink.abort()
        raise
    return sink
