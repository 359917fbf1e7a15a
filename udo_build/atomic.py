"""The one atomic write path: a temporary sibling, fsync, rename, read-only after.

A reader never sees a partial file: either the old content (or nothing) or the whole new one.
Every writer of udo-build goes through here: `write_atomic` for bytes at hand, `AtomicFile` for
bytes that arrive in pieces (a download), `link_atomic` for a hard link. Temporary siblings are
named `.tmp-*`; a crash leaves at most such a file, which `store verify` and `store gc` remove.
A file is created no more permissive than its final mode: a private key (0600) is never
readable by others, not even while it is written.
An OSError from here names the file being written (not its temporary sibling, and also when
the call that failed names none, as a write or fsync on a full disk), so that the user is told
which path is full, read-only or not theirs (see `errors.environment_problem`).
"""

from __future__ import annotations

import os
from pathlib import Path
from types import TracebackType

from .errors import with_path

TMP_PREFIX = ".tmp-"
READ_ONLY = 0o444


def tmp_sibling(path: Path) -> Path:
    return path.with_name(f"{TMP_PREFIX}{os.urandom(8).hex()}-{path.name}")


def is_tmp(path: Path) -> bool:
    return path.name.startswith(TMP_PREFIX)


class AtomicFile:
    """A file written at a temporary sibling of `path` and renamed there by `commit` (fsynced
    first when `durable`), with the permission bits `mode` (None: as created, 0644 less the
    umask). `abort` (or leaving a `with` block by an exception) leaves nothing behind."""

    def __init__(self, path: Path, *, mode: int | None = READ_ONLY, durable: bool = True) -> None:
        self.path = path
        self.mode = mode
        self.durable = durable
        self.tmp = tmp_sibling(path)
        self.size = 0  # bytes written so far
        create = 0o644 if mode is None else 0o644 & mode
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._fd: int | None = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL,
                                           create)
        except OSError as exc:
            raise _named(exc, path) from None

    def fileno(self) -> int:
        if self._fd is None:
            raise ValueError(f"{self.path}: the atomic file is closed")
        return self._fd

    def write(self, data: bytes | memoryview) -> int:
        view = memoryview(data)
        count = view.nbytes
        try:
            while view:
                view = view[os.write(self.fileno(), view):]
        except OSError as exc:
            raise with_path(exc, self.path) from None
        self.size += count
        return count

    def commit(self) -> None:
        """Make the file visible at its path, whole."""
        try:
            if self.durable:
                os.fsync(self.fileno())
            os.close(self.fileno())
            self._fd = None
            if self.mode is not None:
                os.chmod(self.tmp, self.mode)
            os.replace(self.tmp, self.path)
        except OSError as exc:
            self.abort()
            raise _named(exc, self.path) from None
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
        self.tmp.unlink(missing_ok=True)

    def __enter__(self) -> AtomicFile:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if kind is not None:
            self.abort()
        elif self._fd is not None:  # not committed or aborted inside the block
            self.commit()


def write_atomic(path: Path, data: bytes, *, readonly: bool = True, durable: bool = True,
                 mode: int | None = None) -> None:
    """Write `data` to `path` so that readers see all of it or none of it; read-only, or
    writable (`readonly=False`), or with the permission bits `mode`."""
    final = mode if mode is not None else READ_ONLY if readonly else None
    with AtomicFile(path, mode=final, durable=durable) as out:
        out.write(data)


def _named(exc: OSError, path: Path) -> OSError:
    """`exc` naming `path` when it names a temporary sibling of it (or nothing)."""
    if exc.filename is not None and not is_tmp(Path(os.fsdecode(exc.filename))):
        return exc
    return with_path(OSError(exc.errno, exc.strerror), path)


def link_atomic(source: Path, path: Path) -> bool:
    """Hard-link `source` at `path`, replacing what is there at once; False (nothing changed)
    when the file system does not allow the link (another device, a foreign owner, too many
    links)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = tmp_sibling(path)
    try:
        os.link(source, tmp)
    except OSError:
        return False
    try:
        os.replace(tmp, path)
    finally:
        # rename(2) does nothing when both names are links to one file: the temporary name
        # stays, so it is removed here (and after a failure)
        tmp.unlink(missing_ok=True)
    return True
