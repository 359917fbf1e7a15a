"""Content-addressed blobs and trees.

A blob is named by the sha256 of its uncompressed bytes and kept under a two-hex-digit fan-out:
`cas/ab/abcdef...` (raw) or `cas/ab/abcdef....zst` (zstd, when compression saves at least a
tenth; a blob downloaded for an output folder stays raw, see `Remote.download`). Every read
verifies the digest; a blob whose bytes do not match is moved to `quarantine/` and treated as
missing.

A tree (a directory artifact, such as an op package) is a manifest blob, canonical JSON naming
the blob of every file: a Merkle tree, so equal trees have equal digests.

Blobs reach the output folder through `materialize`: a raw (uncompressed) blob is hard-linked
there when the file system allows it (stored blobs are read-only, so the link is too; the store
verifies a blob on every read, so a link written through anyway is caught as a corrupt blob),
else its bytes are written. A raw blob is verified before it is linked, unless this process
has just stored it (and hashed its bytes to do so).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NamedTuple

from ..atomic import AtomicFile, is_tmp, link_atomic, write_atomic
from ..canonical import canonical_json

TREE_SCHEMA = "udo-build/tree"
TREE_VERSION = 1
COMPRESS_MIN = 256  # bytes: smaller blobs are never worth a zstd frame
ZSTD_LEVEL = 3
PROBE_FROM = 1 << 20  # blobs larger than this are probed before being compressed
PROBE_BYTES = 256 << 10
STREAM_FROM = 64 << 20  # bytes: larger files are stored as a stream (put_file)


class BlobRef(NamedTuple):
    digest: str
    size: int


class CorruptBlob(Exception):
    """A blob's bytes do not match its name (it has been quarantined)."""


