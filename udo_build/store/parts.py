"""A file made of stored blobs: one copy of each artifact, however many files hold it.

The deployable bundle holds every prepared record; storing it as one blob would keep each
record twice (alone, as the prepare step's output, and inside the bundle). Instead an action
returns it as parts: the bytes at each offset of the file are a blob of the store (the records
are the prepare steps' own blobs, shared), and the gaps between parts are zeros. What is stored
is a tree manifest (so the store's completeness checks, garbage collection and remote transfer
treat it as any tree: its parts are reachable blobs) with one more field, `file`:

    {"schema": "udo-build/tree", "version": 1,
     "entries": [{"path": "parts/<offset, 16 digits>", "digest", "size", "offset"}, ...],
     "file": {"size": <bytes of the whole file>, "sha256": <its digest>}}

The whole file's digest is what the output folder's manifest and its stat-cache check compare;
`write_file` materializes the file by streaming the parts (each verified as it is read) and
checks the whole digest before the file becomes visible. `PartsReader` reads byte ranges
without materializing anything: a reader of the deployable bundle pays for the parts it reads.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..atomic import READ_ONLY, AtomicFile
from ..canonical import canonical_json
from .cas import TREE_SCHEMA, TREE_VERSION, _valid_digest, blob_reader, parse_tree, unreadable

if TYPE_CHECKING:
    from .cas import Cas

CHUNK = 1 << 20
WHOLE_PART = 1 << 20  # a range that is one part this large is read as its blob, not kept
_ZEROS = bytes(CHUNK)


@dataclass(frozen=True)
class Part:
    """A stored blob placed at an offset of a file made of parts."""

    offset: int
    digest: str
    size: int


@dataclass(frozen=True)
class FileLayout:
    """A file as parts at offsets (ascending, not overlapping; zeros between)."""

    size: int
    sha256: str
    parts: tuple[Part, ...]

    def manifest(self) -> bytes:
        entries = [{"path": f"parts/{p.offset:016d}", "digest": p.digest, "size": p.size,
                    "offset": p.offset, "executable": False} for p in self.parts]
        return canonical_json({"schema": TREE_SCHEMA, "version": TREE_VERSION,
                               "entries": entries,
                               "file": {"size": self.size, "sha256": self.sha256}})

    def at(self, offset: int) -> Part | None:
        """The part that starts at `offset`."""
        for part in self.parts:
            if part.offset == offset:
                return part
        return None


def parse_layout(data: bytes) -> FileLayout | None:
    """The layout a manifest describes; None when it is not the manifest of a file of parts
    (a plain tree) or does not hold together (overlaps, parts past the end, bad digests)."""
    if parse_tree(data) is None:
        return None
    doc = json.loads(data)
    whole = doc.get("file")
    if not isinstance(whole, dict):
        return None
    size, sha = whole.get("size"), whole.get("sha256")
    if not _count(size) or not isinstance(sha, str) or not _valid_digest(sha):
        return None
    parts: list[Part] = []
    end = 0
    for entry in doc["entries"]:
        offset, length = entry.get("offset"), entry.get("size")
        if not _count(offset) or not _count(length) or offset < end:
            return None
        end = offset + length
        parts.append(Part(offset, entry["digest"], length))
    if end > size:
        return None
    return FileLayout(size, sha, tuple(parts))


def whole_blob(layout: FileLayout) -> bool:
    """Whether the file is one stored blob from its first byte to its last (a small bundle
    whose head holds everything): it is then written as that blob is, hard-linked from the
    store where the blob is kept raw."""
    return len(layout.parts) == 1 and layout.parts[0].offset == 0 and \
        layout.parts[0].size == layout.size and layout.parts[0].digest == layout.sha256


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def layout_of(segments: Sequence[tuple[int, bytes | Part]], size: int,
              cas: Cas) -> FileLayout:
    """Store the literal segments as blobs and return the layout of the file. Its digest is
    computed by streaming every part once; the shared parts are the action's inputs, which it
    has just read verified, so they are not hashed a second time here (a blob damaged since is
    caught where the file is written: each part is verified there, and the whole digest)."""
    parts: list[Part] = []
    for offset, segment in segments:
        if isinstance(segment, Part):  # a stored blob, placed at `offset`
            parts.append(Part(offset, segment.digest, segment.size))
        else:
            ref = cas.put(bytes(segment))
            parts.append(Part(offset, ref.digest, ref.size))
    digest = hashlib.sha256()
    for chunk in _stream(cas, parts, size, verify=False):
        digest.update(chunk)
    return FileLayout(size, digest.hexdigest(), tuple(parts))


class MissingPart(Exception):
    """A part's blob is missing from the store or corrupt (then quarantined)."""


