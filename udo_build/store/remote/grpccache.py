"""A client of the Remote Execution API's caches over gRPC (BuildGrid, buildbarn, bazel-remote,
NativeLink, hosted services): `grpc://HOST:PORT[/INSTANCE]`, or `grpcs://` for TLS.

The spaces of a transport (see `transport`) map to REAPI services:

    ac   ActionCache.GetActionResult / UpdateActionResult: the bytes are a serialized
         ActionResult (see `reapi`); the action is asked for under `reapi.action_digest(key)`
    cas  ContentAddressableStorage.FindMissingBlobs (`head`), BatchReadBlobs / BatchUpdateBlobs
         for blobs up to BATCH_LIMIT bytes, ByteStream.Read / Write for larger ones (resource
         names `{instance}/blobs/{hash}/{size}` and `{instance}/uploads/{uuid}/blobs/...`),
         streamed chunk by chunk into the reader's sink

REAPI names a blob by its hash and size: a read's `limit` is the blob's size (the remote tier
always knows it), and `head` without a size answers False without asking (the upload that
follows asks FindMissingBlobs itself, with the size it then knows). BATCH_LIMIT keeps a unary
call small enough to finish within the read timeout at the minimum rate (its bytes cannot be
counted while they move, unlike a stream's), far below any server's batch limit.

The instance name comes from the URL's path, else RemoteOptions.instance; RemoteOptions.headers
go with every call as metadata (names in lowercase, as gRPC wants them); grpcs:// uses
RemoteOptions.ca_bundle (else the system's CAs) and client_cert/client_key for mutual TLS.

Calls run through the `Breaker` (retries, deadlines, circuit breakers, budget): each call's gRPC
deadline is the transfer's, and the watchdog ends a stalled call through `transfer.cancel`.
Status codes: NOT_FOUND is a miss; UNAVAILABLE, DEADLINE_EXCEEDED, RESOURCE_EXHAUSTED, INTERNAL
(and CANCELLED, UNKNOWN, ABORTED, DATA_LOSS) are failed attempts, retried; the others
(PERMISSION_DENIED, UNAUTHENTICATED, INVALID_ARGUMENT, ...) are refusals. No generated stubs:
generic calls (`channel.unary_unary`, ...) on bytes: `reapi` writes the requests and reads the
answers by their wire format, so a build against a gRPC cache imports no protobuf. An answer
that does not parse fails its attempt (retried), as protobuf's parser would. Needs grpcio (the
`grpc` extra).
"""

from __future__ import annotations

import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from ... import __version__
from . import reapi as R
from .deadlines import Transfer
from .entries import ENTRY_PATH
from .transport import Breaker, Buffer, Failed, Refused, RemoteOptions, S, Stalled

BATCH_LIMIT = 128 << 10  # bytes: larger blobs go through ByteStream
CHUNK = 64 << 10  # bytes of each ByteStream write message
MAX_MESSAGE = 64 << 20  # bytes a server may send in one message (a ByteStream chunk)
FIND_BATCH = 1000  # digests in one FindMissingBlobs request (well under a message's limit)
GRACE = 1.0  # seconds a call's gRPC deadline exceeds the transfer's (the watchdog ends it first)
REAPI = "/build.bazel.remote.execution.v2."
FAILED = frozenset({"UNAVAILABLE", "DEADLINE_EXCEEDED", "RESOURCE_EXHAUSTED", "INTERNAL",
                    "CANCELLED", "UNKNOWN", "ABORTED", "DATA_LOSS"})
T = TypeVar("T")


_CODES: dict[int, str] = {}  # a status code's number -> its name (filled from grpc)


def import_grpc() -> Any:
    try:
        import grpc
    except ImportError:
        raise ValueError("a grpc:// remote cache needs grpcio: pip install 'udo-build[grpc]'"
                         ) from None
    _CODES.update((code.value[0], code.name) for code in grpc.StatusCode)
    return grpc


class Missing(Exception):
    """The server has no such entry or blob (NOT_FOUND)."""


