"""What every remote cache transport shares: the interface the remote tier calls, the options,
the errors, and the breaker that retries, keeps deadlines and disables a failing remote.

A transport stores bytes under a name in one of two spaces, as the Bazel remote caches do:

    ac   an action key -> the action's entry (a REAPI ActionResult: see `reapi`)
    cas  a sha256 -> the blob with those bytes

The HTTP cache protocol (`httpcache`), REAPI over gRPC (`grpccache`) and S3-compatible buckets
(`s3cache`) are transports; `connect.open_transport` picks one by the URL's scheme.

Built for a build that must never wait long on a remote (the `Breaker`, which every transport
runs its requests through):

- a deadline for each request, whatever the server does (see `deadlines`): it must answer
  within the read timeout and then move its bytes at `min_rate` or faster; a server that
  trickles or hangs is dropped, and the whole request ends by connect + read timeout + its
  expected bytes at `min_rate`;
- a failed attempt (network error, a server error) is retried with a small exponential backoff
  (`retries` more times; 50 ms, 100 ms, ...); refusals (`Refused`) and dropped (stalled)
  attempts are not retried;
- circuit breakers: after `max_failures` failed attempts in a row the remote is disabled for
  the rest of the process, and every call raises `Unavailable` at once. Reads and writes (and
  the existence checks an upload asks first) fail separately: failing uploads do not stop
  reads. A server that cannot be connected to is unreachable for both;
- a budget: once the failed attempts of this process took `budget` seconds of wall time in all
  (overlapping ones counted once), the remote is disabled for both, and what is in flight is
  dropped. A remote that stalls costs a build at most about that long.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol, TypeVar

from .deadlines import Transfer, Watchdog

SIDES = ("read", "write")
T = TypeVar("T")


class Sink(Protocol):
    """Where a streamed body goes: `write` each chunk; `abort` when the attempt failed."""

    def write(self, chunk: memoryview) -> None: ...

    def abort(self) -> None: ...


S = TypeVar("S", bound=Sink)


class Buffer:
    """A sink that keeps the body in memory (small bodies: entries, small blobs)."""

    def __init__(self) -> None:
        self.data = bytearray()

    def write(self, chunk: memoryview) -> None:
        self.data += chunk

    def abort(self) -> None:
        self.data = bytearray()


@dataclass(frozen=True)
class RemoteOptions:
    """Timeouts, retries and limits of a remote cache's transport."""

    connect_timeout: float = 2.0
    read_timeout: float = 5.0
    retries: int = 2
    max_failures: int = 3  # failed attempts in a row that disable the remote
    backoff: float = 0.05  # seconds before the first retry; doubles each time
    min_rate: float = 32 * 1024  # bytes per second a transfer keeps up (or it is dropped)
    budget: float = 10.0  # seconds of failed requests in all before the remote is disabled
    headers: tuple[tuple[str, str], ...] = ()  # sent with every request (tokens, API keys)
    ca_bundle: str | None = None  # a PEM file of the CAs to trust (TLS)
    client_cert: str | None = None  # a PEM client certificate (mutual TLS) ...
    client_key: str | None = None  # ... and its key (None: it is in the certificate file)
    instance: str = ""  # REAPI instance name (gRPC)


class RemoteError(Exception):
    """A request failed (after its retries)."""


class Unavailable(RemoteError):
    """The remote is disabled for the rest of this process (the circuit breaker is open)."""


class Stalled(OSError):
    """The watchdog dropped the attempt: it missed its deadline or trickled."""


class Failed(Exception):
    """One attempt failed in a way worth retrying (a server error, an unavailable service)."""


class Refused(RemoteError):
    """The server refused the request (an HTTP 4xx other than 404 for a read, a gRPC
    permission or argument error): not retried."""

    def __init__(self, status: int | str, reason: str) -> None:
        super().__init__(f"HTTP {status} {reason}".strip() if isinstance(status, int)
                         else f"{status}: {reason}")
        self.status = status


