"""Weights quantized per block along their input axis, plain (PER_BLOCK) or LPBQ.

    encs = block_weights(w, layout, bitwidth=4, block_size=64, lpbq=True)

A weight of a MatMul (K, N), Gemm or Conv (M, C, ...) is cut into blocks of `block_size`
consecutive values of its input axis (K, or C) within each output channel (a Gather's table,
an embedding, within each row); every block gets a
symmetric scale from its largest finite magnitude, rounded up to the grid of
udo_build.quant.stats as per-channel weights are (`symmetric_weights`).

LPBQ (low-power block quantization, as AIMET and QNN define it) then expresses each block's
scale as the channel's float scale times a small unsigned integer: the channel scale is its
largest block scale / 2^bitwidth, and each block takes the smallest integer in [1, 2^bitwidth]
whose scale still holds the block's peak (so no value is clipped by the compression). The
weights' integers times their block's integer fit twice the bit width (4-bit weights: 8-bit
products, AIMET's decompressed width), so the device, and the integer path here, multiply them
with one scale per output channel: exact integer products, as per-channel weights.

A weight whose input axis is not a multiple of the block size cannot be cut so (AIMET requires
a divisor too): it keeps per-channel encodings (`block_or_channel`).
"""

from __future__ import annotations

import math

import numpy as np

from ..ir.blocks import integer_rows
from ..ir.encodings import Encoding, Layout
from .stats import round_up_magnitudes

_SAFETY = 1 - 2 ** -40  # a ratio one rounding above an integer still takes that integer
_SLICE = 16 << 20  # bytes of a weight `block_peaks` reads at a time


def block_peaks(w: np.ndarray, layout: Layout, block_size: int) -> np.ndarray:
    """The largest finite magnitude of every (channel, block), as float64: the weight is read
    a slice of whole blocks at a time in its own type (a magnitude and a maximum are exact in
    any float type), so an LLM's embedding of hundreds of MB is never copied whole."""
    channels, length, blocks_first = layout
    blocks = length // block_size
    w = np.asarray(w)
    out = np.empty((channels, blocks), np.float64)
    if blocks_first:  # (input, channels): a slice is whole blocks of every channel
        step = max(1, _SLICE // max(1, block_size * channels * w.itemsize))
        for b in range(0, blocks, step):
            part = _magnitudes(w[b * block_size:(b + step) * block_size])
            out[:, b:b + step] = part.reshape(-1, block_size, channels).max(axis=1).T
        return out
    row = max(1, w.size // max(1, channels))  # (channels, input, ...): a slice is channels
    step = max(1, _SLICE // max(1, row * w.itemsize))
    for c in range(0, channels, step):
        part = _magnitudes(w[c:c + step])
        out[c:c + step] = part.reshape(part.shape[0], blocks, -1).max(axis=2)
    return out


def _magnitudes(part: np.ndarray) -> np.ndarray:
    """|part|, each value that is not finite 0."""
    magnitudes = np.abs(part)
    magnitudes[~np.isfinite(magnitudes)] = 0
    return magnitudes


def block_weights(w: np.ndarray, layout: Layout, bitwidth: int, block_size: int,
                  lpbq: bool) -> list[Encoding]:
    """One block encoding per output channel (see the module docstring)."""
    blocks_first = layout[2]
    levels = 2 ** (bitwidth - 1) - 1
    peaks = round_up_magnitudes(block_peaks(w, layout, block_size).reshape(-1))
    scales = np.where(peaks > 0, peaks / levels, 1e-8).reshape(layout[0], -1)
    if not lpbq:
        return [Encoding(bitwidth, 1.0, 0, True, block_size, tuple(row), 0, blocks_first)
                for row in scales.tolist()]
    top = 2 ** bitwidth  # the integers' range: decompressed width 2 x bitwidth
    channel = scales.max(axis=1) / top
    ints = np.clip(np.ceil(scales / channel[:, None] * _SAFETY), 1, top)
    return [Encoding(bitwidth, float(s), 0, True, block_size, row, 2 * bitwidth, blocks_first)
            for s, row in zip(channel.tolist(), integer_rows(ints), strict=True)]


def block_or_channel(w: np.ndarray, layout: Layout, bitwidth: int, block_size: int,
                     lpbq: bool) -> list[Encoding] | None:
    """Block encodings of w, or None when its input axis is not a multiple of block_size
    (or it is empty): the caller gives it per-channel encodings."""
    length = layout[1]
    if length == 0 or math.prod(w.shape) == 0 or length % block_size:
        return None
    return block_weights(w, layout, bitwidth, block_size, lpbq)
