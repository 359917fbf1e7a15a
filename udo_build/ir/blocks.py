"""Block encodings in the AIMET 1.0.0 format: reading PER_BLOCK and LPBQ entries against the
weights they quantize (see udo_build.ir.encodings for the representation and the format).

    layouts = block_layouts(model)       # weight name -> (channels, input length, blocks_first)
    activations, params = from_aimet(doc, file, layouts=layouts)

A block entry's scales are flattened channels x blocks in the weight's axis order, so its
weight's layout decides how they are split: a MatMul's (K, N) weight and a Gemm's B without
transB are block-major (blocks_first), a Conv's (M, C, ...) weight, a Gemm's transposed B and a
Gather's table (an embedding: one channel per row) channel-major.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import numpy as np

from .encoding_type import Encoding

if TYPE_CHECKING:
    from .graph import Model, Node

# a weight's block layout: (output channels, length of the input axis, blocks_first)
Layout = tuple[int, int, bool]
Layouts = dict[str, Layout]
Refuse = Callable[..., Exception]
BLOCK_OPS = ("MatMul", "Gemm", "Conv")
WEIGHT_BITWIDTHS = (4, 8, 16)


def block_input(node: Node) -> int | None:
    """Which input of a node block encodings may quantize: the weight of a MatMul, Gemm or
    Conv (1), the table of a Gather along its first axis (0: an embedding's rows)."""
    if node.op in BLOCK_OPS and len(node.inputs) > 1:
        return 1
    if node.op == "Gather" and node.attr("axis", 0) == 0 and node.inputs:
        return 0
    return None


def weight_layout(node: Node, shape: tuple[int, ...]) -> Layout | None:
    """(output channels, input axis length, blocks_first) of the input `block_input` names
    (None: another op, or a shape that has no such axes). A Gather table's channels are its
    rows, its blocks run along each row."""
    if node.op == "Conv" and len(shape) >= 3:
        return shape[0], shape[1], False
    if node.op not in ("MatMul", "Gemm", "Gather") or len(shape) != 2:
        return None
    if node.op == "Gather" or (node.op == "Gemm" and node.attr("transB", 0)):
        return shape[0], shape[1], False
    return shape[1], shape[0], True


def block_layouts(model: Model) -> Layouts:
    """The layout of every weight a block encoding may quantize (`block_input`)."""
    out: Layouts = {}
    for node in model.graph.nodes:
        index = block_input(node)
        name = node.inputs[index] if index is not None else ""
        if name in model.weights and name not in out:
            layout = weight_layout(node, tuple(model.weights[name].shape))
            if layout is not None:
                out[name] = layout
    return out


def block_entry(entry: dict[str, Any], kind: str, layout: Layout | None,
                refuse: Refuse) -> list[Encoding]:
    """The per-channel block encodings of a 1.0.0 PER_BLOCK or LPBQ entry."""
    if layout is None:
        raise refuse("enc_type", f"a {kind} encoding quantizes the weight of a MatMul, Gemm or "
                     "Conv, or a Gather's table; the model has no such weight of this name",
                     "give block encodings only to those weights")
    channels, length, blocks_first = layout
    size = entry.get("block_size")
    if isinstance(size, bool) or not isinstance(size, int) or size <= 0:
        raise refuse("block_size", f"block_size {size!r} is not a positive integer")
    if length % size:
        raise refuse("block_size", f"block_size {size} does not divide the weight's input "
                     f"axis ({length})", "give a divisor of the input axis")
    if entry.get("is_sym") is not True:
        raise refuse("is_sym", "block encodings are symmetric (is_sym: true)")
    bitwidth = entry.get("bw")
    scales = numbers(entry.get("scale"), refuse, "scale")
    offsets = numbers(entry.get("offset"), refuse, "offset")
    if any(not s > 0 for s in scales):
        raise refuse("scale", "a scale is not a positive number")
    blocks = length // size
    if kind == "PER_BLOCK":
        _check_width(bitwidth, WEIGHT_BITWIDTHS, "bw", refuse)
        _check_count(scales, channels * blocks, "scale", refuse, channels, blocks)
        _check_offsets(offsets, len(scales), bitwidth, refuse)
        grid = _grid(scales, channels, blocks, blocks_first)
        return [Encoding(bitwidth, 1.0, 0, True, size, tuple(row), 0, blocks_first)
                for row in grid.tolist()]
    compressed = entry.get("compressed_bw")
    _check_width(bitwidth, (8, 16), "bw", refuse)
    _check_width(compressed, tuple(b for b in (4, 8) if b < bitwidth), "compressed_bw", refuse)
    _check_count(scales, channels, "scale", refuse, channels, None)
    _check_offsets(offsets, channels, bitwidth, refuse)
    ints = entry.get("per_block_int_scale")
    top = 2 ** (bitwidth - compressed)
    if not isinstance(ints, list) or not all(
            isinstance(v, int) and not isinstance(v, bool) and 1 <= v <= top for v in ints):
        raise refuse("per_block_int_scale", f"per_block_int_scale must be a list of integers "
                     f"in [1, {top}] (2^(bw - compressed_bw))")
    _check_count(ints, channels * blocks, "per_block_int_scale", refuse, channels, blocks)
    grid = _grid(ints, channels, blocks, blocks_first)
    return [Encoding(compressed, scale, 0, True, size, row, bitwidth, blocks_first)
            for scale, row in zip(scales, integer_rows(grid), strict=True)]


def integer_rows(grid: np.ndarray) -> list[tuple[float, ...]]:
    """The rows of a grid of small whole numbers (LPBQ's block integers) as tuples of floats,
    each value one shared float object: an LLM's millions of block scales cost a pointer each,
    not a float object each."""
    top = int(grid.max(initial=0))
    table = [float(v) for v in range(top + 1)]
    return [tuple(map(table.__getitem__, row)) for row in grid.astype(np.int64).tolist()]


def numbers(value: Any, refuse: Any, key: str) -> list[float]:
    if (not isinstance(value, list) or not value
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in value)):
        raise refuse(key, f"{key} must be a non-empty list of numbers")
    if not all(math.isfinite(v) for v in value):
        raise refuse(key, f"{key} holds a value that is not finite")
    return [float(v) for v in value]


def _check_width(value: Any, allowed: tuple[int, ...], key: str, refuse: Refuse) -> None:
    if isinstance(value, bool) or value not in allowed:
        raise refuse(key, f"{key} {value!r} is not one of {', '.join(map(str, allowed))}")


def _check_count(values: list[Any], count: int, key: str, refuse: Refuse, channels: int,
                 blocks: int | None) -> None:
    if len(values) != count:
        shape = f"{channels} channels" + ("" if blocks is None else f" x {blocks} blocks")
        raise refuse(key, f"{len(values)} values for the weight's {shape}",
                     "check block_size and the weight the entry names")


def _check_offsets(offsets: list[float], count: int, bitwidth: int, refuse: Refuse) -> None:
    half = 2 ** (bitwidth - 1)
    if len(offsets) != count or any(o != -half for o in offsets):
        raise refuse("offset", f"a symmetric {bitwidth}-bit block encoding has {count} "
                     f"offsets, each -{half}")


def _grid(flat: list[float] | list[int], channels: int, blocks: int,
          blocks_first: bool) -> np.ndarray:
    """(channels, blocks) from values flattened in the weight's axis order."""
    values = np.asarray(flat, np.float64)
    return values.reshape(blocks, channels).T if blocks_first else \
        values.reshape(channels, blocks)
