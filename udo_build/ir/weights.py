"""Weights too many to hold: arrays whose bytes stay in files, read when a kernel touches them.

A model of STREAM_FROM bytes of weights or more (an LLM's) is not held in memory by any step:
its weights are memory maps of the files that hold them (a store blob kept raw, `mapped`; or
a temporary file the bytes were written to once, `spill`), so looking one up, making views of
it (a transpose, a tile), or holding it in a plan costs no memory. Its pages are read when a
kernel touches them and are then resident (they count in the process's RSS); whoever holds such
an array across uses gives them back after each use (`release`: madvise(MADV_DONTNEED), the
page cache keeps them, the next use reads them from there). An array that is dropped unmaps its
pages itself.

    w = mapped(path, "float32", (1024, 2816))   # nothing read yet
    y = x @ w                                   # its pages read, resident
    release(w)                                  # no longer resident; w still usable

Derived arrays a step would otherwise hold for all weights at once (the integer path's
quantized weights, a record's constants) are spilled when they are this large, so that what the
step holds is file-backed too. Values never change: a mapped or spilled array holds the same
bytes as the array it stands for, so outputs are the same bits whether or not a model streams.

`Overlay` is a model's weights with some replaced or added (what folding makes) over a mapping
that keeps its weights in files, without reading those.
"""

from __future__ import annotations

import mmap
import os
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from typing import Any, BinaryIO

import numpy as np

STREAM_FROM = 256 << 20  # bytes of weights from which a model streams its weights
SPILL_FROM = 1 << 20  # bytes: a derived array this large is spilled when a model streams


def mapped(path: str | os.PathLike[str], dtype: str | np.dtype, shape: tuple[int, ...],
           offset: int = 0) -> np.ndarray:
    """The little-endian array at `offset` of a file, as a read-only memory map."""
    dtype = np.dtype(dtype).newbyteorder("<")
    if int(np.prod(shape, dtype=np.int64)) * dtype.itemsize == 0:
        return np.zeros(shape, dtype)
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape)


def spill(array: np.ndarray) -> np.ndarray:
    """The array's bytes in an unlinked temporary file, mapped read-only (same dtype, shape
    and values); an array already in a file, or under SPILL_FROM bytes, as it is."""
    a = np.asarray(array)
    if a.nbytes < SPILL_FROM or _mapping(a) is not None:
        return a
    with spill_file(a) as fh:
        return from_file(fh, a.dtype, a.shape)


