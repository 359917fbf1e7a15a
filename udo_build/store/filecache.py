"""A stat cache of file digests, like git's index: a file's digest is kept with its identity
(device, inode, size, mtime_ns, ctime_ns) and trusted while that identity is unchanged, so
unchanged files are not hashed again.

It serves three readers: source inputs (`digest`), the store's own blobs (`blob_digest`: a
cached action's outputs are checked on every lookup, see `ActionCache`), and the files of an
output folder (`digest`, when a build checks that the folder holds what its manifest says).
The ctime is part of the identity because no user can set it: a file written through a hard
link and given back its old mtime is still noticed.

Kept in SQLite (standard library). It is an optimization only: when the database cannot be used
(locked too long, corrupt, read-only), files are simply hashed. A file modified within the last
two seconds is not cached (its mtime may not yet tell a later change apart).
"""

from __future__ import annotations

import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path

from .cas import blob_file_digest, sha256_file

RACY_SECONDS = 2.0
TABLE = "stat_digests"  # (the first table, `files`, lacked the ctime)

Ident = tuple[int, int, int, int, int]  # dev, ino, size, mtime_ns, ctime_ns


def identity(st: os.stat_result) -> Ident:
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


class FileDigests:
    def __init__(self, root: Path) -> None:
        self.path = root / "filecache.sqlite"
        self._db: sqlite3.Connection | None = None
        self._broken = False
        self.hashed = 0  # files actually read (for tests and stats)

    def _conn(self) -> sqlite3.Connection | None:
        if self._db is None and not self._broken:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                db = sqlite3.connect(self.path, timeout=5.0, isolation_level=None)
                db.execute("PRAGMA journal_mode=WAL")
                db.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (path TEXT PRIMARY KEY, dev INT,"
                           " ino INT, size INT, mtime_ns INT, ctime_ns INT, digest TEXT)")
                db.execute("DROP TABLE IF EXISTS files")
                self._db = db
            except (sqlite3.Error, OSError):
                self._broken = True
        return self._db

    def digest(self, path: Path, *, resolved: bool = False) -> tuple[str, int]:
        """(sha256, size) of a file, from the cache when its identity is unchanged; `resolved`
        when `path` is already absolute and free of symbolic links (saves resolving it)."""
        key = str(path) if resolved else str(Path(path).resolve())
        return self._cached(path, key, sha256_file)

    def blob_digest(self, path: Path) -> str | None:
        """The digest of the blob a store file holds (its uncompressed bytes, for .zst), or
        None when it cannot be read or decompressed; from the cache while unchanged."""
        def read(p: Path) -> tuple[str, int]:
            found = blob_file_digest(p)
            if found is None:
                raise ValueError("not a readable blob")
            return found, 0

        try:
            return self._cached(path, str(path.absolute()), read)[0]
        except (OSError, ValueError):
            return None

    def _cached(self, path: Path, key: str,
                hasher: Callable[[Path], tuple[str, int]]) -> tuple[str, int]:
        st = os.stat(path)
        ident = identity(st)
        db = self._conn()
        if db is not None:
            try:
                row = db.execute(f"SELECT dev, ino, size, mtime_ns, ctime_ns, digest FROM {TABLE}"
                                 " WHERE path = ?", (key,)).fetchone()
            except sqlite3.Error:
                row = None
            if row is not None and tuple(row[:5]) == ident:
                return row[5], st.st_size
        digest, _ = hasher(path)
        self.hashed += 1
        if db is not None and time.time() - st.st_mtime_ns / 1e9 > RACY_SECONDS:
            try:
                db.execute(f"INSERT OR REPLACE INTO {TABLE} VALUES (?, ?, ?, ?, ?, ?, ?)",
                           (key, *ident, digest))
            except sqlite3.Error:
                pass
        return digest, st.st_size

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
