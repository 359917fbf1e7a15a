"""Block scales in a record's binary payload, not in its JSON.

A weight quantized per block (PER_BLOCK or LPBQ: udo_build.ir.encodings) has a scale per output
channel and block: an LLM's millions of numbers. Records of format versions 4 (one graph) and 5
(several: record_graphs.py) hold them as one array per weight among the constants, the value's
JSON entry naming it:

    "enc": [[bitwidth, scale, offset, signed, {"block_size", "lpbq_bitwidth", "blocks_first"}],
            ...one per output channel]
    "block_scales": {"dtype": "uint8" | "uint16" | "float64", "shape": [channels, blocks],
                     "offset": <in the constants, 64-byte aligned>}

LPBQ's block integers as uint8 (uint16 when one exceeds 255), PER_BLOCK's float scales as
float64 (exact). Versions 2 and 3 hold them in the JSON (the fifth element's "block_scales"), as
they always did; a record without block encodings is still written as version 2 or 3, its bytes
unchanged. Reading checks the entry (dtype, shape against the encodings, offset) with the JSON,
and every scale when the constants are read (positive, finite), and gives the encodings their
scales back when the graph is built: LPBQ's integers as shared float objects
(ir.blocks.integer_rows), a pointer each.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..ir.blocks import integer_rows
from ..ir.encodings import Encoding, to_list
from ..schema_problems import Check

DTYPES = ("uint8", "uint16", "float64")


def grid_of(encs: tuple[Encoding, ...]) -> np.ndarray | None:
    """The block scales of a weight's encodings as (channels, blocks), little-endian, in the
    type the record stores them in; None for encodings without blocks."""
    if not encs or not encs[0].blocked:
        return None
    if encs[0].lpbq_bitwidth:
        ints = np.array([e.block_scales for e in encs], np.float64)
        return ints.astype(np.uint8 if ints.max(initial=0) <= 255 else "<u2")
    return np.array([e.block_scales for e in encs], "<f8")


def enc_json(encs: tuple[Encoding, ...], binary: bool) -> list[list[Any]]:
    """The encodings as the value's "enc" holds them; with `binary`, their block scales left
    out (the payload holds them)."""
    if not binary:
        return [to_list(e) for e in encs]
    out = []
    for e in encs:
        entry = to_list(replace(e, block_scales=()))
        del entry[4]["block_scales"]
        out.append(entry)
    return out


def check_entry(c: Check, entry: dict[str, Any], encs: list[Any], field: str, align: int,
                most: int) -> tuple[np.dtype[Any], tuple[int, ...], int]:
    """A value's "block_scales" entry checked against its encodings: (dtype, shape, offset);
    the offset a multiple of `align`, at most `most`."""
    ref = c.obj(entry["block_scales"], f"{field}.block_scales")
    dtype = ref.get("dtype")
    if dtype not in DTYPES:
        raise c.fail(f"{field}.block_scales.dtype", f"expected one of {', '.join(DTYPES)}")
    shape = tuple(c.wholes(ref.get("shape"), f"{field}.block_scales.shape", 1, 2 ** 31))
    if len(shape) != 2 or shape[0] != len(encs) or not encs:
        raise c.fail(f"{field}.block_scales.shape", f"expected [channels, blocks] with one "
                     f"channel per encoding ({len(encs)})")
    if any(len(e) != 5 or "block_scales" in e[4] for e in encs):
        raise c.fail(f"{field}.enc", "block encodings whose scales the payload holds name "
                     "their blocks without block_scales")
    lpbq = encs[0][4].get("lpbq_bitwidth")
    if (dtype == "float64") == bool(lpbq):
        raise c.fail(f"{field}.block_scales.dtype", "LPBQ's block integers are uint8 or "
                     "uint16, per-block scales float64")
    offset = c.whole(ref.get("offset"), f"{field}.block_scales.offset", 0, most)
    if offset % align:
        raise c.fail(f"{field}.block_scales.offset", f"{offset} is not a multiple of {align}")
    return np.dtype(dtype).newbyteorder("<"), shape, offset


def checked_grid(raw: np.ndarray, dtype: np.dtype[Any], shape: tuple[int, ...], field: str,
                 file: str) -> np.ndarray:
    """A stored block scale grid as an array, every scale positive and finite."""
    grid = raw.view(dtype).reshape(shape).astype(dtype.newbyteorder("="))
    if not np.all(np.isfinite(grid)) or not np.all(grid > 0):
        from ..errors import UserError

        raise UserError("the cache record's block scales are not all positive numbers",
                        file=file, field=f"{field}.block_scales")
    return grid


def with_scales(encs: tuple[Encoding, ...], grid: np.ndarray) -> tuple[Encoding, ...]:
    """The encodings with their block scales, row by row."""
    rows = integer_rows(grid) if grid.dtype.kind == "u" else [tuple(r) for r in grid.tolist()]
    return tuple(replace(e, block_scales=row) for e, row in zip(encs, rows, strict=True))
