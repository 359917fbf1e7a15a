"""Where a bundle part's bytes wait until the bundle is written (udo_build.ir.bundle's
`Streamed` sources besides an ONNX external data tensor): a weight in memory, or a file.
Each is hashed and copied a piece at a time, and read whole only when its segment is taken."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import numpy as np

CHUNK = 16 << 20


class ArrayPart:
    """A weight in memory (C-order, little-endian): its bytes are hashed in place and copied
    when its segment is taken, one weight at a time."""

    def __init__(self, array: np.ndarray) -> None:
        self.array = array
        self.size = array.nbytes
        self.dtype = array.dtype.name
        self.shape = tuple(array.shape)

    def chunks(self) -> Iterator[bytes]:
        flat = self.array.reshape(-1).view(np.uint8)
        for start in range(0, self.size, CHUNK):
            yield flat[start:start + CHUNK].data  # type: ignore[misc]

    def read(self) -> bytes:
        return self.array.tobytes()


class FilePart:
    """A part (not a weight) whose bytes are a file, written by the step that made it: the
    quantize step's encodings, over a hundred MB for a billion-parameter model, are written
    once and never held whole beside the bundle. The file must not change while it is used."""

    dtype = "uint8"

    def __init__(self, path: Path) -> None:
        self.path = path
        self.size = path.stat().st_size
        self.shape = (self.size,)

    def chunks(self) -> Iterator[bytes]:
        with open(self.path, "rb") as f:
            while piece := f.read(CHUNK):
                yield piece

    def read(self) -> bytes:
        data = self.path.read_bytes()
        if len(data) != self.size:
            raise OSError(f"{self.path} changed while the bundle was written")
        return data
