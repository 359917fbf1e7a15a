"""A cache of file digests keyed by (path, device, inode, size, mtime_ns), so that unchanged
inputs are not hashed again.

Kept in SQLite (standard library). It is an optimization only: when the database cannot be used
(locked too long, corrupt, read-only), files are simply hashed. A file modified within the last
two seconds is not cached (its mtime may not yet tell a later change apart).
"""

from __future__ import annotations

import os
import sqlite3
import time
from pathlib import Path

from .cas import sha256_file

RACY_SECONDS = 2.0


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
                db.execute("CREATE TABLE IF NOT EXISTS files (path TEXT PRIMARY KEY, dev INT,"
                           " ino INT, size INT, mtime_ns INT, digest TEXT)")
                self._db = db
            except sqlite3.Error:
                self._broken = True
        return self._db

    def digest(self, path: Path) -> tuple[str, int]:
        """(sha256, size) of a file, from the cache when its identity is unchanged."""
        st = os.stat(path)
        key = str(Path(path).resolve())
        ident = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)
        db = self._conn()
        if db is not None:
            try:
                row = db.execute("SELECT dev, ino, size, mtime_ns, digest FROM files WHERE "
                                 "path = ?", (key,)).fetchone()
            except sqlite3.Error:
                row = None
            if row is not None and tuple(row[:4]) == ident:
                return row[4], st.st_size
        digest, size = sha256_file(path)
        self.hashed += 1
        if db is not None and time.time() - st.st_mtime_ns / 1e9 > RACY_SECONDS:
            try:
                db.execute("INSERT OR REPLACE INTO files VALUES (?, ?, ?, ?, ?, ?)",
                           (key, *ident, digest))
            except sqlite3.Error:
                pass
        return digest, size

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
