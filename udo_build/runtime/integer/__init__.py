"""The emulator's integer path: runs a QuantizedModel as the HTP runs a quantized graph.

Activations are uint8 (uint16 for 16-bit encodings), weights int8 (4-bit ones in int8, 16-bit
in int16) quantized once at load from the float weights with their (per-channel) encodings,
biases int32 in the accumulator's scale (s_x x s_w). Integer kernels accumulate exactly
(int32 semantics: matrix products through BLAS where it is exact, `exact.py`) and requantize to
the output's encoding with a fixed-point multiplier and shift, rounding halves to even
(`fixed.py`; in exact int64 arithmetic where float64 would not hold the product, `intmath.py`);
an absorbed Relu/Clip is the clamp of that requantization. Kernels: Conv (grouped, depthwise),
Gemm, MatMul (by weights, and of two activations with broadcast batch dimensions), Add, Sum,
Mul (numpy broadcasting, an encoding per input), Relu, Clip, MaxPool, AveragePool,
GlobalAveragePool, Concat, Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Identity, Dropout;
Softmax (an exp table and a fixed-point division), LayerNormalization and RMSNormalization
(int64 moments and an exact integer square root), and by table over every input code Gelu,
Sigmoid, Tanh, Erf, Softplus, Elu, LeakyRelu, HardSigmoid, HardSwish, Mish, Swish.
Every other op, and every custom op, runs its float kernel between dequantize and quantize
(`plan.py`); a node an integer kernel runs needs no float kernel.

Modules: registry (the INTEGER op package, binders), fixed (requantization), intmath (exact
int64 rounding, division, square roots), exact (exact BLAS products), taps (a convolution by
one exact GEMM per kernel tap, from its padded input), conv, gemm, eltwise,
pool, movement, lut (tables), transformer (Softmax, the normalizations): the kernel
families; plan, session.
"""

from __future__ import annotations

from . import (  # noqa: F401  (importing registers kernels)
    conv,
    eltwise,
    gemm,
    lut,
    movement,
    pool,
    transformer,
)
from .registry import INTEGER
from .session import QuantizedSession

__all__ = ["INTEGER", "QuantizedSession"]
