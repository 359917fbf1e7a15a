"""`store stats` and `store ls`: what a store holds, counted and listed."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from .. import Store
from ..counters import read_counters
from .scan import (
    Trees,
    blob_files,
    files_below,
    lock_files,
    logical_size,
    scan_entries,
    scan_histories,
    temporary_files,
)

TMP_AGE = 60.0  # seconds: as `store verify`, younger temporary files may be running writes


@dataclass
class Stats:
    blobs: int = 0
    disk_bytes: int = 0
    compressed: int = 0
    logical_bytes: int = 0  # of the blobs whose uncompressed size is known
    logical_unknown: int = 0
    entries: int = 0
    by_kind: dict[str, int] = field(default_factory=dict)
    malformed_entries: int = 0
    recipes: list[dict[str, Any]] = field(default_factory=list)
    unreadable_histories: int = 0
    quarantined: int = 0
    quarantine_bytes: int = 0
    stale_temporary: int = 0
    lock_files: int = 0
    cache: dict[str, Any] = field(default_factory=dict)  # the builds' counters (stats.json)

    def to_json(self) -> dict[str, Any]:
        return {
            "blobs": {"count": self.blobs, "disk_bytes": self.disk_bytes,
                      "compressed": self.compressed, "logical_bytes": self.logical_bytes,
                      "logical_unknown": self.logical_unknown},
            "action_cache": {"entries": self.entries, "by_kind": self.by_kind,
                             "malformed": self.malformed_entries},
            "recipes": self.recipes, "unreadable_histories": self.unreadable_histories,
            "quarantine": {"count": self.quarantined, "bytes": self.quarantine_bytes},
            "stale_temporary_files": self.stale_temporary, "lock_files": self.lock_files,
            "cache": self.cache,
        }


def stats(store: Store, now: float | None = None) -> Stats:
    now = time.time() if now is None else now
    st = Stats()
    for files in blob_files(store).values():
        for path, disk in files:
            st.blobs += 1
            st.disk_bytes += disk
            st.compressed += path.suffix == ".zst"
            size = logical_size(path, disk)
            st.logical_bytes += size or 0
            st.logical_unknown += size is None
    for entry in scan_entries(store):
        if entry.result is None:
            st.malformed_entries += 1
            continue
        st.entries += 1
        st.by_kind[entry.result.kind] = st.by_kind.get(entry.result.kind, 0) + 1
    st.by_kind = dict(sorted(st.by_kind.items()))
    for h in scan_histories(store):
        if h.doc is None:
            st.unreadable_histories += 1
            continue
        st.recipes.append({"name": h.name, "recipe": h.doc.get("recipe"), "history": str(h.path),
                           "updated": h.doc.get("updated"), "actions": len(h.actions())})
    for path in files_below(store.cas.quarantine_dir):
        st.quarantined += 1
        st.quarantine_bytes += path.lstat().st_size
    st.stale_temporary = sum(1 for _ in temporary_files(store.root, now, TMP_AGE))
    st.lock_files = sum(1 for _ in lock_files(store))
    counters, since = read_counters(store.root)
    st.cache = {**counters.to_json(), "since": since}
    return st


@dataclass(frozen=True)
class Listed:
    """An action-cache entry for `store ls`; output sizes are of the content (a tree's files)."""

    key: str
    kind: str
    description: str
    outputs: dict[str, dict[str, Any]]  # name -> {"digest", "type", "size" (None: unknown)}
    last_used: float
    referenced: bool  # by the last build of a recipe

    @property
    def size(self) -> int:
        return sum(o["size"] or 0 for o in self.outputs.values())

    def to_json(self) -> dict[str, Any]:
        return {"key": self.key, "kind": self.kind, "description": self.description,
                "outputs": self.outputs, "size": self.size, "last_used": self.last_used,
                "referenced": self.referenced}


def list_entries(store: Store, kind: str | None = None) -> tuple[list[Listed], int, list[str]]:
    """(the well-formed entries of `kind` or all, most recently used first; the number of
    malformed ones; every kind present)."""
    referenced = set().union(*(h.keys() for h in scan_histories(store) if h.doc is not None))
    trees = Trees(store)
    listed, malformed, kinds = [], 0, set()
    for entry in scan_entries(store):
        result = entry.result
        if result is None:
            malformed += 1
            continue
        kinds.add(result.kind)
        if kind is not None and result.kind != kind:
            continue
        outputs = {}
        for name, out in sorted(result.outputs.items()):
            files = trees.entries(out.digest) if out.type == "tree" else None
            size = sum(int(e.get("size", 0)) for e in files) if files is not None else (
                out.size if out.type == "blob" else None)
            outputs[name] = {"digest": out.digest, "type": out.type, "size": size}
        listed.append(Listed(entry.key, result.kind, result.description, outputs, entry.mtime,
                             entry.key in referenced))
    listed.sort(key=lambda e: (-e.last_used, e.key))
    return listed, malformed, sorted(kinds)
