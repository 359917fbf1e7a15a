"""The remote tier of a store: shared action results in a remote cache, through a transport
(the Bazel HTTP cache protocol, REAPI over gRPC, S3: see `transport`). In the HTTP protocol's
terms:

    {URL}/ac/<action key>   a REAPI ActionResult (see `reapi`) whose output file
                            "udo-build-entry.json" names the signed envelope around the
                            action's result (see `trust`), stored as a blob; the action's
                            outputs follow as "udo-build-outputs/<name>"
    {URL}/cas/<sha256>      a blob: its raw, uncompressed bytes, named by their sha256

So a server that validates action-cache entries as ActionResults, and checks that the blobs
they name are in its CAS (bazel-remote, BuildGrid), accepts ours. The envelope is the truth:
signature and trust rules are those of `trust`; the output list is a hint for servers.

Reading (`fetch_async`, in background threads): the entry must parse as an ActionResult (else
it is refused as malformed: among them the JSON entries of udo-build before REAPI entries,
which are a miss until a build uploads the action again), its envelope blob must hold the bytes
its digest says, and the envelope must be signed by a trusted key and made for the key it is
filed under; its verified result is handed to the build at once (what
depends on it can be looked up meanwhile), and every output blob (for a tree: its manifest and
every file) that the local store lacks is downloaded, its sha256 checked, and stored locally
(a blob of STREAM_FROM bytes or more is hashed and written as it arrives, never held in memory
whole); only when all are there is the entry written to the local action cache. A blob whose
bytes do not match its name is refused and never stored; an entry whose blobs the remote lacks
is a miss. A result found through an index key (see `upload`) has its blobs downloaded at once,
before the build knows whether it is the result of the key it computes (`_fetch_ahead`): blobs
are verified by their names, the entry waits for that key.

What a hit downloads is the build's `--download` (`fetch_async`): every blob ("all"), only the
blobs its output folder gets ("outputs": the others stay in the remote, proven there), or none
("minimal": every blob is proven to be in the remote, through `Transport.missing`: HEADs, or
one FindMissingBlobs over gRPC; an entry whose blobs are not all there is a miss). A blob left
in the remote is downloaded when an action that runs reads it (`fetch_outputs`).

Writing (`publish`, in background threads; `upload` waits): the output blobs first, then the
envelope blob, the entry last, and the entry only when every blob is up. So a reader never sees
an entry whose upload did not finish, and a validating server never sees an entry naming a
blob it lacks. Blobs the remote has are not sent again (asked first, for blobs over 64 KiB).

Faults never fail a build: a failed request is a miss (or a skipped upload), the client retries,
drops a server that stalls or trickles, and opens its circuit breakers (reads and uploads apart;
both when the server is unreachable or took the build's budget: see `transport`); each kind of
trouble is told once through `warn`, saying what failed; the counters say how often.

Blobs go up raw: bazel-remote checks that a /cas/ body hashes to its name, nginx stores what it
gets, and a reader verifies the bytes it downloads without decompressing first.
"""

from __future__ import annotations

import concurrent.futures as cf
import threading
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any

from ...errors import Problem
from .. import Fetched, Linked
from ..ac import ActionCache, ActionResult, Output
from ..cas import Cas, sha256_bytes
from ..counters import Counters
from .entries import Pointer, entry_bytes, entry_envelope
from .pools import Pool, then
from .transport import Refused, RemoteError, Transport, Unavailable
from .trust import CORRUPT_BLOB, MALFORMED, PublicKey, SigningKey, open_entry, sign_entry

DOWNLOADS = ("all", "outputs", "minimal")  # what a build downloads: see `fetch_async`
HEAD_FIRST = 64 * 1024  # bytes: smaller blobs are PUT without asking whether they are there
STREAM_FROM = 1 << 20  # bytes: larger blobs are stored as they download
ENTRY_LIMIT = 4 << 20  # bytes: a longer action-cache entry (or envelope) is refused
# threads of each pool: a fresh checkout looks its whole plan up at once (builder.lookahead),
# one round of lookups up to 24 actions (8 took three rounds of 24: the deepest action, the
# deployable bundle with the most bytes, was answered last)
THREADS = {"lookups": 24, "downloads": 8, "files": 16, "uploads": 4}
# blob downloads on the wire at once; a downloaded blob's fsync (and rename) is made outside
# these slots: a thread that waited for the disk held one (small blobs: 80-90 ms each while
# others were synced at once, at a load of 3), and the connection stayed idle meanwhile
TRANSFERS = 8


