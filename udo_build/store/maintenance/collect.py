"""`store gc`: expire action-cache entries, then mark and sweep the blobs.

Roots are the outputs the last build of every recipe references (its history): they, and the
entries of those actions, are never removed unless `include_referenced`. Entries that are not
roots expire when unused (their mtime: a cache hit touches it) for `older_than` days, and, with
`max_size`, least recently used first until the blobs the remaining entries and roots need fit.
Entries that are malformed or name missing blobs are misses anyway and always go. Then a blob is
kept when a remaining entry or a history needs it (tree manifests expand to their files); every
other blob is deleted. Temporary files older than an hour and lock files of keys without an entry
go too; with `older_than`, so do quarantined files and `checked/` markers older than that.

Without options gc removes only what is unreachable. It never deletes anything outside the store:
temporary files are looked for in the store's own folders only, and a file whose folder is
reached through a symbolic link is left alone (and reported). An output folder cannot be inside
the store (a build refuses it). Entries are removed before blobs, so a gc
killed half-way leaves a consistent store. It runs under the exclusive store lock (a dry run
shares it), so no build runs meanwhile.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...atomic import is_tmp
from .. import Store
from ..cas import _valid_digest
from .scan import (
    Entry,
    Trees,
    blob_files,
    files_below,
    lock_files,
    locked,
    quarantine_time,
    scan_entries,
    scan_histories,
    temporary_files,
)

DAY = 86400.0
TMP_AGE = 3600.0  # seconds
CATEGORIES = ("entries", "blobs", "temporary_files", "lock_files", "quarantined", "checked")


@dataclass(frozen=True)
class GcOptions:
    older_than: float | None = None  # days since an entry's last use
    max_size: int | None = None  # bytes of blobs (on disk) to fit in
    include_referenced: bool = False  # the last builds' outputs may go too
    dry_run: bool = False
    wait: float = 30.0  # seconds to wait for running builds


@dataclass
class GcReport:
    dry_run: bool
    max_size: int | None = None
    removed: dict[str, list[int]] = field(
        default_factory=lambda: {c: [0, 0] for c in CATEGORIES})  # category -> [count, bytes]
    invalid_entries: int = 0  # malformed or dangling (counted among the removed entries)
    kept_blobs: int = 0
    kept_bytes: int = 0
    kept_entries: int = 0
    referenced_entries: int = 0
    errors: list[str] = field(default_factory=list)

    @property
    def fits(self) -> bool:
        return self.max_size is None or self.kept_bytes <= self.max_size

    def to_json(self) -> dict[str, Any]:
        return {"dry_run": self.dry_run,
                "removed": {c: {"count": n, "bytes": b} for c, (n, b) in self.removed.items()},
                "invalid_entries": self.invalid_entries,
                "kept": {"blobs": self.kept_blobs, "bytes": self.kept_bytes,
                         "entries": self.kept_entries,
                         "referenced_entries": self.referenced_entries},
                "max_size": self.max_size, "fits": self.fits, "errors": self.errors}


def gc(store: Store, options: GcOptions, now: float | None = None) -> GcReport:
    now = time.time() if now is None else now
    with locked(store, exclusive=not options.dry_run, wait=options.wait):
        return _Collector(store, options, now).run()


class _Collector:
    def __init__(self, store: Store, options: GcOptions, now: float) -> None:
        self.store = store
        self.options = options
        self.now = now
        self.trees = Trees(store)
        self.blobs = blob_files(store)
        self.needs: dict[str, set[str]] = {}
        self.report = GcReport(options.dry_run, options.max_size)
        self.root = store.root.resolve()

    def run(self) -> GcReport:
        histories = [h for h in scan_histories(self.store) if h.doc is not None]
        referenced = set().union(*(h.keys() for h in histories))
        roots: set[str] = set()
        if not self.options.include_referenced:
            for h in histories:
                for digest, kind in h.outputs():
                    roots |= self.trees.closure(digest, kind)[0]
        live, dead = self._split(scan_entries(self.store))
        expired = self._expire(live, referenced, roots)
        kept = [e for e in live if e.key not in expired]
        self.report.invalid_entries = len(dead)
        for entry in dead + [e for e in live if e.key in expired]:
            self._remove("entries", entry.path)
        keep = roots.union(*(self.needs[e.key] for e in kept))
        self._sweep(keep)
        self._other_files({e.key for e in kept})
        self.report.kept_entries = len(kept)
        self.report.referenced_entries = sum(e.key in referenced for e in kept)
        return self.report

    def _split(self, entries: list[Entry]) -> tuple[list[Entry], list[Entry]]:
        """(entries whose blobs are all stored, entries that are malformed or dangling)."""
        live, dead = [], []
        for entry in entries:
            needs, whole = set(), entry.result is not None
            for out in entry.result.outputs.values() if entry.result else ():
                digests, readable = self.trees.closure(out.digest, out.type)
                needs |= digests
                whole = whole and readable
            self.needs[entry.key] = needs
            (live if whole and needs <= self.blobs.keys() else dead).append(entry)
        return live, dead

    def _expire(self, live: list[Entry], referenced: set[str], roots: set[str]) -> set[str]:
        opts = self.options
        candidates = [e for e in live if opts.include_referenced or e.key not in referenced]
        expired: set[str] = set()
        if opts.older_than is not None:
            cutoff = self.now - opts.older_than * DAY
            expired = {e.key for e in candidates if e.mtime < cutoff}
        if opts.max_size is not None:
            expired |= self._lru(live, candidates, expired, roots, opts.max_size)
        return expired

    def _lru(self, live: list[Entry], candidates: list[Entry], expired: set[str],
             roots: set[str], max_size: int) -> set[str]:
        """The least recently used candidates whose removal makes the kept blobs fit."""
        count = Counter(roots)
        for entry in live:
            if entry.key not in expired:
                count.update(self.needs[entry.key])
        size = sum(self._bytes(d) for d in count)
        more: set[str] = set()
        for entry in sorted(candidates, key=lambda e: (e.mtime, e.key)):
            if size <= max_size:
                break
            if entry.key in expired:
                continue
            more.add(entry.key)
            for digest in self.needs[entry.key]:
                count[digest] -= 1
                size -= self._bytes(digest) if count[digest] == 0 else 0
        return more

    def _inside(self, path: Path) -> bool:
        """Whether `path` lies in the store itself: no folder between the store's root and it
        is a symbolic link (gc never deletes anything outside the store)."""
        try:
            below = path.parent.relative_to(self.store.root)
            return path.parent.resolve(strict=True) == self.root / below
        except (ValueError, OSError):
            return False

    def _bytes(self, digest: str) -> int:
        return sum(size for _, size in self.blobs.get(digest, ()))

    def _sweep(self, keep: set[str]) -> None:
        for digest, files in self.blobs.items():
            if digest in keep:
                self.report.kept_blobs += len(files)
                self.report.kept_bytes += sum(size for _, size in files)
                continue
            for path, size in files:
                self._remove("blobs", path, size)

    def _other_files(self, keys: set[str]) -> None:
        for path, _age in temporary_files(self.store.root, self.now, TMP_AGE):
            self._remove("temporary_files", path)
        for key, path in lock_files(self.store):
            if _valid_digest(key) and key not in keys:
                self._remove("lock_files", path)
        if self.options.older_than is None:
            return
        cutoff = self.now - self.options.older_than * DAY
        for path in files_below(self.store.cas.quarantine_dir):
            if quarantine_time(path) < cutoff:
                self._remove("quarantined", path)
        for path in files_below(self.store.root / "checked"):
            if not is_tmp(path) and path.lstat().st_mtime < cutoff:
                self._remove("checked", path)

    def _remove(self, category: str, path: Path, size: int | None = None) -> None:
        if not self._inside(path):
            self.report.errors.append(f"{path}: not removed: its folder is not the store's own "
                                      "(a symbolic link leads elsewhere)")
            return
        try:
            size = path.lstat().st_size if size is None else size
            if not self.options.dry_run:
                path.unlink()
        except FileNotFoundError:
            return
        except OSError as exc:
            self.report.errors.append(f"{path}: {exc.strerror}")
            return
        row = self.report.removed[category]
        row[0] += 1
        row[1] += size
