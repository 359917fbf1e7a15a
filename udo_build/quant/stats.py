"""Per-tensor statistics gathered in one pass with bounded memory.

A `TensorStats` keeps the running min and max and a histogram of fixed size. The histogram's
range starts at the first batch's range and grows by doubling when later values fall outside it,
merging bins pairwise, so old counts are never lost and memory never grows (the approach of
TensorRT's and onnxruntime's histogram calibrators). No activation is kept.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

BINS = 2048


@dataclass
class TensorStats:
    bins: int = BINS
    min: float = float("inf")
    max: float = float("-inf")
    count: int = 0
    lo: float = 0.0  # histogram range [lo, hi)
    hi: float = 0.0
    hist: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))

    def add(self, values: np.ndarray) -> None:
        x = np.asarray(values, dtype=np.float32).ravel()
        x = x[np.isfinite(x)]
        if x.size == 0:
            return
        lo, hi = float(x.min()), float(x.max())
        self.min, self.max = min(self.min, lo), max(self.max, hi)
        self.count += x.size
        if self.hist.size == 0:
            self._start(lo, hi)
        while lo < self.lo or hi >= self.hi:
            self._grow(lo, hi)
        counts, _ = np.histogram(x, bins=self.bins, range=(self.lo, self.hi))
        self.hist += counts

    def _start(self, lo: float, hi: float) -> None:
        lo, hi = min(lo, 0.0), max(hi, 0.0)  # every range used for quantization holds 0
        width = max(hi - lo, 1e-8)
        self.lo, self.hi = lo, lo + width * (1 + 1e-6)
        self.hist = np.zeros(self.bins, np.int64)

    def _grow(self, lo: float, hi: float) -> None:
        """Double the range (toward the side that overflows), merging bins pairwise."""
        width = self.hi - self.lo
        merged = self.hist.reshape(-1, 2).sum(axis=1)
        empty = np.zeros(self.bins // 2, np.int64)
        if hi >= self.hi:  # grow upward: old bins fill the lower half
            self.hist = np.concatenate([merged, empty])
            self.hi = self.lo + 2 * width
        else:  # grow downward: old bins fill the upper half
            self.hist = np.concatenate([empty, merged])
            self.lo = self.hi - 2 * width

    def centers(self) -> np.ndarray:
        edges = np.linspace(self.lo, self.hi, self.bins + 1, dtype=np.float64)
        return (edges[:-1] + edges[1:]) / 2

    @property
    def empty(self) -> bool:
        return self.count == 0