def _stream(cas: Cas, parts: Sequence[Part], size: int, *,
            verify: bool = True) -> Iterator[bytes | memoryview]:
    """The file's bytes in order; raises MissingPart when a blob is missing or (when
    `verify`) does not hold its bytes (checked as it is read)."""
    position = 0
    for part in parts:
        yield from _zeros(part.offset - position)
        yield from read_blob(cas, part.digest, part.size, verify=verify)
        position = part.offset + part.size
    yield from _zeros(size - position)


def _zeros(count: int) -> Iterator[bytes]:
    while count > 0:
        yield _ZEROS[:min(count, CHUNK)]
        count -= CHUNK


def read_blob(cas: Cas, digest: str, size: int, *, verify: bool = True) -> Iterator[bytes]:
    """A blob's bytes in chunks, verified at its end unless told not to, or this process
    stored it (and hashed it to do so) and its file is unchanged since (MissingPart when
    missing or corrupt: the consumer must not keep what it got)."""
    path = cas.path_of(digest)
    if path is None:
        raise MissingPart(digest)
    verify = verify and not cas.stored_here(digest, path)  # hashed as it was stored, unchanged
    h = hashlib.sha256()
    count = 0
    failed = unreadable(path)
    try:
        with open(path, "rb") as fh:
            stream = blob_reader(fh, path)
            while chunk := stream.read(CHUNK):
                if verify:
                    h.update(chunk)
                count += len(chunk)
                if count > size:
                    break
                yield chunk
    except failed:
        count = -1
    if count != size or (verify and h.hexdigest() != digest):
        cas.quarantine(path)
        raise MissingPart(digest)


def write_file(cas: Cas, layout: FileLayout, dest: Path, *, dir_fd: int | None = None,
               readonly: bool = True) -> bool:
    """Materialize the file at `dest` atomically, read-only (or writable: `readonly=False`);
    False (nothing written) when a part is missing or corrupt, or the whole does not match its
    digest. With `dir_fd`, `dest` is named by its last part in that open folder (see
    `atomic.Confined`)."""
    digest = hashlib.sha256()
    mode = READ_ONLY if readonly else None
    with AtomicFile(dest, mode=mode, durable=False, dir_fd=dir_fd) as out:
        try:
            for chunk in _stream(cas, layout.parts, layout.size):
                digest.update(chunk)
                out.write(chunk)
        except MissingPart:
            out.abort()
            return False
        if digest.hexdigest() != layout.sha256:
            out.abort()
            return False
    return True


class PartsReader:
    """Byte ranges of a file of parts, read from the store (a range is one part, or lies
    inside one part; ranges elsewhere are read part by part)."""

    def __init__(self, cas: Cas, layout: FileLayout) -> None:
        self.cas = cas
        self.layout = layout
        self.size = layout.size
        self._cache: dict[str, bytes] = {}

    def read(self, offset: int, size: int) -> bytes:
        whole = self._whole_part(offset, size)
        if whole is not None:
            return whole
        out = bytearray()
        end = offset + size
        for part in self.layout.parts:
            if part.offset + part.size <= offset or part.offset >= end:
                continue
            data = self._part(part)
            lo, hi = max(offset, part.offset), min(end, part.offset + part.size)
            out.extend(b"\0" * (lo - offset - len(out)))
            out.extend(data[lo - part.offset:hi - part.offset])
        out.extend(b"\0" * (min(end, self.size) - offset - len(out)))
        return bytes(out)

    def part_path(self, offset: int, size: int) -> Path | None:
        """The blob file of the part that is exactly this range when it is kept raw (its
        bytes, to map); None for any other range, or a compressed blob."""
        for part in self.layout.parts:
            if part.offset == offset and part.size == size:
                path = self.cas.path_of(part.digest)
                return path if path is not None and path.suffix != ".zst" else None
        return None

    def _whole_part(self, offset: int, size: int) -> bytes | None:
        """A large part read whole (a bundle's weight): its blob's bytes as they are, neither
        copied nor kept (the caller holds it, or not); None for any other range."""
        if size < WHOLE_PART:
            return None
        for part in self.layout.parts:
            if part.offset == offset and part.size == size:
                if part.digest in self._cache:
                    return self._cache[part.digest]
                data = self.cas.get(part.digest)
                if data is None:
                    raise MissingPart(part.digest)
                return data
        return None

    def _part(self, part: Part) -> bytes:
        if part.digest not in self._cache:
            data = self.cas.get(part.digest)
            if data is None:
                raise MissingPart(part.digest)
            self._cache = {part.digest: data}  # one part kept: the head, or the last record
        return self._cache[part.digest]
