"""numpy's BLAS thread count, read and set where it can be: OpenBLAS (numpy's wheels), found among
the libraries this process mapped (Linux), called through its own symbols. Elsewhere (macOS
Accelerate, MKL builds) `blas_threads` changes nothing.

    with blas_threads(1):
        ...                       # every BLAS call in here on one thread
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any


@contextlib.contextmanager
def blas_threads(n: int) -> Iterator[None]:
    """numpy's OpenBLAS on `n` threads inside, as it was after (no-op where it is not found)."""
    lib = _openblas()
    if lib is None:
        yield
        return
    get, put = lib
    before = int(get())
    put(n)
    try:
        yield
    finally:
        put(before)


_BLAS: list[Any] = []  # [None] or [(get_num_threads, set_num_threads)] once looked up


def _openblas() -> tuple[Callable[[], int], Callable[[int], None]] | None:
    if not _BLAS:
        _BLAS.append(_find_openblas())
    return _BLAS[0]


def _find_openblas() -> tuple[Callable[[], int], Callable[[int], None]] | None:
    """numpy's OpenBLAS among the libraries this process mapped (Linux), by its symbols."""
    import ctypes
    import re

    import numpy  # noqa: F401  (maps its BLAS)

    try:
        with open("/proc/self/maps", encoding="utf-8") as maps:
            paths = sorted(set(re.findall(r"(/\S*openblas\S*\.so\S*)", maps.read())))
    except OSError:
        return None
    for path in paths:
        lib = ctypes.CDLL(path)
        for prefix, suffix in (("scipy_openblas", "64_"), ("scipy_openblas", ""),
                               ("openblas", "64_"), ("openblas", "")):
            if hasattr(lib, f"{prefix}_set_num_threads{suffix}"):
                return (getattr(lib, f"{prefix}_get_num_threads{suffix}"),
                        getattr(lib, f"{prefix}_set_num_threads{suffix}"))
    return None
