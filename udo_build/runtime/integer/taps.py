"""An integer 2-d stride-1 convolution by one GEMM per kernel tap, from contiguous runs of its
centered, zero-padded input: the float kernel's wide-row path (`kernels.default.conv._wide`),
exact, so that such a convolution makes no im2col copy (nine times its input for 3x3).

The input (C, H, W) is centered (x - zero point, float32) into a zero buffer of rows of
Wq = Wo + (kw - 1) * dw pixels: the padding is the real zero. Tap (i, j) reads that buffer shifted
by i * dh rows and j * dw columns, for every output row at once one run of Ho * Wq values per
channel, a (C, Ho * Wq) matrix sgemm reads in place. The output (M, Ho * Wq) is pre-filled with
the bias and each tap's GEMM adds its products into it (beta 1); each row carries Wq - Wo junk
columns (products of the wrapped-around pixels), which the requantization skips: it reads the
(M, Ho, Wo) view.

Exact: every value sgemm forms in the output is the bias plus a sum of products w_k x_k over a
subset of the K = C * kh * kw terms of that output (the taps done so far, and part of the
current one; junk columns: the same weights times other pixels of the same range), so its
magnitude is at most |bias| + `Packed.partial_bound` (the largest such subset sum, for inputs in
the encoding's range: `exact.py`), which `fits` requires below 2^24: float32 holds every such
integer, whatever order or grouping the BLAS uses.
"""

from __future__ import annotations

import numpy as np

from ...kernels.blas import gemm
from .exact import F32_LIMIT, OPERAND_ROWS, Packed

TAP_GEMM_CHANNELS = 64  # as the float kernel: from this many input channels, a GEMM per tap
JUNK_SHARE = 8  # the junk columns (kw - 1) * dw at most an eighth of the output's width


def fits(packed: Packed, bias: np.ndarray | None, x_shape: tuple[int, ...],
         kernel: tuple[int, ...], strides: tuple[int, ...], dilations: tuple[int, ...],
         begin: list[int], outs: list[int], group: int) -> bool:
    """Whether a convolution takes the tap GEMMs: one image, one group, 2-d, stride 1, a kernel
    larger than 1x1, TAP_GEMM_CHANNELS input channels or more, junk columns at most a
    JUNK_SHARE-th of the width (the float kernel's rule: chosen by shape only), and a float32
    product whose bias keeps every partial sum below 2^24 (the module docstring)."""
    if (x_shape[0] != 1 or group != 1 or len(kernel) != 2 or any(s != 1 for s in strides)
            or min(begin) < 0 or all(k == 1 for k in kernel) or x_shape[1] < TAP_GEMM_CHANNELS
            or JUNK_SHARE * (kernel[1] - 1) * dilations[1] > outs[1]):
        return False
    if bias is None or bias.dtype != np.float32:
        return False
    return (packed.dtype == np.float32 and len(packed.bounds) == 1
            and packed.operands[0].shape[0] == 1 and packed.operands[0][0].size <= OPERAND_ROWS
            and packed.partial_bound + float(np.abs(bias).max(initial=0)) < F32_LIMIT)


def tap_product(x: np.ndarray, zp: int, packed: Packed, bias: np.ndarray,
                kernel: tuple[int, ...], dilations: tuple[int, ...], begin: list[int],
                outs: list[int]) -> np.ndarray:
    """conv(x - zp, w) + bias for one image x (1, C, H, W) (`fits` holds): the accumulator
    (1, M, Ho, Wo) in float32, exact, a view of the wide output."""
    (kh, kw), (dh, dw) = kernel, dilations
    ho, wo = outs
    wq = wo + (kw - 1) * dw
    c, size = x.shape[1], ho * wq
    flat = _centered_padded(x[0], zp, begin, ho + (kh - 1) * dh + 1, wq).reshape(c, -1)
    w = packed.operands[0][0]  # (M, C * kh * kw), integers
    m = w.shape[0]
    taps = np.empty((kh * kw, m, c), np.float32)
    np.copyto(taps, w.reshape(m, c, kh * kw).transpose(2, 0, 1))  # the cast, tap by tap
    out = np.empty((m, size), np.float32)
    np.copyto(out, bias.reshape(-1, 1))
    for t, start in enumerate(i * dh * wq + j * dw for i in range(kh) for j in range(kw)):
        gemm(taps[t], flat[:, start:start + size], out, 1.0)
    return out.reshape(1, m, ho, wq)[..., :wo]


def _centered_padded(x: np.ndarray, zp: int, begin: list[int], hq: int,
                     wq: int) -> np.ndarray:
    """x - zp (C, H, W) in float32 inside a zero buffer (C, hq, wq), `begin` rows and columns
    first (cropped where the buffer ends: those pixels are read by no output)."""
    (bh, bw), (h, w) = begin, x.shape[1:]
    padded = np.zeros((x.shape[0], hq, wq), np.float32)
    rows, cols = min(h, hq - bh), min(w, wq - bw)
    inner = padded[:, bh:bh + rows, bw:bw + cols]
    np.copyto(inner, x[:, :rows, :cols])
    if zp:
        inner -= zp
    return padded
