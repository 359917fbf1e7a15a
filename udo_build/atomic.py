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

import contextlib
import errno
import os
import stat
from _thread import RLock  # threading.RLock (the C lock), without importing threading

from .errors import UserError, Vanished, with_path

TYPE_CHECKING = False  # typing's, without importing typing (see cli/__init__.py)
if TYPE_CHECKING:
    from pathlib import Path
    from types import TracebackType
    from typing import TypeVar

    PathT = TypeVar("PathT", str, os.PathLike[str])

TMP_PREFIX = ".tmp-"
READ_ONLY = 0o444
_CREATE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


def tmp_sibling(path: PathT) -> PathT:
    """A temporary sibling of `path`, of its type (os.path: a replayed no-op imports no
    pathlib, see cli/__init__.py)."""
    head, name = os.path.split(path)
    tmp = os.path.join(head, f"{TMP_PREFIX}{os.urandom(8).hex()}-{name}")
    return tmp if isinstance(path, str) else type(path)(tmp)  # type: ignore[call-arg]


def is_tmp(path: str | os.PathLike[str]) -> bool:
    return os.path.basename(path).startswith(TMP_PREFIX)


class AtomicFile:
    """A file written at a temporary sibling of `path` and renamed there by `commit` (fsynced
    first when `durable`), with the permission bits `mode` (None: as created, 0644 less the
    umask). `abort` (or leaving a `with` block by an exception) leaves nothing behind."""

    def __init__(self, path: str | os.PathLike[str], *, mode: int | None = READ_ONLY,
                 durable: bool = True,
                 dir_fd: int | None = None) -> None:
        self.path = path
        self.mode = mode
        self.durable = durable
        self.dir_fd = dir_fd  # given: `path` is named by its last part in that open folder
        self.tmp = tmp_sibling(path)
        self.size = 0  # bytes written so far
        create = 0o644 if mode is None else 0o644 & mode
        try:
            if dir_fd is None:
                os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
            self._fd: int | None = os.open(self._here(self.tmp), _CREATE, create, dir_fd=dir_fd)
        except OSError as exc:
            raise _named(exc, path) from None

    def _here(self, path: str | os.PathLike[str]) -> str | os.PathLike[str]:
        """`path` as the system calls take it: its name in the open folder, when there is one."""
        return path if self.dir_fd is None else os.path.basename(path)

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
            if self.mode is not None:
                os.fchmod(self.fileno(), self.mode)
            fd, self._fd = self.fileno(), None  # forgotten first: never closed twice
            os.close(fd)
            os.replace(self._here(self.tmp), self._here(self.path), src_dir_fd=self.dir_fd,
                       dst_dir_fd=self.dir_fd)
        except OSError as exc:
            self.abort()
            raise _named(exc, self.path) from None
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        fd, self._fd = self._fd, None
        if fd is not None:
            os.close(fd)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(self._here(self.tmp), dir_fd=self.dir_fd)

    def __enter__(self) -> AtomicFile:
        return self

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if kind is not None:
            self.abort()
        elif self._fd is not None:  # not committed or aborted inside the block
            self.commit()


def write_atomic(path: str | os.PathLike[str], data: bytes, *, readonly: bool = True,
                 durable: bool = True, mode: int | None = None, dir_fd: int | None = None
                 ) -> None:
    """Write `data` to `path` so that readers see all of it or none of it; read-only, or
    writable (`readonly=False`), or with the permission bits `mode`. With `dir_fd`, `path` is
    named by its last part in that open folder (see `Confined`)."""
    final = mode if mode is not None else READ_ONLY if readonly else None
    with AtomicFile(path, mode=final, durable=durable, dir_fd=dir_fd) as out:
        out.write(data)


def _named(exc: OSError, path: str | os.PathLike[str]) -> OSError:
    """`exc` naming `path` when it names a temporary sibling of it (or nothing); a missing
    folder or temporary file (made a moment before) is `Vanished`: removed by another
    process."""
    if isinstance(exc, FileNotFoundError):
        return Vanished(exc.errno, exc.strerror, os.path.dirname(os.fspath(path)) or ".")
    if exc.filename is not None and not is_tmp(os.fsdecode(exc.filename)):
        return exc
    return with_path(OSError(exc.errno, exc.strerror), path)


