"""The one atomic write path: a temporary sibling, fsync, rename, read-only after.

A reader never sees a partial file: either the old content (or nothing) or the whole new one.
Temporary siblings are named `.tmp-*`; a crash leaves at most such a file, which `store verify`
and `store gc` remove.
"""

from __future__ import annotations

import os
from pathlib import Path

TMP_PREFIX = ".tmp-"


def tmp_sibling(path: Path) -> Path:
    return path.with_name(f"{TMP_PREFIX}{os.urandom(8).hex()}-{path.name}")


def write_atomic(path: Path, data: bytes, *, readonly: bool = True, durable: bool = True,
                 mode: int | None = None) -> None:
    """Write `data` to `path` so that readers see all of it or none of it; read-only, or
    writable (`readonly=False`), or with the permission bits `mode`."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = tmp_sibling(path)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        try:
            view = memoryview(data)
            while view:
                written = os.write(fd, view)
                view = view[written:]
            if durable:
                os.fsync(fd)
        finally:
            os.close(fd)
        if mode is not None or readonly:
            os.chmod(tmp, 0o444 if mode is None else mode)
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def is_tmp(path: Path) -> bool:
    return path.name.startswith(TMP_PREFIX)
