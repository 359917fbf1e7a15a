"""The float runtime's reused output buffers: a plan step's dead tensors, kept for a later
convolution of the same shape instead of fresh memory.

A fresh numpy array of a few megabytes is fresh pages from the kernel: every page faults and
is zeroed on first touch, about a tenth of a ResNet-50 run. Onnxruntime keeps an arena; the
float session keeps this pool: when a step's input dies (its last reader ran), the array goes
here if nothing else can see it, and the compiled convolution takes its output from here when
one of its shape and dtype is waiting (`take`), across steps and across runs.

Only the shapes some convolution of a plan makes are kept (`want`, as the plan is built from
the model's static shapes): a model without one keeps nothing.

Nothing else can see an array when it owns its memory (it is no view) and no reference to it
exists but the one the session dropped: a view of it holds its base, a caller that kept a
streamed tensor holds it, a requested output is never freed. The count of references is
compared with what a fresh array has at the same place (`Buffers.give` measures it once).

Bounded: at most PER_SHAPE arrays of one shape and dtype and TOTAL bytes in all (more are let
go), so a pool never holds more than a run's own dead tensors would have. Thread-safe: one
session may run in several threads.
"""

from __future__ import annotations

import sys
import threading

import numpy as np

PER_SHAPE = 4
TOTAL = 256 << 20  # bytes


class Buffers:
    """Arrays that no one sees, by shape and dtype, for `take`."""

    def __init__(self) -> None:
        self._free: dict[tuple[tuple[int, ...], np.dtype], list[np.ndarray]] = {}
        self._wanted: set[tuple[tuple[int, ...], np.dtype]] = set()
        self._bytes = 0
        self._lock = threading.Lock()
        probe = {"dead": np.empty(1)}
        self._alone = self._probe(probe.pop("dead"))  # called as the session calls `give`

    def _probe(self, value: object) -> int:
        return sys.getrefcount(value)

    def want(self, shape: tuple[int, ...], dtype: np.dtype | str) -> None:
        """Keep dead arrays of this shape and dtype from now on (a convolution makes them)."""
        with self._lock:
            self._wanted.add((tuple(shape), np.dtype(dtype)))

    def give(self, value: object) -> None:
        """Keep `value` (a dead tensor, popped from the session's tensors and passed straight
        here: `buffers.give(env.pop(name))`) when it is an array no one else can see and the
        bounds allow."""
        if (sys.getrefcount(value) > self._alone or type(value) is not np.ndarray
                or not value.flags.owndata or not value.flags.writeable or value.nbytes == 0):
            return
        key = (value.shape, value.dtype)
        if key not in self._wanted:
            return
        with self._lock:
            kept = self._free.setdefault(key, [])
            if len(kept) < PER_SHAPE and self._bytes + value.nbytes <= TOTAL:
                kept.append(value)
                self._bytes += value.nbytes

    def take(self, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray | None:
        """A kept array of this shape and dtype (its contents are stale), or None."""
        with self._lock:
            kept = self._free.get((tuple(shape), np.dtype(dtype)))
            if not kept:
                return None
            array = kept.pop()
            self._bytes -= array.nbytes
            return array

    def held(self) -> int:
        """The bytes kept."""
        return self._bytes