@dataclass(frozen=True)
class Blob:
    """A blob to download: its digest, size when known, and whether it is stored raw."""

    digest: str
    size: int | None  # None: not known before it is read
    raw: bool = False  # stored uncompressed (see `download`)


class Remote:
    def __init__(self, cas: Cas, ac: ActionCache, transport: Transport,
                 trusted: dict[bytes, PublicKey], counters: Counters, *,
                 signing_key: SigningKey | None = None,
                 warn: Callable[[Problem], None] | None = None) -> None:
        self.cas = cas
        self.ac = ac
        self.transport = transport
        self.trusted = dict(trusted)
        self.counters = counters
        self.signing_key = signing_key
        self.public = signing_key.public() if signing_key is not None else None
        if self.public is not None:
            self.trusted.setdefault(self.public.raw, self.public)  # a writer reads its own
        self.warn = warn or (lambda problem: None)
        self.warnings: list[str] = []
        self._told: set[str] = set()
        self._lock = threading.Lock()
        self._transfers = threading.BoundedSemaphore(TRANSFERS)  # see TRANSFERS
        self._sent: set[str] = set()  # digests known to be on the remote
        self._sending: dict[str, threading.Event] = {}  # digests being uploaded -> when done
        self._bad: set[str] = set()  # digests whose remote bytes were corrupt
        self._fetching: dict[str, threading.Event] = {}  # digests being downloaded -> done
        # action key -> the linked names and blob future of a result fetched ahead (`_lookup`)
        self._ahead: dict[str, tuple[frozenset[str] | None, cf.Future[bool | None]]] = {}
        self._lookups: Pool | None = None
        self._downloads: Pool | None = None  # one job per action, the largest first
        self._files: Pool | None = None  # one job per blob of a job above
        self._uploads: Pool | None = None
        self._pending: list[cf.Future[bool]] = []
        self.unpublished: set[str] = set()  # keys of results `publish` could not upload
        self.uploading = signing_key is not None

    @property
    def url(self) -> str:
        return self.transport.url

    @property
    def refused(self) -> bool:
        """Whether the server refused a read or an upload (credentials, permissions)."""
        return bool(self._told & {"refused read", "refused upload"})

    # -- reading ----------------------------------------------------------------------------------

    def fetch_async(self, key: str, *, store: bool = True, linked: Linked | None = None,
                    download: str = "all", index: bool = False,
                    found: ActionResult | None = None) -> cf.Future[Fetched | None] | None:
        """Look `key` up in a background thread. The future gives None on a miss, else the
        verified result at once (so that the build can go on to what depends on it) with a
        future of its blobs: True once the blobs `download` asks for are stored locally (for
        "all": every blob, then the entry); False when they could not be had (then no entry
        is written). `linked` names the outputs of a result that go to an output folder (see
        `download`). `download` (see DOWNLOADS): "all" stores every blob and the entry;
        "outputs" only the linked outputs' blobs (the entry too when the store then has every
        blob), the others proven to be in the remote; "minimal" none: every blob is proven to
        be in the remote (`prove`), else it is a miss, and there is no blob future. With
        `store=False` (a dry run) nothing is stored and there is no blob future: the entry is
        read and verified, and with "minimal" its blobs proven. None when the remote is
        disabled.

        With `index`, `key` is an index key (see `upload`): the entry filed there is read and
        verified as any, but it may be made for any action key (`result.key`), which the
        caller compares with the key it computes; the future gives the result without blobs
        (they start downloading as `download` says, unless "minimal": `_fetch_ahead`), and
        nothing is counted or told: the caller then asks for the action key, with `found=` the
        result when it was made for that key (its entry is not read again, its blobs are those
        on their way, and the hit or miss is counted; no request is left to make, so the future
        is given done, without a thread: a chain of levels resolves in the build's thread)."""
        if not self.trusted or self.transport.disabled is not None:
            return None
        args = (key, store, linked, download, index, found)
        if found is not None and found.key == key and store and download != "minimal":
            done: cf.Future[Fetched | None] = cf.Future()  # no request to wait for: here
            done.set_result(self._guarded(self._lookup, *args))
            return done
        return self._pool("lookups").submit(self._guarded, self._lookup, *args)

    def fetch(self, key: str, *, store: bool = True) -> ActionResult | None:
        """`fetch_async`, waited for: the result once it is stored locally (or only verified)."""
        got = self._guarded(self._lookup, key, store, None, "all", False, None)
        if got is None:
            return None
        result, blobs = got
        return result if blobs is None or blobs.result() else None

    def _lookup(self, key: str, store: bool, linked: Linked | None, download: str,
                index: bool, found: ActionResult | None) -> Fetched | None:
        result = found if found is not None and found.key == key else self.entry(key,
                                                                                  index=index)
        if result is None:
            return None
        names = None if linked is None or download == "minimal" else frozenset(linked(result))
        if index:
            if store and download != "minimal":
                self._fetch_ahead(result, names, download == "outputs")
            return result, None
        if download == "minimal" and not self.prove(result.outputs.values()):
            self.counters.add(remote_misses=1)
            return None
        if not store or download == "minimal":
            self.counters.add(remote_hits=1)
            return result, None
        with self._lock:
            ahead = self._ahead.get(result.key)
        if ahead is not None and ahead[0] == names:  # its blobs are on their way already
            return result, then(ahead[1], lambda ok: self._guarded(
                self._entry_stored, result, names, download == "outputs", bool(ok)))
        size = sum(o.size for o in result.outputs.values())
        return result, self._pool("downloads").submit(
            self._guarded, self.download, result, names, download == "outputs", size=size)

    def _fetch_ahead(self, result: ActionResult, names: frozenset[str] | None,
                     only_linked: bool) -> None:
        """Start downloading the blobs of a result found through an index key (signed by a
        trusted key, for its own action key) before the build knows whether that key is the
        one it computes: the blobs are named by their digests and verified as any, so nothing
        unverified is stored, and no entry is written here (the lookup by the action key that
        follows writes it, once these are done: `_lookup`). A fresh checkout then downloads
        every level's blobs at once, not each level's once the level above is resolved. Were
        the key not the build's (an upstream action that gave other bytes), those blobs are
        downloaded for nothing: a cost, never a wrong result."""
        with self._lock:
            if result.key in self._ahead:
                return
            size = sum(o.size for o in result.outputs.values())
            future = self._pool("downloads", locked=True).submit(
                self._guarded, self._blobs, result, names, only_linked, size=size)
            self._ahead[result.key] = (names, future)

    def entry(self, key: str, *, index: bool = False) -> ActionResult | None:
        """The remote's entry for `key` if it is signed by a trusted key and made for `key`
        (None: no entry, a refused one, or the remote failed; counted as a miss). With
        `index`: filed under the index key `key`, made for any action key (see `fetch_async`);
        nothing is counted or told (the lookup by the action key that follows does that)."""
        envelope = self._envelope(key, index)
        if envelope is None:
            self.counters.add(remote_misses=int(not index))
            return None
        verdict = open_entry(envelope, None if index else key, self.trusted)
        if verdict.result is None and not index:
            assert verdict.rejected is not None
            self._reject(verdict.rejected, f"the entry for action {key[:12]}: {verdict.detail}")
            self.counters.add(remote_misses=1)
        return verdict.result

    def _envelope(self, key: str, index: bool = False) -> bytes | None:
        """The bytes of the signed envelope the entry for `key` names, checked against its
        digest (None: no entry, a malformed one, a missing or corrupt envelope blob; told and
        counted unless `index`)."""
        _, data = self._call(self.transport.get, "ac", key, limit=ENTRY_LIMIT)
        if data is None:
            return None
        pointer = entry_envelope(data, ENTRY_LIMIT) if len(data) <= ENTRY_LIMIT \
            else f"longer than {ENTRY_LIMIT} bytes"
        if isinstance(pointer, str):
            if not index:
                self._reject(MALFORMED, f"the entry for action {key[:12]}: {pointer}")
            return None
        inline = pointer.contents
        if inline is not None and len(inline) == pointer.size \
                and sha256_bytes(inline) == pointer.digest:
            return bytes(inline)  # inlined in the entry (see entries): no request for the blob
        ok, envelope = self._call(self.transport.get, "cas", pointer.digest, limit=pointer.size)
        if envelope is None:
            if not index:
                self._absent(ok)
            return None
        if len(envelope) != pointer.size or sha256_bytes(envelope) != pointer.digest:
            if not index:
                self._corrupt(Blob(pointer.digest, pointer.size), f"the envelope of {key[:12]}")
            return None
        return bytes(envelope)

    def download(self, result: ActionResult, linked: Collection[str] | None = None,
                 only_linked: bool = False) -> bool:
        """Store every blob of a verified result locally (each verified), then the entry.
        With `only_linked`, the other outputs' blobs are only proven to be in the remote
        (`prove`) unless the store has them; the entry is stored when it then has them all.

        The blobs of the outputs that go to an output folder (`linked`, by name; default: those
        the result publishes) are stored raw, not zstd-compressed: the folder gets them as hard
        links (see `Cas.materialize`), so the machine keeps one copy instead of a compressed
        one in the store and a raw one in the folder, and a fresh checkout neither compresses
        nor decompresses them on the way."""
        return self._entry_stored(result, linked, only_linked,
                                  self._blobs(result, linked, only_linked))

    def _blobs(self, result: ActionResult, linked: Collection[str] | None,
               only_linked: bool) -> bool:
        """The blob part of `download`: nothing counted as a hit or a miss, no entry."""
        outputs, kept = _linked_and_kept(result, linked)
        return self.fetch_outputs(outputs, raw=True) and (
            self.prove(kept) if only_linked else self.fetch_outputs(kept))

    def _entry_stored(self, result: ActionResult, linked: Collection[str] | None,
                      only_linked: bool, blobs: bool) -> bool:
        """The entry part of `download`, once its blobs are stored (`blobs`) or not."""
        if not blobs:
            self.counters.add(remote_misses=1)
            return False
        if not only_linked or self.stored(_linked_and_kept(result, linked)[1]):
            self.ac.put(result)
        self.counters.add(remote_hits=1)
        return True

    def stored(self, outputs: Iterable[Output]) -> bool:
        """Whether the local store holds every blob of these outputs (a tree's files too)."""
        for output in outputs:
            if not self.cas.has(output.digest):
                return False
            entries = self.cas.tree_entries(output.digest) if output.type == "tree" else []
            if entries is None or not all(self.cas.has(e["digest"]) for e in entries):
                return False
        return True

    def prove(self, outputs: Iterable[Output]) -> bool:
        """Whether every blob of these outputs is in the local store or the remote, asked in
        one batch (`Transport.missing`) and read from neither: a tree stored here has its
        files asked for, one that is not only its manifest (its files are checked when it is
        downloaded). A blob the remote lacks is an incomplete entry: False."""
        wanted: dict[str, int] = {}
        for output in outputs:
            entries = self.cas.tree_entries(output.digest) \
                if output.type == "tree" and self.cas.has(output.digest) else None
            blobs = [(output.digest, output.size),
                     *((e["digest"], _size(e) or 0) for e in entries or ())]
            wanted.update((d, s) for d, s in blobs if d not in self._sent and not self.cas.has(d))
        if not wanted:
            return True
        ok, missing = self._call(self.transport.missing, wanted)
        if not ok or missing:
            return self._absent(ok)
        self.counters.add(blobs_proven=len(wanted))
        with self._lock:
            self._sent.update(wanted)  # an upload from here need not send them
        return True

    def _guarded(self, step: Callable[..., Any], *args: Any) -> Any:
        """A step of a lookup; an unexpected error is told once and is a miss (None): never a
        failed build because of the remote."""
        try:
            return step(*args)
        except Exception as exc:  # noqa: BLE001 - reported, then a miss
            what = exc.strerror if isinstance(exc, OSError) else f"{type(exc).__name__}: {exc}"
            self._tell("fetch error", f"remote cache: a lookup failed ({what}); building "
                                      "locally what it could not fetch")
            return None

    def fetch_outputs(self, outputs: Iterable[Output], *, raw: bool = False) -> bool:
        """Download every blob of the outputs the local store lacks; False when one is missing,
        corrupt or could not be downloaded (those downloaded are stored: they are verified).
        With `raw`, the blobs (a tree's files too) are stored uncompressed; a tree's manifest
        always is (as Cas.put_tree keeps it: a build that finds its action cached reads it)."""
        outputs = list(outputs)
        blobs = [Blob(o.digest, o.size, raw) for o in outputs if o.type == "blob"]
        trees = [o for o in outputs if o.type == "tree"]
        if not self._download([*blobs, *(Blob(t.digest, t.size, True) for t in trees)]):
            return False
        for tree in trees:
            entries = self.cas.tree_entries(tree.digest)
            if entries is None:
                self._reject(CORRUPT_BLOB, f"the tree {tree.digest[:12]} is not a tree manifest")
                return False
            if not self._download([Blob(e["digest"], _size(e), raw) for e in entries]):
                return False
        return True

    def _download(self, blobs: list[Blob]) -> bool:
        todo = list({b.digest: b for b in blobs if not self.cas.has(b.digest)}.values())
        if len(todo) <= 1:
            return all(self._download_once(b) for b in todo)
        # the largest blob first, of every action's: the pool is shared by the actions whose
        # blobs download at once (a fresh checkout: all of them), and a record queued behind
        # the small files of the actions found first would end last
        return all(self._pool("files").map(self._download_once, todo,
                                           size=lambda blob: blob.size or 0))

    def _download_once(self, blob: Blob) -> bool:
        """Download one blob unless the store has it; one thread downloads a given blob, the
        others wait for it (the records and the deployable bundle's parts share blobs, and
        their actions' downloads run at the same time)."""
        with self._lock:
            if self.cas.has(blob.digest):
                return True
            fetching = self._fetching.get(blob.digest)
            if fetching is None:
                self._fetching[blob.digest] = threading.Event()
        if fetching is not None:
            fetching.wait()
            return self.cas.has(blob.digest)
        try:
            return self._download_one(blob)
        finally:
            with self._lock:
                self._fetching.pop(blob.digest).set()

    def _download_one(self, blob: Blob) -> bool:
        if blob.size is not None and blob.size >= STREAM_FROM:
            return self._stream_one(blob, blob.size)
        with self._transfers:
            ok, data = self._call(self.transport.get, "cas", blob.digest, limit=blob.size)
        if data is None:
            return self._absent(ok)
        if sha256_bytes(data) != blob.digest or blob.size not in (None, len(data)):
            return self._corrupt(blob, "blob")
        self.cas.put(data, digest=blob.digest, compress=not blob.raw)
        return self._stored(blob, len(data))

    def _stream_one(self, blob: Blob, size: int) -> bool:
        with self._transfers:
            ok, writer = self._call(
                self.transport.get_into, "cas", blob.digest,
                lambda: self.cas.writer(blob.digest, size, compress=not blob.raw), limit=size)
        if writer is None:
            return self._absent(ok)
        if not writer.commit():  # synced to disk outside the transfer slots
            return self._corrupt(blob, "blob")
        return self._stored(blob, size)

    def _absent(self, answered: bool) -> bool:
        if answered:  # the entry names a blob the remote does not have (evicted?)
            self.counters.add(remote_incomplete=1)
        return False

    def _corrupt(self, blob: Blob, what: str) -> bool:
        self._bad.add(blob.digest)  # an upload from here sends it again, without asking
        self._reject(CORRUPT_BLOB, f"the bytes of {what} {blob.digest[:12]} do not match its "
                                   "name; it is not stored")
        return False

    def _stored(self, blob: Blob, size: int) -> bool:
        self._sent.add(blob.digest)  # an upload from here need not send it
        self.counters.add(blobs_downloaded=1, bytes_downloaded=size)
        return True

    # -- writing ----------------------------------------------------------------------------------

    def publish(self, result: ActionResult, index: Iterable[str] = ()
                ) -> cf.Future[bool] | None:
        """Upload a result in the background (see `wait`), filed under its index keys too
        (see `upload`); None when not uploading. A result that could not be uploaded (or was
        not: uploads off, refused) joins `unpublished`."""
        if not self.uploading or self.transport.disabled_for("write") is not None:
            self._unpublished(result)
            return None
        future = self._pool("uploads").submit(self._publish_one, result, tuple(index))
        with self._lock:
            self._pending.append(future)
        return future

    def _publish_one(self, result: ActionResult, index: tuple[str, ...]) -> bool:
        published = self.upload(result, index)
        if not published:
            self._unpublished(result)
        return published

    def _unpublished(self, result: ActionResult) -> None:
        with self._lock:
            self.unpublished.add(result.key)

    def upload(self, result: ActionResult, index: Iterable[str] = ()) -> bool:
        """Upload the blobs of a result, then its signed envelope (a blob), then the entry
        naming them; True when the entry is up. Then the same entry is filed under each index
        key (`/ac/<index key>`): a key a reader computes without the outputs of the actions
        upstream (the builder's chain keys: see builder.lookahead), so that it can look up a
        whole chain of actions at once. An index entry is only where to look: the reader
        checks the signed result's action key against the key it computes (`fetch_async`).
        One that could not be filed is not a failed upload (the entry is up)."""
        if not self.uploading or self.signing_key is None:
            return False
        if not self.send_outputs(result.outputs.values()):
            return False
        envelope = sign_entry(result, self.signing_key, self.public)
        pointer = Pointer(sha256_bytes(envelope), len(envelope), envelope)  # inlined too
        if not self._put_blob(pointer.digest, envelope):
            return False
        entry = entry_bytes(pointer, {name: (o.digest, o.size)
                                      for name, o in result.outputs.items()})
        if not self._call(self.transport.put, "ac", result.key, entry, upload=True)[0]:
            return False
        self.counters.add(entries_uploaded=1, bytes_uploaded=len(entry))
        for extra in dict.fromkeys(index):
            if extra != result.key and self._call(self.transport.put, "ac", extra, entry,
                                                  upload=True)[0]:
                self.counters.add(bytes_uploaded=len(entry))
        return True

    def mark_sent(self, outputs: Iterable[Output]) -> None:
        """Note that the remote has these outputs' blobs (another process uploaded them, and
        this one has them locally): an upload from here need not send them."""
        digests = [d for d in self._blobs_of(outputs) if d is not None]
        with self._lock:
            self._sent.update(digests)

    def send_outputs(self, outputs: Iterable[Output]) -> bool:
        """Upload the blobs of these outputs that the remote may lack (no entry: a worker of a
        distributed build fetches them by digest); False when one could not be."""
        return all(blob is not None and self._send_blob(blob) for blob in self._blobs_of(outputs))

    def _blobs_of(self, outputs: Iterable[Output]) -> list[str | None]:
        """The digests to upload, trees' files before their manifests (None: not stored
        locally, so the entry cannot be uploaded)."""
        digests: list[str | None] = []
        for output in outputs:
            if output.type == "tree":
                entries = self.cas.tree_entries(output.digest)
                if entries is None:
                    return [None]
                digests += [e["digest"] for e in entries]
            digests.append(output.digest)
        return list(dict.fromkeys(digests))

    def _send_blob(self, digest: str) -> bool:
        """Upload one blob unless the remote has it; one upload thread sends a given blob, the
        others wait for it (actions sharing an output publish it at the same time)."""
        with self._lock:
            if digest in self._sent:
                return True
            sending = self._sending.get(digest)
            if sending is None:
                self._sending[digest] = threading.Event()
        if sending is not None:
            sending.wait()
            return digest in self._sent
        try:
            return self._send_new_blob(digest)
        finally:
            with self._lock:
                self._sending.pop(digest).set()

    def _send_new_blob(self, digest: str) -> bool:
        data = self.cas.get(digest)
        if data is None:
            return False
        if len(data) > HEAD_FIRST and digest not in self._bad:
            ok, there = self._call(self.transport.head, "cas", digest, upload=True)
            if not ok:
                return False
            if there:
                self._sent.add(digest)
                return True
        return self._put_blob(digest, data)

    def _put_blob(self, digest: str, data: bytes) -> bool:
        if not self._call(self.transport.put, "cas", digest, data, upload=True)[0]:
            return False
        self.counters.add(blobs_uploaded=1, bytes_uploaded=len(data))
        self._sent.add(digest)
        return True

    def wait(self) -> None:
        """Wait for the uploads started by `publish`."""
        while True:
            with self._lock:
                pending, self._pending = self._pending, []
            if not pending:
                return
            cf.wait(pending)

    def close(self) -> None:
        self.wait()
        for pool in (self._lookups, self._downloads, self._files, self._uploads):
            if pool is not None:
                pool.shutdown(wait=True)
        self.transport.close()

    # -- faults -----------------------------------------------------------------------------------

    def _call(self, method: Callable[..., Any], *args: Any, upload: bool = False,
              **options: Any) -> tuple[bool, Any]:
        """(True, what the request returned), or (False, None) when it failed: each kind of
        failure is told once, and counted."""
        try:
            return True, method(*args, **options)
        except Unavailable:
            pass
        except Refused as exc:
            if upload:
                self.uploading = False
                self._tell("refused upload", f"remote cache {self.url} refuses uploads "
                           f"({exc}); not uploading", hint="check the server's write access")
            else:
                self._tell("refused read", f"remote cache {self.url} refuses reads ({exc})")
            return False, None
        except RemoteError:
            self.counters.add(remote_errors=1)
        self._tell_disabled("write" if upload else "read")
        return False, None

    def _tell_disabled(self, side: str) -> None:
        """Once per cause: that the remote (or one side of it) is disabled, and why."""
        why, detail = self.transport.why.get(side), self.transport.disabled_for(side)
        if why is None:
            return
        if self.transport.disabled_for("write") is not None:
            self.uploading = False
        kind = why if why != "failing" else f"{side}s failing"
        if kind in self._told:
            return
        self.counters.add(remote_disabled=1)
        if why == "unreachable":
            self._tell(kind, f"remote cache unreachable ({detail}); building locally")
        elif why == "too slow":
            self._tell(kind, f"remote cache too slow ({detail}); not using it for the rest of "
                             "this build, building locally")
        elif side == "read":
            self._tell(kind, f"remote cache: reads failed ({detail}); building locally")
        else:
            self._tell(kind, f"remote cache: uploads failed ({detail}); not uploading for the "
                             "rest of this build (reads go on)")

    def _reject(self, why: str, detail: str) -> None:
        self.counters.reject(why)
        self._tell(why, f"remote cache: refused {detail} ({why}); it is not used",
                   hint="further refusals of this kind are counted, not shown "
                        "(udo-build store stats)")

    def _tell(self, kind: str, message: str, hint: str | None = None) -> None:
        with self._lock:
            if kind in self._told:
                return
            self._told.add(kind)
            self.warnings.append(message)
            self.warn(Problem(message, hint=hint))

    def _pool(self, which: str, locked: bool = False) -> Pool:
        if not locked:
            with self._lock:
                return self._pool(which, locked=True)
        pool: Pool | None = getattr(self, f"_{which}")
        if pool is None:
            pool = Pool(THREADS[which])
            setattr(self, f"_{which}", pool)
        return pool


def _linked_and_kept(result: ActionResult, linked: Collection[str] | None
                     ) -> tuple[list[Output], list[Output]]:
    """The outputs of a result that go to an output folder (`linked`, by name; default: those
    it publishes), and the others."""
    published = set(result.publish.values() if linked is None else linked)
    outputs = list(result.outputs.items())
    return ([o for name, o in outputs if name in published],
            [o for name, o in outputs if name not in published])


def _size(entry: dict[str, object]) -> int | None:
    size = entry.get("size")
    return size if isinstance(size, int) else None