def sha256_bytes(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    with open(path, "rb") as fh:
        while chunk := fh.read(1 << 20):
            h.update(chunk)
            size += len(chunk)
    return h.hexdigest(), size


def content_digest(path: Path) -> tuple[str | None, str]:
    """(sha256 of a blob file's uncompressed bytes, "") or (None, why it cannot be read), read
    as a stream (a blob is never held in memory whole for this)."""
    h = hashlib.sha256()
    try:
        with open(path, "rb") as fh:
            stream = blob_reader(fh, path)
            while chunk := stream.read(1 << 20):
                h.update(chunk)
    except OSError as exc:
        return None, f"cannot be read: {exc.strerror}"
    except unreadable(path) as exc:
        return None, f"does not decompress: {exc}"
    return h.hexdigest(), ""


def blob_reader(fh: Any, path: Path) -> Any:
    """The uncompressed bytes of the open blob file `fh` (a stream): itself when it is kept
    raw; zstandard (about 9 ms to import) only for a .zst file."""
    if path.suffix != ".zst":
        return fh
    import zstandard

    return zstandard.ZstdDecompressor().stream_reader(fh)


def unreadable(path: Path) -> tuple[type[Exception], ...]:
    """The errors that reading the blob file `path` through `blob_reader` may raise."""
    if path.suffix != ".zst":
        return (OSError,)
    import zstandard

    return (OSError, zstandard.ZstdError)


def blob_file_digest(path: Path) -> str | None:
    """The digest of the blob a store file holds, or None when it cannot be read."""
    return content_digest(path)[0]


def _same_file(a: Path, b: Path, dir_fd: int | None = None) -> bool:
    """Whether `b` (by its name in the open folder `dir_fd`, when given; never followed) is
    already a hard link to `a` (renaming a link over another link to the same file does
    nothing, so linking again would leave the temporary link behind)."""
    try:
        found = os.stat(b if dir_fd is None else b.name, dir_fd=dir_fd, follow_symlinks=False)
        return os.path.samestat(os.stat(a), found)
    except OSError:
        return False


_HEX = frozenset("0123456789abcdef")


def _valid_digest(digest: str) -> bool:
    return len(digest) == 64 and _HEX.issuperset(digest)


class Cas:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.dir = root / "cas"
        self.quarantine_dir = root / "quarantine"
        self.written: set[str] = set()  # digests of the blobs this process has stored
        self._stamps: dict[str, tuple[int, int, int]] = {}  # their files' (inode, size, mtime)
        self.quarantined: set[str] = set()  # digests of the blobs this process quarantined
        self.links = True  # materialize by hard link when possible (False after one fails)
        self._absolute: str | None = None  # the absolute path of `dir`, once asked for

    # -- paths ------------------------------------------------------------------------------------

    def _base(self, digest: str) -> Path:
        if not _valid_digest(digest):
            raise ValueError(f"not a sha256 digest: {digest!r}")
        return self.dir / digest[:2] / digest

    def path_of(self, digest: str) -> Path | None:
        """The file holding a blob (raw or .zst), or None when the store lacks it."""
        found = self.find(digest)
        return None if found is None else Path(found)

    def find(self, digest: str) -> str | None:
        """`path_of` as an absolute path in a string (no Path objects, no getcwd: a no-op
        build asks for every output of every action), or None."""
        if not _valid_digest(digest):
            raise ValueError(f"not a sha256 digest: {digest!r}")
        if self._absolute is None:
            self._absolute = os.path.abspath(self.dir)
        base = os.path.join(self._absolute, digest[:2], digest)
        for candidate in (base, base + ".zst"):
            if os.path.exists(candidate):
                return candidate
        return None

    def has(self, digest: str) -> bool:
        return self.path_of(digest) is not None

    # -- writing ----------------------------------------------------------------------------------

    def put(self, data: bytes, *, digest: str | None = None, compress: bool = True) -> BlobRef:
        """Store a blob; `digest` only when the caller has just verified that it is the
        sha256 of `data` (a download), to save hashing it twice; `compress=False` keeps it
        raw (a download the output folder links to)."""
        digest = digest or sha256_bytes(data)
        found = self.path_of(digest)
        if found is not None and not self.stored_here(digest, found) \
                and not self._intact(digest, found):
            found = None  # it was damaged (now quarantined): stored again
        if found is None:
            stored, suffix = _maybe_compress(data) if compress else (data, "")
            base = self._base(digest)
            write_atomic(base.with_name(base.name + suffix), stored)
            self.wrote(digest)
        return BlobRef(digest, len(data))

    def writer(self, digest: str, size: int, *, compress: bool = True) -> BlobWriter:
        """A blob of `size` bytes named `digest`, written as its bytes arrive (see
        `BlobWriter`; kept raw with `compress=False`)."""
        return BlobWriter(self, digest, size, compress)

    def put_file(self, path: Path) -> BlobRef:
        """Store a file's bytes; a large one (a model's external data: gigabytes) is hashed
        and copied as a stream, never held whole."""
        if path.stat().st_size <= STREAM_FROM:
            return self.put(path.read_bytes())
        digest, size = sha256_file(path)
        found = self.path_of(digest)
        if found is not None and (self.stored_here(digest, found) or self._intact(digest, found)):
            return BlobRef(digest, size)
        writer = self.writer(digest, size)
        with open(path, "rb") as fh:
            while chunk := fh.read(1 << 20):
                writer.write(memoryview(chunk))
        if not writer.commit():
            raise OSError(f"{path} changed while it was being stored")
        return BlobRef(digest, size)

    def put_tree(self, folder: Path) -> BlobRef:
        """Store every file below `folder` and a manifest naming them; returns the manifest.
        The manifest is kept raw: every build that finds the action cached reads it (to check
        the files it names), and a raw one is read without importing zstandard."""
        entries = []
        for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
            ref = self.put_file(path)
            entries.append({"path": path.relative_to(folder).as_posix(), "digest": ref.digest,
                            "size": ref.size, "executable": os.access(path, os.X_OK)})
        return self.put(tree_manifest(entries), compress=False)

    # -- reading ----------------------------------------------------------------------------------

    def get(self, digest: str) -> bytes | None:
        """The verified bytes of a blob; None when missing or corrupt (then quarantined)."""
        path = self.path_of(digest)
        return None if path is None else self._read(digest, path)

    def _read(self, digest: str, path: Path) -> bytes | None:
        try:
            raw = path.read_bytes()
            data = _decompress(raw) if path.suffix == ".zst" else raw
        except (OSError, ValueError):
            data = None
        if data is None or sha256_bytes(data) != digest:
            self.quarantine(path)
            return None
        return data

    def wrote(self, digest: str) -> None:
        """Note a blob this process has just stored (hashed its bytes to do so)."""
        self.written.add(digest)
        found = self.find(digest)
        if found is not None:
            st = os.stat(found)
            self._stamps[digest] = (st.st_ino, st.st_size, st.st_mtime_ns)

    def stored_here(self, digest: str, path: Path | str) -> bool:
        """Whether this process stored the blob and its file is unchanged since (a stat, no
        read: a file written through or truncated after it was stored is read again)."""
        if digest not in self.written:
            return False
        try:
            st = os.stat(path)
        except OSError:
            return False
        return self._stamps.get(digest) == (st.st_ino, st.st_size, st.st_mtime_ns)

    def _intact(self, digest: str, path: Path) -> bool:
        """Whether a stored blob file holds its bytes (read as a stream); else quarantined."""
        if content_digest(path)[0] == digest:
            return True
        self.quarantine(path)
        return False

    def tree_entries(self, digest: str) -> list[dict[str, Any]] | None:
        data = self.get(digest)
        return None if data is None else parse_tree(data)

    def materialize(self, digest: str, dest: Path, *, executable: bool = False,
                    dir_fd: int | None = None) -> bool:
        """Put a blob at `dest` atomically, read-only (r-x for an executable): a hard link
        to a raw stored blob where possible, else a written copy. False when the blob is
        missing (or corrupt: then quarantined). With `dir_fd`, `dest` is named by its last
        part in that open folder (an output folder written through itself: `Confined`)."""
        path = self.path_of(digest)
        if path is None:
            return False
        if not executable and path.suffix != ".zst" and self.links:
            if not self.stored_here(digest, path) and not self._intact(digest, path):
                return False
            if _same_file(path, dest, dir_fd) or self._link(path, dest, dir_fd):
                return True
        data = self._read(digest, path)
        if data is None:
            return False
        write_atomic(dest, data, durable=False, mode=0o555 if executable else 0o444,
                     dir_fd=dir_fd)
        return True

    def _link(self, path: Path, dest: Path, dir_fd: int | None) -> bool:
        """Hard-link a stored blob to `dest` (atomically); False when the file system does
        not allow it: then copies are written, and no more links are tried."""
        self.links = link_atomic(path, dest, dir_fd=dir_fd)
        return self.links

    # -- maintenance ------------------------------------------------------------------------------

    def quarantine(self, path: Path) -> None:
        """Move a blob file whose bytes do not match its name out of the way (kept for a
        post-mortem; gc removes it later); the blob is missing from then on."""
        self.quarantine_dir.mkdir(parents=True, exist_ok=True)
        target = self.quarantine_dir / f"{path.name}.{time.time_ns()}"
        try:
            os.replace(path, target)
        except FileNotFoundError:
            pass
        self.written.discard(path.name.removesuffix(".zst"))
        self.quarantined.add(path.name.removesuffix(".zst"))

    def iter_blobs(self) -> Iterator[tuple[str, Path]]:
        """(digest, file) of every stored blob; temporary siblings are skipped."""
        if not self.dir.exists():
            return
        for fan in sorted(self.dir.iterdir()):
            if not fan.is_dir():
                continue
            for path in sorted(fan.iterdir()):
                if is_tmp(path):
                    continue
                digest = path.name.removesuffix(".zst")
                if _valid_digest(digest):
                    yield digest, path


class BlobWriter:
    """A blob stored while it downloads: each chunk is hashed and written to a temporary
    sibling as it arrives; `commit` makes it visible only when the bytes match the name and
    size, durably, like `put`. Compression follows `put` too: the chunk that holds the middle
    byte is probed, and only when it compresses is the whole compressed (then kept if that
    saves a tenth). Bytes past the announced size are counted, never written."""

    def __init__(self, cas: Cas, digest: str, size: int, compress: bool = True) -> None:
        self.cas = cas
        self.digest = digest
        self.size = size
        self.base = cas._base(digest)
        self.file = AtomicFile(self.base)
        self.tmp = self.file.tmp
        self.hash = hashlib.sha256()
        self.count = 0
        self.compress = compress  # False: kept raw, never probed
        self.compressible = compress and COMPRESS_MIN <= size <= PROBE_FROM  # else: probed

    def write(self, chunk: memoryview) -> None:
        start, self.count = self.count, self.count + len(chunk)
        if self.count > self.size:
            return  # not the blob it claims to be: `commit` refuses it
        self.hash.update(chunk)
        if self.compress and start <= self.size // 2 < self.count and self.size > PROBE_FROM:
            self.compressible = _compresses(chunk[:PROBE_BYTES], 0.95)
        self.file.write(chunk)

    def commit(self) -> bool:
        """Store the blob: True once it is there; False (nothing stored) when the bytes do
        not match its name or size."""
        try:
            if self.count != self.size or self.hash.hexdigest() != self.digest:
                self.abort()
                return False
            if self.compressible and self._compress():
                self.file.abort()  # the raw bytes: the zstd frame is stored instead
            else:
                self.file.commit()
        except BaseException:
            self.abort()
            raise
        self.cas.wrote(self.digest)
        return True

    def _compress(self) -> bool:
        """Store the blob's zstd frame (durably) if that saves a tenth; False (nothing
        stored) when it does not."""
        import zstandard

        with open(self.tmp, "rb") as src, AtomicFile(self.base.with_name(
                self.base.name + ".zst")) as packed:
            _, written = zstandard.ZstdCompressor(level=ZSTD_LEVEL).copy_stream(
                src, packed, size=self.size)
            if written > self.size * 0.9:
                packed.abort()
                return False
        return True

    def abort(self) -> None:
        self.file.abort()


def tree_manifest(entries: list[dict[str, Any]]) -> bytes:
    return canonical_json({"schema": TREE_SCHEMA, "version": TREE_VERSION,
                           "entries": sorted(entries, key=lambda e: e["path"])})


def parse_tree(data: bytes) -> list[dict[str, Any]] | None:
    """The entries of a tree manifest, or None when `data` is not one."""
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict) or doc.get("schema") != TREE_SCHEMA:
        return None
    entries = doc.get("entries")
    if not isinstance(entries, list):
        return None
    for e in entries:
        if not (isinstance(e, dict) and isinstance(e.get("path"), str)
                and _valid_digest(str(e.get("digest"))) and safe_relpath(e["path"])):
            return None
    return entries