class Transport(Protocol):
    """The interface of a remote cache the remote tier (`remote.Remote`) uses."""

    url: str
    options: RemoteOptions
    errors: int  # failed attempts in all
    why: dict[str, str]  # a disabled side -> "unreachable" | "failing" | "too slow"

    @property
    def disabled(self) -> str | None: ...

    def disabled_for(self, side: str) -> str | None: ...

    def get(self, space: str, name: str, *, limit: int | None = None) -> bytes | None:
        """The bytes under `name` in `space`, None when the remote has none; at most
        `limit` + 1 bytes are read."""

    def get_into(self, space: str, name: str, open_sink: Callable[[], S], *,
                 limit: int | None = None) -> S | None:
        """Stream the bytes under `name` into a sink that `open_sink` makes for each attempt
        (the sink of a failed attempt is aborted); that sink, or None when there are none."""

    def head(self, space: str, name: str) -> bool:
        """Whether the remote has `name` in `space` (asked before an upload: a write)."""

    def missing(self, blobs: dict[str, int]) -> set[str]:
        """The digests of these CAS blobs (digest -> size) the remote lacks: one batched
        question where the protocol has one (FindMissingBlobs), else a HEAD each (a read:
        `--download minimal` proves a build's blobs exist without reading them)."""

    def put(self, space: str, name: str, data: bytes) -> None: ...

    def drop_in_flight(self, reason: str) -> None: ...

    def close(self) -> None: ...


class Breaker:
    """Runs a transport's requests: the deadlines, retries, breakers and budget above."""

    TRANSIENT: tuple[type[BaseException], ...] = (OSError, Failed)  # what an attempt may raise

    def __init__(self, url: str, options: RemoteOptions | None) -> None:
        self.url = url
        self.options = options or RemoteOptions()
        self.failures = {"link": 0, "read": 0, "write": 0}  # failed attempts in a row
        self.broken: dict[str, str] = {}  # side ("read", "write") -> why it is disabled
        self.why: dict[str, str] = {}  # side -> "unreachable" | "failing" | "too slow"
        self.errors = 0  # failed attempts in all
        self.lost = 0.0  # seconds of wall time the failed attempts took (see the budget)
        self._lost_until = 0.0
        self._lock = threading.Lock()
        self._watchdog = Watchdog()

    @property
    def disabled(self) -> str | None:
        """Why reads are disabled (None: they are not)."""
        return self.broken.get("read")

    def disabled_for(self, side: str) -> str | None:
        return self.broken.get(side)

    def drop_in_flight(self, reason: str) -> None:
        """Drop every request in flight (the build is over, or gave up on the remote)."""
        self._watchdog.drop_all(None, reason)

    def attempts(self, side: str, what: str, expected: int,
                 attempt: Callable[[Transfer], T]) -> T:
        """Run `attempt` (one try of a request moving about `expected` bytes) until it
        succeeds, with the retries, deadlines and breakers; RemoteError when it cannot."""
        last = ""
        for number in range(self.options.retries + 1):
            if side in self.broken:
                raise Unavailable(self.broken[side])
            if number:
                time.sleep(self.options.backoff * 2 ** (number - 1))
            transfer = self._transfer(side, expected)
            stalled = False
            try:
                value = attempt(transfer)
            except Refused:
                self._succeeded(side)  # the server answered
                raise
            except self.TRANSIENT as exc:
                stalled = transfer.connected and isinstance(exc, (Stalled, TimeoutError))
                last = transfer.reason or (
                    f"stalled: no answer in {self.options.read_timeout:g} s"
                    if stalled else describe(exc))
            else:
                self._succeeded(side)
                return value
            finally:
                self._watchdog.forget(transfer)
            self._failed(transfer, f"{what}: {last}")
            if stalled:
                break  # a server that stalled (or did not answer in time) does again: no retry
        raise RemoteError(f"{what}: {last}")

    def _transfer(self, side: str, expected: int) -> Transfer:
        o = self.options
        deadline = time.monotonic() + o.connect_timeout + o.read_timeout + expected / o.min_rate
        transfer = Transfer(side, deadline, o.min_rate, o.read_timeout)
        self._watchdog.watch(transfer)
        return transfer

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


def describe(exc: BaseException) -> str:
    """A failed attempt's error, as a phrase."""
    if isinstance(exc, TimeoutError):
        return "timed out"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, Failed):
        return str(exc)  # the transport's own words ("HTTP 503", "UNAVAILABLE: ...")
    text = getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
    return text[0].lower() + text[1:] if text else type(exc).__name__


def parse_headers(lines: list[str] | tuple[str, ...], where: str) -> tuple[tuple[str, str], ...]:
    """`Name: value` lines (the [remote] headers setting) as pairs; ValueError naming `where`."""
    pairs = []
    for line in lines:
        name, sep, value = line.partition(":")
        if not sep or not name.strip() or any(c in name for c in " \t\r\n") \
                or any(c in value for c in "\r\n"):
            raise ValueError(f"{where}: a header is 'Name: value', not {line!r}")
        pairs.append((name.strip(), value.strip()))
    return tuple(pairs)
