"""Content-addressed blobs and trees.

A blob is named by the sha256 of its uncompressed bytes and kept under a two-hex-digit fan-out:
`cas/ab/abcdef...` (raw) or `cas/ab/abcdef....zst` (zstd, when compression saves at least a
tenth). Every read verifies the digest; a blob whose bytes do not match is moved to
`quarantine/` and treated as missing.

A tree (a directory artifact, such as an op package) is a manifest blob, canonical JSON naming
the blob of every file: a Merkle tree, so equal trees have equal digests.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..canonical import canonical_json
from .atomic import is_tmp, write_atomic

TREE_SCHEMA = "udo-build/tree"
TREE_VERSION = 1
COMPRESS_MIN = 256  # bytes: smaller blobs are never worth a zstd frame
ZSTD_LEVEL = 3
PROBE_FROM = 1 << 20  # blobs larger than this are probed before being compressed
PROBE_BYTES = 256 << 10


@dataclass(frozen=True)
class BlobRef:
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


def _valid_digest(digest: str) -> bool:
    return len(digest) == 64 and all(c in "0123456789abcdef" for c in digest)


class Cas:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.dir = root / "cas"
        self.quarantine_dir = root / "quarantine"

    # -- paths ------------------------------------------------------------------------------------

    def _base(self, digest: str) -> Path:
        if not _valid_digest(digest):
            raise ValueError(f"not a sha256 digest: {digest!r}")
        return self.dir / digest[:2] / digest

    def path_of(self, digest: str) -> Path | None:
        """The file holding a blob (raw or .zst), or None when the store lacks it."""
        base = self._base(digest)
        for candidate in (base, base.with_name(base.name + ".zst")):
            if candidate.exists():
                return candidate
        return None

    def has(self, digest: str) -> bool:
        return self.path_of(digest) is not None

    # -- writing ----------------------------------------------------------------------------------

    def put(self, data: bytes, *, digest: str | None = None) -> BlobRef:
        """Store a blob; `digest` only when the caller has just verified that it is the
        sha256 of `data` (a download), to save hashing it twice."""
        digest = digest or sha256_bytes(data)
        if not self.has(digest):
            stored, suffix = _maybe_compress(data)
            base = self._base(digest)
            write_atomic(base.with_name(base.name + suffix), stored)
        return BlobRef(digest, len(data))

    def put_file(self, path: Path) -> BlobRef:
        return self.put(path.read_bytes())

    def put_tree(self, folder: Path) -> BlobRef:
        """Store every file below `folder` and a manifest naming them; returns the manifest."""
        entries = []
        for path in sorted(p for p in folder.rglob("*") if p.is_file() and not p.is_symlink()):
            ref = self.put_file(path)
            entries.append({"path": path.relative_to(folder).as_posix(), "digest": ref.digest,
                            "size": ref.size, "executable": os.access(path, os.X_OK)})
        return self.put(tree_manifest(entries))

    # -- reading ----------------------------------------------------------------------------------

    def get(self, digest: str) -> bytes | None:
        """The verified bytes of a blob; None when missing or corrupt (then quarantined)."""
        path = self.path_of(digest)
        if path is None:
            return None
        try:
            raw = path.read_bytes()
            data = _decompress(raw) if path.suffix == ".zst" else raw
        except (OSError, ValueError):
            data = None
        if data is None or sha256_bytes(data) != digest:
            self.quarantine(path)
            return None
        return data

    def tree_entries(self, digest: str) -> list[dict[str, Any]] | None:
        data = self.get(digest)
        return None if data is None else parse_tree(data)

    def materialize(self, digest: str, dest: Path, *, executable: bool = False) -> bool:
        """Write a blob to `dest` atomically (writable); False when the blob is missing."""
        data = self.get(digest)
        if data is None:
            return False
        write_atomic(dest, data, readonly=False, durable=False)
        if executable:
            dest.chmod(0o755)
        return True

    # -- maintenance ------------------------------------------------------------------------------

    def quarantine(self, path: Path) -> None:
        self.quarantine_dir.mkdir(parents=True, exist_ok=True)
        target = self.quarantine_dir / f"{path.name}.{time.time_ns()}"
        try:
            os.replace(path, target)
        except FileNotFoundError:
            pass

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

    compressor = zstandard.ZstdCompressor(level=ZSTD_LEVEL)
    if len(data) > PROBE_FROM:
        middle = len(data) // 2
        probe = data[middle - PROBE_BYTES // 2:middle + PROBE_BYTES // 2]
        if len(compressor.compress(probe)) > len(probe) * 0.95:
            return data, ""
    packed = compressor.compress(data)
    return (packed, ".zst") if len(packed) <= len(data) * 0.9 else (data, "")


def _decompress(data: bytes) -> bytes:
    import zstandard

    try:
        return zstandard.ZstdDecompressor().decompress(data, max_output_size=1 << 34)
    except zstandard.ZstdError as exc:
        raise ValueError(str(exc)) from None