class GrpcCache(Breaker):
    def __init__(self, url: str, options: RemoteOptions | None = None) -> None:
        parts = urllib.parse.urlsplit(url)
        if parts.scheme not in ("grpc", "grpcs") or not parts.hostname or (
                parts.scheme == "grpc" and parts.port is None):
            raise ValueError(f"a gRPC remote cache URL is grpc://HOST:PORT[/INSTANCE] or "
                             f"grpcs://HOST[:PORT][/INSTANCE], not {url!r}")
        self.grpc = import_grpc()
        super().__init__(url, options)
        self.instance = parts.path.strip("/") or self.options.instance
        self.prefix = f"{self.instance}/" if self.instance else ""
        self.metadata = tuple((k.lower(), v) for k, v in self.options.headers)
        host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname
        self.channel = self._channel(parts.scheme, f"{host}:{parts.port or 443}")
        self._ready = threading.Event()
        self.channel.subscribe(self._state, try_to_connect=False)
        self._methods: dict[str, Any] = {}

    def _channel(self, scheme: str, target: str) -> Any:
        options = [("grpc.primary_user_agent", f"udo-build/{__version__}"),
                   ("grpc.max_receive_message_length", MAX_MESSAGE)]
        if scheme == "grpc":
            return self.grpc.insecure_channel(target, options)
        o = self.options
        cert = _read(o.client_cert)
        credentials = self.grpc.ssl_channel_credentials(
            root_certificates=_read(o.ca_bundle), certificate_chain=cert,
            private_key=_read(o.client_key) if o.client_key else cert)
        return self.grpc.secure_channel(target, credentials, options)

    def _state(self, state: Any) -> None:
        if state == self.grpc.ChannelConnectivity.READY:
            self._ready.set()
        else:
            self._ready.clear()

    # -- the transport ----------------------------------------------------------------------------

    def get(self, space: str, name: str, *, limit: int | None = None) -> bytes | None:
        if space == "ac":
            request = R.get_action_result(self.instance, name, [ENTRY_PATH])
            data = self._unary("read", "ActionCache/GetActionResult", request, limit or 0)
            return None if data is None else bytes(data[:None if limit is None else limit + 1])
        size = _size(name, limit)
        if size > BATCH_LIMIT:
            sink = self.get_into(space, name, Buffer, limit=size)
            return None if sink is None else bytes(sink.data)
        request = R.batch_read_blobs(self.instance, [(name, size)])
        return self._unary("read", "ContentAddressableStorage/BatchReadBlobs", request, size,
                           check=lambda answer: _batch_answer(answer, name, read=True).data)

    def get_into(self, space: str, name: str, open_sink: Callable[[], S], *,
                 limit: int | None = None) -> S | None:
        if space != "cas":
            data = self.get(space, name, limit=limit)
            sink = open_sink() if data is not None else None
            if sink is not None:
                sink.write(memoryview(data))
            return sink
        size = _size(name, limit)
        resource = f"{self.prefix}blobs/{name}/{size}"

        def attempt(transfer: Transfer) -> S | None:
            return self._read_stream(resource, size, open_sink, transfer)

        return self._run("read", f"Read {resource}", size, attempt)

    def head(self, space: str, name: str, *, size: int | None = None) -> bool:
        """Whether the CAS has the blob; False without asking when its size is not given."""
        return space == "cas" and size is not None and not self._missing(name, size)

    def put(self, space: str, name: str, data: bytes) -> None:
        if space == "ac":
            request = R.update_action_result(self.instance, name, data)
            self._unary("write", "ActionCache/UpdateActionResult", request, len(data))
        elif len(data) <= BATCH_LIMIT:
            request = R.batch_update_blobs(self.instance, [(name, data)])
            self._unary("write", "ContentAddressableStorage/BatchUpdateBlobs", request,
                        len(data), check=lambda answer: _batch_answer(answer, name, read=False))
        elif self._missing(name, len(data)):
            import uuid  # only for uploads (a fresh checkout's reads need not import it)

            resource = f"{self.prefix}uploads/{uuid.uuid4()}/blobs/{name}/{len(data)}"
            self._run("write", f"Write {resource}", len(data),
                      lambda transfer: self._write_stream(resource, data, transfer))

    def close(self) -> None:
        self.channel.close()

    # -- calls ------------------------------------------------------------------------------------

    def _missing(self, digest: str, size: int) -> bool:
        return bool(self._find_missing("write", {digest: size}))

    def missing(self, blobs: dict[str, int]) -> set[str]:
        found: set[str] = set()
        items = sorted(blobs.items())
        for start in range(0, len(items), FIND_BATCH):
            found |= self._find_missing("read", dict(items[start:start + FIND_BATCH]))
        return found

    def _find_missing(self, side: str, blobs: dict[str, int]) -> set[str]:
        """FindMissingBlobs for these blobs (all of them when the server has no answer)."""
        request = R.find_missing_blobs(self.instance, blobs.items())
        answer = self._unary(side, "ContentAddressableStorage/FindMissingBlobs", request, 0,
                             check=R.missing_blobs)
        return set(blobs) if answer is None else answer

    def _unary(self, side: str, method: str, request: bytes, expected: int, *,
               check: Callable[[bytes], Any] | None = None) -> Any:
        """One unary call (None: NOT_FOUND): the answer's bytes, or what `check` makes of them
        (it raises what the attempt failed of)."""
        key = f"{REAPI}{method}"
        if key not in self._methods:
            self._methods[key] = self.channel.unary_unary(key)  # bytes in, bytes out
        call = self._methods[key]

        def attempt(transfer: Transfer) -> Any:
            transfer.moved(len(request))
            future = call.future(request, timeout=self._timeout(transfer),
                                 metadata=self.metadata)
            self._cancel_with(transfer, future.cancel)
            answer = future.result()
            transfer.connected = True
            return answer if check is None else check(answer)

        return self._run(side, method.rpartition("/")[2], expected, attempt)

    def _run(self, side: str, what: str, expected: int,
             attempt: Callable[[Transfer], T]) -> T | None:
        """Run an attempt through the breaker, its gRPC errors mapped (None: NOT_FOUND)."""
        def mapped(transfer: Transfer) -> T | None:
            try:
                return attempt(transfer)
            except Missing:
                return None
            except R.Malformed as exc:
                raise Failed(f"an answer that is not the REAPI message it should be ({exc})"
                             ) from None
            except (self.grpc.RpcError, self.grpc.FutureCancelledError) as exc:
                if transfer.reason is not None:
                    transfer.connected = transfer.connected or self._ready.is_set()
                    raise Stalled(transfer.reason) from None
                error = self._error(exc, transfer)
                if isinstance(error, Missing):
                    return None
                raise error from None

        return self.attempts(side, f"{what} ({self.url})", expected, mapped)

    def _error(self, exc: Exception, transfer: Transfer) -> Exception:
        code = exc.code() if isinstance(exc, self.grpc.RpcError) else None
        name = code.name if code is not None else "CANCELLED"
        if name == "NOT_FOUND":
            return Missing()
        details = (exc.details() or "") if isinstance(exc, self.grpc.RpcError) else ""
        transfer.connected = transfer.connected or name != "UNAVAILABLE" or self._ready.is_set()
        if name in FAILED:
            return Failed(f"{name}: {details}".rstrip(": "))
        return Refused(name, details)

    def _read_stream(self, resource: str, size: int, open_sink: Callable[[], S],
                     transfer: Transfer) -> S:
        method = self.channel.unary_stream("/google.bytestream.ByteStream/Read")
        call = method(R.read_request(resource), timeout=self._timeout(transfer),
                      metadata=self.metadata)
        self._cancel_with(transfer, call.cancel)
        sink: S | None = None
        try:
            for response in call:
                transfer.connected = True
                sink = sink if sink is not None else open_sink()
                data = R.read_data(response)
                transfer.moved(len(data))
                sink.write(memoryview(data))
                if transfer.total > size + 1:
                    call.cancel()
                    break
            return sink if sink is not None else open_sink()
        except BaseException:
            if sink is not None:
                sink.abort()
            raise

    def _write_stream(self, resource: str, data: bytes, transfer: Transfer) -> None:
        method = self.channel.stream_unary("/google.bytestream.ByteStream/Write")

        def requests() -> Iterator[bytes]:
            view = memoryview(data)
            for offset in range(0, len(view), CHUNK):
                piece = bytes(view[offset:offset + CHUNK])
                yield R.write_request(resource if not offset else "", offset, piece,
                                      offset + CHUNK >= len(view))
                transfer.moved(len(piece))

        future = method.future(requests(), timeout=self._timeout(transfer),
                               metadata=self.metadata)
        self._cancel_with(transfer, future.cancel)
        committed = R.committed_size(future.result())
        transfer.connected = True
        if committed not in (len(data), -1):
            raise Failed(f"the server committed {committed} of {len(data)} bytes")

    def _timeout(self, transfer: Transfer) -> float:
        return max(0.01, transfer.deadline - time.monotonic() + GRACE)

    @staticmethod
    def _cancel_with(transfer: Transfer, cancel: Callable[[], Any]) -> None:
        """Let the watchdog end the call; end it now if it was dropped before."""
        transfer.cancel = cancel
        if transfer.reason is not None:
            cancel()


def _batch_answer(answer: bytes, digest: str, *, read: bool) -> R.BlobAnswer:
    """The one answer of a batch call, its status raised as a call's would be."""
    answers = [a for a in R.batch_answers(answer, read=read) if a.hash == digest]
    if len(answers) != 1:
        raise Failed(f"a batch answer without blob {digest[:12]}")
    found = answers[0]
    name = _CODES.get(found.code, "UNKNOWN") if found.code else "OK"
    if name == "NOT_FOUND":
        raise Missing()
    if name in FAILED:
        raise Failed(f"{name}: {found.message}".rstrip(": "))
    if name != "OK":
        raise Refused(name, found.message)
    return found


def _size(name: str, limit: int | None) -> int:
    if limit is None:
        raise ValueError(f"REAPI names a blob by hash and size: the size of {name[:12]} is "
                         "needed to read it")
    return limit


def _read(path: str | None) -> bytes | None:
    return None if path is None else Path(path).read_bytes()
