"""The emulator's integer path: runs a QuantizedModel as the HTP runs a quantized graph.

Activations are uint8 (uint16 for 16-bit encodings), weights int8 (4-bit ones in int8, 16-bit
in int16) quantized once at load from the float weights with their (per-channel) encodings,
biases int32 in the accumulator's scale (s_x x s_w). Integer kernels accumulate exactly
(int32 semantics: matrix products through BLAS where it is exact, `exact.py`) and requantize to
the output's encoding with a fixed-point multiplier and shift, rounding halves to even
(`fixed.py`); an absorbed Relu/Clip is the clamp of that requantization. Kernels: Conv
(grouped, depthwise), Gemm, MatMul, Add, Sum, Mul, Relu, Clip, MaxPool, AveragePool,
GlobalAveragePool, Concat, Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Identity, Dropout.
Every other op, and every custom op, runs its float kernel between dequantize and quantize
(`plan.py`).

Modules: registry (the INTEGER op package, binders), fixed (requantization), exact (exact
BLAS products), conv, gemm, eltwise, pool, movement (the kernel families), plan, session.
"""

from __future__ import annotations

from . import conv, eltwise, gemm, movement, pool  # noqa: F401  (importing registers kernels)
from .registry import INTEGER
from .session import QuantizedSession

__all__ = ["INTEGER", "QuantizedSession"]
