"""Reading a store without side effects: blob files and their digests, tree manifests, action
cache entries and build histories as found on disk, temporary and stray files, and the lock.

Nothing here uses `Cas.get`, which quarantines as a side effect: blobs are read and hashed here.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...atomic import TMP_PREFIX, is_tmp
from ...errors import UserError
from .. import Store
from ..ac import ActionResult, unsafe_publish
from ..cas import _decompress, _valid_digest, parse_tree
from ..history import history_files, read_history
from ..locks import store_lock


def logical_size(path: Path, disk: int) -> int | None:
    """The uncompressed size of a blob file from its zstd frame header (None when unknown)."""
    if path.suffix != ".zst":
        return disk
    import zstandard

    try:
        with open(path, "rb") as fh:
            size = zstandard.frame_content_size(fh.read(18))
    except (OSError, zstandard.ZstdError):
        return None
    return size if size >= 0 else None


class Trees:
    """Tree manifests by digest, read once and verified (None: missing, corrupt, not a tree)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self._seen: dict[str, list[dict[str, Any]] | None] = {}

    def entries(self, digest: str) -> list[dict[str, Any]] | None:
        if digest not in self._seen:
            self._seen[digest] = self._read(digest)
        return self._seen[digest]

    def _read(self, digest: str) -> list[dict[str, Any]] | None:
        path = self.store.cas.path_of(digest)
        if path is None:
            return None
        try:
            data = path.read_bytes()
            data = _decompress(data) if path.suffix == ".zst" else data
        except (OSError, ValueError):
            return None
        ok = hashlib.sha256(data).hexdigest() == digest
        return parse_tree(data) if ok else None

    def closure(self, digest: str, kind: str) -> tuple[set[str], bool]:
        """(the blobs an output needs, whether its tree manifest could be read)."""
        if kind != "tree":
            return {digest}, True
        entries = self.entries(digest)
        return {digest, *(e["digest"] for e in entries or ())}, entries is not None


@dataclass(frozen=True)
class Entry:
    """An action-cache entry as found on disk; `result` None when malformed (see `problem`)."""

    key: str
    path: Path
    result: ActionResult | None
    mtime: float
    size: int
    problem: str = ""


def scan_entries(store: Store) -> list[Entry]:
    found = []
    for key, path in store.ac.iter_entries():
        try:
            st = path.stat()
            data = path.read_bytes()
        except OSError as exc:
            found.append(Entry(key, path, None, 0.0, 0, f"cannot be read: {exc.strerror}"))
            continue
        result, problem = _parse_entry(key, data)
        found.append(Entry(key, path, result, st.st_mtime, st.st_size, problem))
    return found


def _parse_entry(key: str, data: bytes) -> tuple[ActionResult | None, str]:
    if not _valid_digest(key):
        return None, "its name is not an action key"
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError):
        return None, "not JSON (truncated or overwritten)"
    result = ActionResult.from_json(doc)
    if result is None:
        return None, unsafe_publish(doc) or "not an action result (wrong schema, version or shape)"
    if result.key != key:
        return None, f"holds the result of another key ({result.key[:12]})"
    return result, ""


@dataclass(frozen=True)
class History:
    """The last build of a recipe; `doc` None when the file is unreadable (see `problem`)."""

    path: Path
    doc: dict[str, Any] | None
    problem: str = ""

    @property
    def name(self) -> str:
        return str((self.doc or {}).get("name") or self.path.stem)

    def actions(self) -> list[dict[str, Any]]:
        acts = (self.doc or {}).get("actions", {})
        return [a for a in acts.values() if isinstance(a, dict)]

    def keys(self) -> set[str]:
        return {str(a.get("key")) for a in self.actions()}

    def outputs(self) -> Iterator[tuple[str, str]]:
        """(digest, type) of every output of the last build."""
        for action in self.actions():
            outs = action.get("outputs")
            for out in (outs.values() if isinstance(outs, dict) else ()):
                if isinstance(out, dict) and _valid_digest(str(out.get("digest"))):
                    yield out["digest"], str(out.get("type", "blob"))


def scan_histories(store: Store) -> list[History]:
    found = []
    for path in history_files(store.root):
        doc, problem = read_history(path)
        found.append(History(path, doc) if doc is not None else History(path, None, problem))
    return found


LAYOUT_FOLDERS = ("cas", "ac", "history", "locks", "checked", "quarantine")


