"""The encoding type: real = scale * (q + offset), and a weight's blocks (see
udo_build.ir.encodings for the formats that hold it)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Encoding:
    """real = scale * (q + offset); `signed` encodings keep q in [-(2^(b-1)-1), 2^(b-1)-1].
    A block encoding (one output channel's, see udo_build.ir.encodings): block b of the channel
    has scale `scale * block_scales[b]`; `blocks_first`: the weight's block axis comes before
    its channel axis (the order a file flattens them in)."""

    bitwidth: int
    scale: float
    offset: int
    signed: bool = False
    block_size: int = 0
    block_scales: tuple[float, ...] = ()
    lpbq_bitwidth: int = 0  # > 0: LPBQ, block_scales are integers (the decompressed width)
    blocks_first: bool = False

    @property
    def blocked(self) -> bool:
        return self.block_size > 0

    @property
    def qmin(self) -> int:
        return -(2 ** (self.bitwidth - 1) - 1) if self.signed else 0

    @property
    def qmax(self) -> int:
        return 2 ** (self.bitwidth - 1) - 1 if self.signed else 2 ** self.bitwidth - 1

    @property
    def widest(self) -> float:
        """The scale of the widest block (the scale itself for any other encoding)."""
        return self.scale * max(self.block_scales) if self.block_scales else self.scale

    @property
    def min(self) -> float:
        return self.widest * (self.qmin + self.offset)

    @property
    def max(self) -> float:
        return self.widest * (self.qmax + self.offset)

    def quantize(self, x: np.ndarray) -> np.ndarray:
        self._not_blocked()
        q = np.rint(np.asarray(x, np.float64) / self.scale) - self.offset
        return np.clip(q, self.qmin, self.qmax)

    def dequantize(self, q: np.ndarray) -> np.ndarray:
        self._not_blocked()
        return (self.scale * (np.asarray(q, np.float64) + self.offset)).astype(np.float32)

    def _not_blocked(self) -> None:
        if self.blocked:  # one channel's scale alone would give wrong values
            raise ValueError("a block encoding quantizes a whole weight along its blocks "
                             "(udo_build.runtime.integer.fixed.quantize_along)")