def link_atomic(source: Path, path: Path, *, dir_fd: int | None = None) -> bool:
    """Hard-link `source` at `path`, replacing what is there at once; False (nothing changed)
    when the file system does not allow the link (another device, a foreign owner, too many
    links). With `dir_fd`, `path` is named by its last part in that open folder."""
    if dir_fd is None:
        path.parent.mkdir(parents=True, exist_ok=True)
    here = path if dir_fd is None else path.name
    tmp = tmp_sibling(path) if dir_fd is None else tmp_sibling(path).name
    try:
        if dir_fd is None:
            os.link(source, tmp)
        else:
            os.link(source, tmp, dst_dir_fd=dir_fd)
    except OSError:
        return False
    try:
        os.replace(tmp, here, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    finally:
        # rename(2) does nothing when both names are links to one file: the temporary name
        # stays, so it is removed here (and after a failure)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp, dir_fd=dir_fd)
    return True


# -- writing below a folder through the folder itself ---------------------------------------------

_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def kind_of(mode: int) -> str:
    """What a directory entry is, in words."""
    for test, words in ((stat.S_ISREG, "a file"), (stat.S_ISDIR, "a folder"),
                        (stat.S_ISLNK, "a symbolic link"), (stat.S_ISFIFO, "a named pipe"),
                        (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return words
    return "a device"


class Confined:
    """A folder that udo-build writes, replaces and deletes in only through itself: each
    subfolder is opened from its parent's descriptor without following a symbolic link, and
    each file is written, renamed, linked or removed by its name in its open folder. A symbolic
    link or other foreign entry (a named pipe, a socket, a device) found where a folder or a
    file goes is never followed: with `heal` (the folder is the build's own) it is removed,
    noted in `replaced`, and its place used; else the write is refused (a UserError naming
    it). The folder itself is the user's choice, and is followed.

    A real folder where a file goes, or a file where a folder goes, is refused in both cases:
    it may hold the user's work."""

    def __init__(self, root: str | os.PathLike[str], *, heal: bool = False) -> None:
        self.path = root
        self.heal = heal
        self.replaced: list[tuple[str, str]] = []  # (entry, what it was) removed by `heal`
        try:
            os.makedirs(root, exist_ok=True)
            top = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        except (FileExistsError, NotADirectoryError):
            raise UserError("this is a file, not a folder", file=os.fspath(root),
                            hint="give a folder here (it is created when missing)") from None
        except OSError as exc:
            raise _named(exc, root) from None
        self._open: dict[str, int] = {"": top}
        self._lock = RLock()

    def at(self, rel: str) -> str:
        """The path of `rel` in the folder (as errors name it)."""
        return os.path.join(self.path, rel)

    def __enter__(self) -> Confined:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        with self._lock:
            while self._open:  # each descriptor forgotten before it is closed
                os.close(self._open.popitem()[1])

    # -- folders ----------------------------------------------------------------------------------

    def folder(self, rel: str, *, create: bool = True) -> int | None:
        """The open descriptor of the subfolder `rel` ("": the folder itself); None when it
        is missing (and not `create`d)."""
        with self._lock:  # the output folder is written by several threads
            fd = self._open.get(rel)
            if fd is not None:
                return fd
            parent, _, name = rel.rpartition("/")
            above = self.folder(parent, create=create)
            if above is None:
                return None
            fd = self._open_folder(above, rel, name, create)
            if fd is not None:
                self._open[rel] = fd  # kept open until `close` (an output folder has few)
            return fd

    def _open_folder(self, above: int, rel: str, name: str, create: bool) -> int | None:
        for _ in range(3):  # a folder made or an entry removed meanwhile: try again
            try:
                return os.open(name, _DIR, dir_fd=above)
            except FileNotFoundError:
                if not create:
                    return None
                with contextlib.suppress(FileExistsError):
                    os.mkdir(name, 0o777, dir_fd=above)
            except OSError as exc:
                if exc.errno not in (errno.ENOTDIR, errno.ELOOP):
                    raise _named(exc, self.at(rel)) from None
                if not self.foreign(above, rel, want="folder") and not create:
                    return None
        raise UserError("this folder keeps changing while udo-build writes in it",
                        file=self.at(rel), hint="stop the other program writing there")

    def foreign(self, above: int, rel: str, *, want: str) -> bool:
        """Check the entry `rel` (in the open folder `above`) before a `want` ("file" or
        "folder") is put there: True when it is missing or already one; a symbolic link, named
        pipe, socket or device is removed and noted (with `heal`) or refused; a file where a
        folder goes, or the reverse, is refused. False after removing one."""
        name = rel.rpartition("/")[2]
        try:
            st = os.stat(name, dir_fd=above, follow_symlinks=False)
        except FileNotFoundError:
            return True
        if stat.S_ISDIR(st.st_mode) if want == "folder" else stat.S_ISREG(st.st_mode):
            return True
        what = kind_of(st.st_mode)
        if not self.heal or stat.S_ISDIR(st.st_mode) or stat.S_ISREG(st.st_mode):
            raise UserError(f"{what} is where udo-build writes a {want}; it is not followed "
                            "or replaced", file=self.at(rel),
                            hint="remove it, or choose another folder")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=above)
        self.replaced.append((rel, what))
        return False

    # -- files ------------------------------------------------------------------------------------

    def place(self, rel: str) -> int:
        """The open folder the file `rel` goes in (made as needed), its place checked (see
        `foreign`); the file is then named by `PurePath(rel).name` there."""
        parts = rel.split("/")
        if "" in parts or "." in parts or ".." in parts:
            raise UserError("this is not a file's name inside the folder", file=self.at(rel),
                            hint="name a file, not a folder")
        fd = self.folder(rel.rpartition("/")[0])
        assert fd is not None
        self.foreign(fd, rel, want="file")
        return fd

    def write(self, rel: str, data: bytes, *, mode: int | None = None,
              durable: bool = False) -> None:
        """Write the file `rel` atomically (`mode`: its permission bits, None: as created)."""
        write_atomic(self.at(rel), data, mode=mode, readonly=False, durable=durable,
                     dir_fd=self.place(rel))

    def lstat(self, rel: str) -> os.stat_result | None:
        """The entry `rel` (not followed), or None when it or a folder above it is missing;
        a foreign entry above it is handled as `foreign` says."""
        parent, _, name = rel.rpartition("/")
        fd = self.folder(parent, create=False)
        if fd is None:
            return None
        try:
            return os.stat(name, dir_fd=fd, follow_symlinks=False)
        except FileNotFoundError:
            return None

    def open_file(self, rel: str) -> int | None:
        """A descriptor to read the regular file `rel`, or None when it is missing or not a
        regular file (nothing followed, never blocking on a named pipe)."""
        parent, _, name = rel.rpartition("/")
        fd = self.folder(parent, create=False)
        if fd is None:
            return None
        try:
            found = os.open(name, _READ, dir_fd=fd)
        except OSError:
            return None
        if not stat.S_ISREG(os.fstat(found).st_mode):
            os.close(found)
            return None
        return found

    def read(self, rel: str, limit: int) -> bytes | None:
        """The bytes of the regular file `rel` (None: missing, not a file, over `limit`)."""
        fd = self.open_file(rel)
        if fd is None:
            return None
        with os.fdopen(fd, "rb") as fh:
            data = fh.read(limit + 1)
        return data if len(data) <= limit else None

    def unlink(self, rel: str) -> bool:
        """Remove the file `rel` (a foreign entry there as `foreign` says; a folder is left
        alone); True when something was removed."""
        parent, _, name = rel.rpartition("/")
        fd = self.folder(parent, create=False)
        st = None if fd is None else self.lstat(rel)
        if fd is None or st is None or stat.S_ISDIR(st.st_mode):
            return False
        if not stat.S_ISREG(st.st_mode):
            return not self.foreign(fd, rel, want="file")
        with contextlib.suppress(FileNotFoundError):
            os.unlink(name, dir_fd=fd)
        return True

    def remove_empty_folders(self, rel: str, *, top: str = "") -> None:
        """Remove the folders above the file `rel` that are empty now, bottom up, up to (not
        including) the subfolder `top`."""
        parts = rel.split("/")[:-1]
        stop = len(top.split("/")) if top else 0
        while len(parts) > stop:
            here = "/".join(parts)
            above = self.folder("/".join(parts[:-1]), create=False)
            if above is None:
                return
            with self._lock:
                fd = self._open.pop(here, None)
            if fd is not None:
                os.close(fd)
            try:
                os.rmdir(parts[-1], dir_fd=above)
            except OSError:
                return
            parts.pop()
