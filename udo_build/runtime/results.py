"""A run's outputs as the vendor's net-run writes them: one folder per inference,
`Result_<i>/<tensor>.raw` (little-endian float32; `/` and `:` in tensor names become `_`), plus a
`.npy` beside each raw file so that the shape travels with the data.

They are written through the output folder itself (`atomic.Confined`): a symbolic link or other
foreign entry planted in it is refused (a UserError naming it), never followed."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..atomic import Confined


def file_name(tensor: str) -> str:
    return tensor.replace("/", "_").replace(":", "_")


def write_result(folder: Path | Confined, outputs: Mapping[str, Any], rel: str = "") -> None:
    """One inference's outputs, by tensor name, into `folder` (created as needed), or into
    its subfolder `rel` when `folder` is an open output folder."""
    if not isinstance(folder, Confined):
        with Confined(folder) as out:
            write_result(out, outputs)
        return
    import io

    import numpy as np

    for name, value in sorted(outputs.items()):
        array = np.asarray(value)
        buffer = io.BytesIO()
        np.save(buffer, array, allow_pickle=False)
        base = f"{rel}/{file_name(name)}" if rel else file_name(name)
        folder.write(f"{base}.raw", array.astype("<f4", copy=False).tobytes())
        folder.write(f"{base}.npy", buffer.getvalue())
