"""Owning an output folder: one build at a time writes it.

A folder is owned through a lock file `.udo-build-lock` in it (an advisory lock the kernel
releases when a process dies; a second build waits, says so, then proceeds). The lock file also
says whether its last owner was writing: a build killed then may have left `.tmp-*` siblings,
which the next owner removes. Everything goes through the folder's open descriptors
(`atomic.Confined`): a link or pipe planted at the lock's place is removed, never followed.

Apart from outputs.py (which writes the folder) so that a build that writes nothing (a replayed
no-op, see uptodate.py) holds the folder without importing the store's writers.
"""

from __future__ import annotations

import errno
import os
import stat
from contextlib import contextmanager, suppress

from ..atomic import TMP_PREFIX, Confined
from ..errors import UserError, environment_problem, with_path

TYPE_CHECKING = False  # typing's, without importing typing (see store/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

try:
    import fcntl
except ImportError:  # pragma: no cover - not POSIX
    fcntl = None  # type: ignore[assignment]

LOCK = ".udo-build-lock"


class Owner:
    """The build that holds an output folder's lock (and the folder, open: `Confined`); it
    says when it starts writing, and tells (once) which foreign entries it replaced."""

    def __init__(self, fd: int, folder: Confined, tell: Callable[[str], None]) -> None:
        self.fd = fd
        self.folder = folder
        self.tell = tell
        self._writing = False
        self._told = 0

    def mark(self, state: str) -> None:
        text = f"pid {os.getpid()} {state}".strip() + "\n"
        os.ftruncate(self.fd, 0)
        os.pwrite(self.fd, text.encode(), 0)

    def writing(self) -> None:
        if not self._writing:
            self.mark("writing")
            self._writing = True

    def tell_replaced(self) -> None:
        """One warning for the foreign entries replaced since the last one."""
        new = [f"{rel} ({what})" for rel, what in self.folder.replaced[self._told:]]
        self._told = len(self.folder.replaced)
        if new:
            these = "1 entry" if len(new) == 1 else f"{len(new)} entries"
            self.tell(f"replaced {these} that udo-build did not put there (removed, never "
                      f"followed, and written again): {', '.join(new[:3])}"
                      + (", ..." if len(new) > 3 else "")
                      + "; nothing outside the folder was read or written")


@contextmanager
def owned(folder: str | os.PathLike[str], waiting: Callable[[str], None]) -> Iterator[Owner]:
    """Hold the folder's lock (after telling `waiting` when another build holds it); on the
    way in, remove the leftovers of an owner killed while writing. The folder stays open
    (`Owner.folder`) for the build's writes."""
    try:
        out = Confined(folder, heal=True)
    except OSError as exc:
        if environment_problem(exc) is not None:  # read-only, full, not ours: said as such
            raise
        raise UserError(f"the output folder cannot be written: {exc.strerror}", file=folder,
                        hint="choose another --out folder, or make this one writable") from None
    try:
        fd = _open_lock(out)
    except BaseException:
        out.close()
        raise
    try:
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 64, 0).decode(errors="replace").split(" writing")[0]
                waiting(f"another build ({holder.strip() or 'a process'}) is writing this "
                        "output folder; waiting for it to finish")
                fcntl.flock(fd, fcntl.LOCK_EX)
        owner = Owner(fd, out, waiting)
        if os.pread(fd, 64, 0).decode(errors="replace").strip().endswith("writing"):
            remove_leftovers(out)
        owner.mark("")
        yield owner
        owner.tell_replaced()
        os.ftruncate(fd, 0)  # held by no one now: no pid is left in the folder, whose bytes
        # stay those of the build (after an exception "writing" stays, for the next build)
    finally:
        os.close(fd)  # releases the lock
        out.close()


def _open_lock(out: Confined) -> int:
    """The lock file, opened through the folder: a link or pipe planted in its place is
    removed (see `Confined.foreign`), never followed."""
    top = out.folder("")
    assert top is not None
    for _ in range(3):
        out.foreign(top, LOCK, want="file")
        try:
            fd = os.open(LOCK, _LOCK_FLAGS, 0o644, dir_fd=top)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENXIO):  # planted meanwhile: again
                continue
            raise with_path(exc, out.at(LOCK)) from None
        if stat.S_ISREG(os.fstat(fd).st_mode):
            return fd
        os.close(fd)
    raise UserError("the lock file keeps being replaced while udo-build opens it",
                    file=out.at(LOCK), hint="stop the other program writing there")


def _is_link(name: str, dir_fd: int) -> bool:
    """Whether `name` in the open folder is a symbolic link (fwalk lists links to folders
    with the folders)."""
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode)
    except FileNotFoundError:
        return False


_LOCK_FLAGS = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC


def remove_leftovers(out: Confined) -> int:
    """Remove the temporary siblings (`.tmp-*`) a killed build left in the folder (never
    descending into a store kept inside it, never following a link); returns how many."""
    count = 0
    for _, dirs, names, fd in os.fwalk(".", dir_fd=out.folder("")):
        if "VERSION" in names and "cas" in dirs:
            dirs.clear()  # a store: its temporary files belong to its own writers
            continue
        links = [d for d in dirs if d.startswith(TMP_PREFIX) and _is_link(d, fd)]
        dirs[:] = [d for d in dirs if d not in links]
        for name in [*names, *links]:
            if name.startswith(TMP_PREFIX):
                with suppress(FileNotFoundError):
                    os.unlink(name, dir_fd=fd)
                count += 1
    return count