def spill_file(array: np.ndarray) -> BinaryIO:
    """An unlinked temporary file holding the array's bytes (C order), to map (`from_file`)
    as often as needed."""
    a = np.asarray(array)
    rows = a.reshape(1, -1) if a.ndim == 0 else a
    step = max(1, (16 << 20) // max(1, a.nbytes // max(1, rows.shape[0])))
    fh = tempfile.TemporaryFile(prefix="udo-build-spill-")
    for start in range(0, rows.shape[0], step):  # 16 MiB at a time: no second copy
        fh.write(np.ascontiguousarray(rows[start:start + step]).data)
    fh.flush()
    return fh  # type: ignore[return-value]


def from_file(fh: BinaryIO, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    """The array a `spill_file` holds, mapped read-only afresh."""
    if int(np.prod(shape, dtype=np.int64)) == 0:
        return np.zeros(shape, dtype)
    return np.memmap(fh, dtype=dtype, mode="r", shape=shape)


def release(*arrays: Any) -> None:
    """Give back the resident pages of every memory-mapped array among `arrays` (an mmap, or
    a memoryview of one; and the arrays held by a tuple, list or dataclass among them, one
    level deep): they stay usable, read again from the page cache when next touched."""
    for value in arrays:
        for array in _arrays(value):
            found = _mapping(array)
            if found is not None:
                found.madvise(mmap.MADV_DONTNEED)


def _arrays(value: Any) -> Iterator[Any]:
    if isinstance(value, (np.ndarray, mmap.mmap)):
        yield value
    elif isinstance(value, memoryview):
        yield value.obj
    elif isinstance(value, (tuple, list)):
        yield from (v for v in value if isinstance(v, np.ndarray))
    elif hasattr(value, "__dataclass_fields__"):
        for name in value.__dataclass_fields__:
            yield from _arrays_shallow(getattr(value, name, None))


def _arrays_shallow(value: Any) -> Iterator[np.ndarray]:
    if isinstance(value, np.ndarray):
        yield value
    elif isinstance(value, (tuple, list)):
        yield from (v for v in value if isinstance(v, np.ndarray))


def _mapping(array: Any) -> mmap.mmap | None:
    """The mmap an array's memory is part of (None: it is not memory-mapped)."""
    base: Any = array
    while base is not None:
        if isinstance(base, mmap.mmap):
            return base
        base = getattr(base, "base", None)
    return None


def streams(weights: Mapping[str, Any]) -> bool:
    """Whether a model streams its weights (see the module docstring): the mapping says so
    (a bundle's), or they are STREAM_FROM bytes or more, their large ones in files (a large
    record's constants, spilled; a bundle file's, mapped). Weights in memory never stream:
    nothing is spilled or given back for them (a benchmark's VGG runs as it always did)."""
    told = getattr(weights, "streams", None)
    if told is not None:
        return bool(told)
    total, large = 0, False
    for a in weights.values():
        size = int(getattr(a, "nbytes", 0))
        total += size
        large = large or (size >= SPILL_FROM and _mapping(a) is not None)
    return large and total >= STREAM_FROM


def spec(weights: Mapping[str, Any], name: str) -> tuple[np.dtype, tuple[int, ...]]:
    """A weight's dtype and shape, read without its values where the mapping can."""
    told = getattr(weights, "spec", None)
    if told is not None:
        return told(name)  # type: ignore[no-any-return]
    a = np.asarray(weights[name])
    return a.dtype, tuple(a.shape)


class Overlay(Mapping[str, np.ndarray]):
    """`base`'s weights with `extra` over them (replacing or adding), only the `names` given
    (None: all); `base`'s are read when asked for, as it reads them, and written into a
    bundle as it would write them (`streamed`)."""

    def __init__(self, base: Mapping[str, np.ndarray], extra: Mapping[str, np.ndarray],
                 names: Iterable[str] | None = None) -> None:
        self.base = base
        kept = None if names is None else set(names)
        self.extra = {k: v for k, v in extra.items() if kept is None or k in kept}
        self._names = [k for k in base if kept is None or k in kept]
        self._names += [k for k in self.extra if k not in base]
        self._set = set(self._names)
        self.streams = streams(base)

    def __getitem__(self, name: str) -> np.ndarray:
        if name in self.extra:
            return self.extra[name]
        if name not in self._set:
            raise KeyError(name)
        return self.base[name]

    def __contains__(self, name: object) -> bool:
        return name in self._set

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __reduce__(self) -> tuple[Any, ...]:
        return dict, (dict(self.items()),)

    def spec(self, name: str) -> tuple[np.dtype, tuple[int, ...]]:
        if name in self.extra:
            a = np.asarray(self.extra[name])
            return a.dtype, tuple(a.shape)
        return spec(self.base, name)

    def streamed(self, name: str) -> Any:
        """The base's source for writing the weight into a bundle (None: an array)."""
        told = getattr(self.base, "streamed", None)
        return None if name in self.extra or told is None else told(name)


def weights_of(base: Mapping[str, np.ndarray], extra: Mapping[str, np.ndarray],
               names: Iterable[str] | None = None) -> Mapping[str, np.ndarray]:
    """`base` with `extra` over it (`Overlay`) when base streams, else a dict of the same
    (what callers made before: the same arrays, in the same order)."""
    if streams(base):
        return Overlay(base, extra, names)
    kept = None if names is None else set(names)
    return {k: v for k, v in {**base, **extra}.items() if kept is None or k in kept}


class PassedPages:
    """The tail of a map (a mapped record's compressed bytes) read forward as a file, the pages
    it has read given back every RELEASE_EVERY bytes: decompressing a large mapped record holds
    none of its compressed pages."""

    RELEASE_EVERY = 16 << 20

    def __init__(self, view: memoryview) -> None:
        self.view, self.map, self.position = view, view.obj, 0
        self.start = len(self.map) - len(view)  # type: ignore[arg-type]
        self.given = 0  # bytes of the map whose pages were given back

    def read(self, n: int = -1) -> bytes:
        end = len(self.view) if n < 0 else min(len(self.view), self.position + n)
        data = bytes(self.view[self.position:end])
        self.position = end
        passed = (self.start + self.position) // mmap.PAGESIZE * mmap.PAGESIZE
        if passed - self.given >= self.RELEASE_EVERY or end == len(self.view):
            self.map.madvise(mmap.MADV_DONTNEED, self.given, passed - self.given)  # type: ignore
            self.given = passed
        return data
