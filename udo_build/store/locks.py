"""Locks of a store: one per action key (so each action runs once across processes), and a
store-wide readers-writer lock that only gc takes exclusively.

Both are advisory file locks the kernel releases when a process dies, so a killed build never
leaves a lock behind.

A store the process may not write (a read-only file system or mount, a store of another user)
is still locked when its `gc.lock` exists: flock needs only a descriptor open for reading, and it
locks the file itself, so a reader here and a gc through a writable mount of the same store
still exclude each other. When `gc.lock` does not exist and cannot be created, the store is read
without it: no build ever wrote to that store (each creates the file), and nothing can gc it
through this path; that is the one case read without a lock.
"""

from __future__ import annotations

import contextlib
import errno
import os
import time

TYPE_CHECKING = False  # typing's, without importing typing (see store/__init__.py)
if TYPE_CHECKING:
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
    lock = FileLock(str(folder / f"{key}.lock"))
    for attempt in range(3):
        folder.mkdir(parents=True, exist_ok=True)
        try:
            lock.acquire()
            break
        except FileNotFoundError:  # the folder removed meanwhile (the whole store, while a
            if attempt == 2:  # build runs): made again, as the store heals what it lost
                raise
    try:
        yield
    finally:
        lock.release()


@contextlib.contextmanager
def store_lock(root: str | os.PathLike[str], *, exclusive: bool, timeout: float | None = None
               ) -> Iterator[bool]:
    """Shared for builds, exclusive for gc; yields False if `timeout` passed without the lock."""
    if fcntl is None:  # pragma: no cover
        yield True
        return
    fd = _open_lock(os.path.join(root, "gc.lock"))
    if fd is None:
        yield True
        return
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


def _open_lock(path: str) -> int | None:
    """A descriptor of the lock file (made when missing); open for reading only on a store this
    process may not write; None when there is none and it cannot be made."""
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        return os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    except OSError as exc:
        if exc.errno not in (errno.EROFS, errno.EACCES, errno.EPERM):
            raise
    try:
        return os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