def safe_relpath(path: str) -> bool:
    """A relative path that stays below its folder (no '..', no absolute, no empty part)."""
    parts = path.split("/")
    return bool(path) and not path.startswith("/") and ".." not in parts and "" not in parts


def _maybe_compress(data: bytes) -> tuple[bytes, str]:
    """zstd when it saves at least a tenth. A large blob is probed first: when a slice of it
    does not compress, the whole is not tried (float weights and noise rarely compress)."""
    if len(data) < COMPRESS_MIN:
        return data, ""
    import zstandard

    if len(data) > PROBE_FROM:
        middle = len(data) // 2
        if not _compresses(data[middle - PROBE_BYTES // 2:middle + PROBE_BYTES // 2], 0.95):
            return data, ""
    packed = zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(data)
    return (packed, ".zst") if len(packed) <= len(data) * 0.9 else (data, "")


def _compresses(probe: bytes | memoryview, ratio: float) -> bool:
    """Whether zstd makes `probe` at most `ratio` of its size."""
    import zstandard

    return len(zstandard.ZstdCompressor(level=ZSTD_LEVEL).compress(probe)) <= len(probe) * ratio


def _decompress(data: bytes) -> bytes:
    import zstandard

    try:
        return zstandard.ZstdDecompressor().decompress(data, max_output_size=1 << 34)
    except zstandard.ZstdError as exc:
        raise ValueError(str(exc)) from None