def temporary_files(root: Path, now: float, min_age: float) -> Iterator[tuple[Path, float]]:
    """(path, age in seconds) of the temporary siblings older than `min_age` in the store's
    own folders (the root and its layout folders; nothing else a user may have put there)."""
    walks = [(str(root), [], sorted(p.name for p in root.glob(f"{TMP_PREFIX}*")))]
    for top in LAYOUT_FOLDERS:
        if (root / top).is_dir() and not (root / top).is_symlink():
            walks += os.walk(root / top)
    for folder, _dirs, files in walks:
        for name in files:
            if name.startswith(TMP_PREFIX):
                path = Path(folder) / name
                with contextlib.suppress(OSError):
                    age = now - path.lstat().st_mtime
                    if age > min_age:
                        yield path, age


def lock_files(store: Store) -> Iterator[tuple[str, Path]]:
    folder = store.root / "locks"
    for path in sorted(folder.glob("*.lock")) if folder.is_dir() else ():
        yield path.stem, path


@contextlib.contextmanager
def locked(store: Store, *, exclusive: bool, wait: float) -> Iterator[None]:
    """The store lock (exclusive: no build runs), or a UserError after `wait` seconds. A store
    the lock file cannot be opened in (read-only) is read without the shared lock."""
    with contextlib.ExitStack() as stack:
        try:
            got = stack.enter_context(store_lock(store.root, exclusive=exclusive, timeout=wait))
        except OSError as exc:
            if exclusive:
                raise UserError(f"the store cannot be locked: {exc.strerror}",
                                file=store.root / "gc.lock") from None
            got = True  # nobody can write it either
        if not got:
            what = "a build is running" if exclusive else "a garbage collection is running"
            raise UserError(f"{what} on this store", file=store.root,
                            hint=f"waited {wait:g} s; try again when it is done (--wait SECONDS "
                                 "to wait longer)")
        yield


def blob_files(store: Store) -> dict[str, list[tuple[Path, int]]]:
    """digest -> the files holding it (raw and/or .zst) with their sizes on disk."""
    found: dict[str, list[tuple[Path, int]]] = {}
    for digest, path in store.cas.iter_blobs():
        if path.parent.name != digest[:2]:
            continue  # misplaced: `unexpected_files` reports it
        with contextlib.suppress(OSError):
            found.setdefault(digest, []).append((path, path.stat().st_size))
    return found


_BLOB_NAME = re.compile(r"([0-9a-f]{64})(\.zst)?")
_ENTRY_NAME = re.compile(r"([0-9a-f]{64})\.json")


def unexpected_files(store: Store) -> Iterator[Path]:
    """Files under cas/ and ac/ whose names are outside the layout (or in the wrong fan-out)."""
    for top, pattern in (("cas", _BLOB_NAME), ("ac", _ENTRY_NAME)):
        for folder, _dirs, files in os.walk(store.root / top):
            for name in files:
                path = Path(folder) / name
                match = pattern.fullmatch(name)
                if is_tmp(path):
                    continue
                if not match or path.parent.name != match[1][:2] or path.parent.parent.name != top:
                    yield path


def quarantine_time(path: Path) -> float:
    """When a file was quarantined (its name ends with `.<time_ns>`), else its mtime."""
    stamp = path.name.rsplit(".", 1)[-1]
    if stamp.isdigit():
        return int(stamp) / 1e9
    return path.lstat().st_mtime


def files_below(folder: Path) -> Iterator[Path]:
    for sub, _dirs, files in os.walk(folder):
        for name in files:
            yield Path(sub) / name


def parse_size(text: str) -> int:
    """Bytes from '500M', '2G', '1.5GiB', '100000 bytes', '10kB' (K/M/G/T and KiB.. are powers
    of 1024, kB/KB/MB/GB/TB of 1000); a ValueError names what is accepted."""
    match = re.fullmatch(r"\s*([0-9]+(?:\.[0-9]*)?)\s*([a-zA-Z]*)\s*", text)
    unit = match[2].lower() if match else ""
    units = {"": 1, "b": 1, "byte": 1, "bytes": 1}
    for i, letter in enumerate("kmgt", start=1):
        units.update({letter: 1024 ** i, f"{letter}ib": 1024 ** i, f"{letter}b": 1000 ** i})
    if match is None or unit not in units:
        raise ValueError(f"not a size: {text!r} (examples: 500M, 2G, 1.5GiB, 100000 bytes)")
    return int(float(match[1]) * units[unit])
