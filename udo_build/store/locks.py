"""Locks of a store: one per action key (so each action runs once across processes), and a
store-wide readers-writer lock that only gc takes exclusively.

Both are advisory file locks the kernel releases when a process dies, so a killed build never
leaves a lock behind.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]


@contextlib.contextmanager
def action_lock(root: Path, key: str) -> Iterator[None]:
    """Held while an action runs: others building the same key wait, then reuse the result."""
    from filelock import FileLock

    folder = root / "locks"
    folder.mkdir(parents=True, exist_ok=True)
    with FileLock(str(folder / f"{key}.lock")):
        yield


@contextlib.contextmanager
def store_lock(root: Path, *, exclusive: bool, timeout: float | None = None) -> Iterator[bool]:
    """Shared for builds, exclusive for gc; yields False if `timeout` passed without the lock."""
    if fcntl is None:  # pragma: no cover
        yield True
        return
    root.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / "gc.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        mode = fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH
        deadline = None if timeout is None else time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, mode | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if deadline is not None and time.monotonic() >= deadline:
                    yield False
                    return
                time.sleep(0.05)
        try:
            yield True
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
