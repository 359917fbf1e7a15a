"""Cache counters: what the builds on a store found where, and what moved to and from a remote.

Each build counts in memory (`Counters`) and adds its counts to `store/stats.json` when it ends,
under a lock (concurrent builds add up) and atomically (a reader sees the old or the new file).
`udo-build store stats` shows the totals. The file is informational: when it cannot be read it
starts again from zero, and it is never a reason for a build to fail.
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from _thread import allocate_lock  # threading.Lock, without importing threading

from ..atomic import write_atomic
from ..errors import environment_problem

TYPE_CHECKING = False  # typing's, without importing typing (see store/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Iterator
    from pathlib import Path
    from typing import Any

SCHEMA = "udo-build/cache-stats"
VERSION = 1
FILE = "stats.json"


FIELDS = (
    "builds", "local_hits", "local_misses", "remote_hits", "remote_misses",
    "remote_incomplete",  # an entry whose blobs the remote lacks (counted as a miss too)
    "bytes_downloaded", "blobs_downloaded", "bytes_uploaded", "blobs_uploaded",
    "entries_uploaded",
    "blobs_proven",  # blobs proven to be in the remote, not read (--download outputs|minimal)
    "remote_errors",  # failed requests (after their retries)
    "remote_disabled",  # times the remote was disabled (circuit breaker) during a build
)


class Counters:
    """Counts of one build (or the totals of a store); `rejected`: why -> entries (or blobs)
    refused. Safe to update from several threads (uploads run in the background). A plain
    class: a dataclass would cost a no-op build a millisecond to define."""

    __slots__ = (*FIELDS, "rejected", "lock")

    def __init__(self) -> None:
        for name in FIELDS:
            setattr(self, name, 0)
        self.rejected: dict[str, int] = {}
        self.lock = allocate_lock()

    def add(self, **counts: int) -> None:
        with self.lock:
            for name, n in counts.items():
                setattr(self, name, getattr(self, name) + n)

    def reject(self, why: str) -> None:
        with self.lock:
            self.rejected[why] = self.rejected.get(why, 0) + 1

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {name: getattr(self, name) for name in FIELDS}
        out["rejected"] = dict(sorted(self.rejected.items()))
        out["rejected_total"] = sum(self.rejected.values())
        return out

    @staticmethod
    def from_json(doc: Any) -> Counters:
        counters = Counters()
        if not isinstance(doc, dict):
            return counters
        for name in FIELDS:
            if isinstance(doc.get(name), int):
                setattr(counters, name, doc[name])
        rejected = doc.get("rejected")
        if isinstance(rejected, dict):
            counters.rejected = {str(k): v for k, v in rejected.items() if isinstance(v, int)}
        return counters

    def merged(self, other: Counters) -> Counters:
        total = Counters.from_json(self.to_json())
        total.add(**{name: getattr(other, name) for name in FIELDS})
        for why, n in other.rejected.items():
            total.rejected[why] = total.rejected.get(why, 0) + n
        return total

    @property
    def empty(self) -> bool:
        return not any(getattr(self, name) for name in FIELDS) and not self.rejected


def read_counters(root: str | Path) -> tuple[Counters, float | None]:
    """(the totals of a store, since when it counts); zeros when there is no readable file."""
    try:
        doc = json.loads(_read(os.path.join(root, FILE)))
    except (OSError, ValueError, UnicodeDecodeError):
        return Counters(), None
    if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
        return Counters(), None
    since = doc.get("since")
    return Counters.from_json(doc.get("counters")), since if isinstance(since, float) else None


def _read(path: str) -> bytes:
    with open(path, "rb") as f:
        return f.read()


def save_counters(root: str | Path, counts: Counters) -> None:
    """Add a build's counts to the store's totals (best effort: errors are ignored, except a
    fault of the machine, a full or read-only store: that the caller tells)."""
    if counts.empty:
        return
    try:
        with _locked(root):
            total, since = read_counters(root)
            doc = {"schema": SCHEMA, "version": VERSION, "since": since or time.time(),
                   "updated": time.time(), "counters": total.merged(counts).to_json()}
            write_atomic(os.path.join(root, FILE), json.dumps(doc, indent=1).encode(),
                         readonly=False, durable=False)
    except OSError as exc:
        if environment_problem(exc) is not None:
            raise


@contextlib.contextmanager
def _locked(root: str | Path) -> Iterator[None]:
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX: last writer wins
        yield
        return
    fd = os.open(os.path.join(root, "stats.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)
