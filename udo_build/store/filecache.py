"""A stat cache of file digests, like git's index: a file's digest is kept with its identity
(device, inode, size, mtime_ns, ctime_ns) and trusted while that identity is unchanged, so
unchanged files are not hashed again.

It serves three readers: source inputs (`digest`, by the digest kind the plan asks for), the
store's own blobs (`blob_digest`: a cached action's outputs are checked on every lookup, see
`ActionCache`), and the files of an output folder (`digest`, when a build checks that the folder
holds what its manifest says). Digests are kept by (path, kind):

    content   sha256 of the file's bytes
    python    sha256 of the normalized code of a Python module (`python_code_digest`): its
              syntax tree without docstrings, comments or positions, so that editing those
              does not change it; a file that does not parse has its content digest
    blob      the digest of the blob a store file holds
The ctime is part of the identity because no user can set it: a file written through a hard
link and given back its old mtime is still noticed.

Kept in SQLite (standard library). It is an optimization only: when the database cannot be used
(locked too long, corrupt, read-only), files are simply hashed. So a row is not synced to disk
when it is written (WAL with synchronous=NORMAL: still never corrupt, and a row a power cut
loses is a file hashed again), which saves a build an fsync per file it hashes (milliseconds
each: a fresh checkout digests every source, and the engine waits for some of them). A file
modified within the last two seconds is not cached (its mtime may not yet tell a later change
apart).
"""

from __future__ import annotations

import ast
import hashlib
import os
import sqlite3
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .cas import blob_file_digest, sha256_file

RACY_SECONDS = 2.0
TABLE = "stat_digests_by_kind"  # (`files` lacked the ctime, `stat_digests` the digest kind)
OLD_TABLES = ("files", "stat_digests")
PYTHON_CODE_SCHEMA = b"udo-build/python-code 1\n"

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
                db.execute("PRAGMA synchronous=NORMAL")  # see the module's docstring
                db.execute(f"CREATE TABLE IF NOT EXISTS {TABLE} (path TEXT, kind TEXT, dev INT,"
                           " ino INT, size INT, mtime_ns INT, ctime_ns INT, digest TEXT,"
                           " PRIMARY KEY (path, kind))")
                for old in OLD_TABLES:
                    db.execute(f"DROP TABLE IF EXISTS {old}")
                self._db = db
            except (sqlite3.Error, OSError):
                self._broken = True
        return self._db

    def digest(self, path: Path, *, resolved: bool = False,
               kind: str = "content") -> tuple[str, int]:
        """(digest, size) of a file by a digest kind (`DIGEST_KINDS`), from the cache when its
        identity is unchanged; `resolved` when `path` is already absolute and free of symbolic
        links (saves resolving it)."""
        if kind not in DIGEST_KINDS:
            raise ValueError(f"unknown digest kind {kind!r} (known: {', '.join(DIGEST_KINDS)})")
        key = str(path) if resolved else str(Path(path).resolve())
        return self._cached(path, key, kind, DIGEST_KINDS[kind])

    def blob_digest(self, path: str) -> str | None:
        """The digest of the blob a store file holds (its uncompressed bytes, for .zst), or
        None when it cannot be read or decompressed; from the cache while unchanged. `path`
        is absolute and normalized (`Cas.find`): it is the key."""
        def read(p: str) -> tuple[str, int]:
            found = blob_file_digest(Path(p))
            if found is None:
                raise ValueError("not a readable blob")
            return found, 0

        try:
            return self._cached(path, path, "blob", read)[0]
        except (OSError, ValueError):
            return None

    def _cached(self, path: Any, key: str, kind: str,
                hasher: Callable[[Any], tuple[str, int]]) -> tuple[str, int]:
        st = os.stat(path)
        found = self.known(key, kind, st)
        if found is not None:
            return found, st.st_size
        digest, _ = hasher(path)
        self.hashed += 1
        self.remember(key, kind, st, digest)
        return digest, st.st_size

    def known(self, key: str, kind: str, st: os.stat_result) -> str | None:
        """The digest kept for `key` (a resolved path) while its identity is `st`'s, else
        None. With `remember`, for a caller that stats and reads the file itself (an output
        folder, read through its open folders)."""
        db = self._conn()
        if db is None:
            return None
        try:
            row = db.execute(f"SELECT dev, ino, size, mtime_ns, ctime_ns, digest FROM {TABLE}"
                             " WHERE path = ? AND kind = ?", (key, kind)).fetchone()
        except (sqlite3.Error, UnicodeEncodeError):  # a name that is not UTF-8: not kept
            return None
        return row[5] if row is not None and tuple(row[:5]) == identity(st) else None

    def remember(self, key: str, kind: str, st: os.stat_result, digest: str) -> None:
        """Keep `digest` for `key` with the identity `st` (not within the racy window)."""
        db = self._conn()
        if db is not None and time.time() - st.st_mtime_ns / 1e9 > RACY_SECONDS:
            try:
                db.execute(f"INSERT OR REPLACE INTO {TABLE} VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                           (key, kind, *identity(st), digest))
            except (sqlite3.Error, UnicodeEncodeError):
                pass

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None


def python_code_digest(path: Path) -> tuple[str, int]:
    """(digest, size) of a Python module by its normalized code: sha256 of a schema tag and the
    `ast.dump` of its syntax tree with the docstrings of the module, its classes and functions
    removed (the dump has no comments and no positions). A file that does not parse, or is not
    UTF-8, is digested by its bytes (running it then reports the error). The dump's format is
    Python's: two Python versions may digest one file differently (their keys then differ)."""
    data = path.read_bytes()
    try:
        tree = ast.parse(data, str(path))
    except (SyntaxError, ValueError):
        return sha256_file(path)
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            node.body = _without_docstring(node.body)
    code = ast.dump(tree).encode()
    return hashlib.sha256(PYTHON_CODE_SCHEMA + code).hexdigest(), len(data)


def _without_docstring(body: list[ast.stmt]) -> list[ast.stmt]:
    first = body[0] if body else None
    if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) \
            and isinstance(first.value.value, str):
        return body[1:] or [ast.Pass()]
    return body


DIGEST_KINDS: dict[str, Callable[[Path], tuple[str, int]]] = {
    "content": sha256_file, "python": python_code_digest}
