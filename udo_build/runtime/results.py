"""A run's outputs as the vendor's net-run writes them: one folder per inference,
`Result_<i>/<tensor>.raw` (little-endian float32; `/` and `:` in tensor names become `_`), plus a
`.npy` beside each raw file so that the shape travels with the data."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any


def file_name(tensor: str) -> str:
    return tensor.replace("/", "_").replace(":", "_")


def write_result(folder: Path, outputs: Mapping[str, Any]) -> None:
    """One inference's outputs, by tensor name, into `folder` (created as needed)."""
    import io

    import numpy as np

    from ..atomic import write_atomic

    folder.mkdir(parents=True, exist_ok=True)
    for name, value in sorted(outputs.items()):
        array = np.asarray(value)
        buffer = io.BytesIO()
        np.save(buffer, array, allow_pickle=False)
        write_atomic(folder / f"{file_name(name)}.raw",
                     array.astype("<f4", copy=False).tobytes(), readonly=False, durable=False)
        write_atomic(folder / f"{file_name(name)}.npy", buffer.getvalue(), readonly=False,
                     durable=False)
