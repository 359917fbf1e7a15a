"""The built-in "default" op package: numpy kernels of the standard (ONNX opset 17) ops.

One module per op family registers its kernels on `DEFAULT` when imported. A kernel is a pure
function in ONNX semantics: inputs positionally in ONNX order (omitted optional inputs are None),
attributes keyword-only with the ONNX defaults; it returns an array, or a tuple when the op has
several outputs (optional trailing outputs may be returned even when the node does not use them;
the runtime keeps as many as the node names). A kernel that needs the node's number of outputs
(Split at opset 17) declares a keyword-only `num_outputs`, which the runtime fills in. Kernels
never modify their inputs; float32 stays float32.

Families: conv (Conv, ConvTranspose), pool (Max/Average/Lp/Global pools, LRN), gemm (Gemm,
MatMul), norm (Batch/Instance/Layer/Lp normalization), transformer_norm (Group, RMS and
MeanVariance normalization), elementwise (arithmetic, math, comparisons, logic, bitwise, Where,
IsInf, variadic Sum/Max/Min/Mean), cast (Cast, CastLike, with the narrow types of ml_dtypes),
activation (Relu family, Sigmoid, Gelu, Mish, Swish, Shrink, Softmax, LogSoftmax, Identity,
Dropout...), reduce (Reduce* at every opset, ArgMax/ArgMin), math_ext (CumSum, CumProd, Trilu,
Einsum, Det), shape (Reshape, Transpose, Concat, Split, Slice, Gather, Pad, Shape,
ConstantOfShape...), index (GatherND, ScatterND, ScatterElements, TopK, OneHot, NonZero,
Compress, ReverseSequence, NonMaxSuppression), recurrent (RNN, GRU, LSTM), attention
(RotaryEmbedding, Attention: opset 23 and later), resize (Resize), quantize_ops
(Quantize/DequantizeLinear, DynamicQuantizeLinear, QLinearMatMul, QLinearConv, MatMulInteger,
ConvInteger), sampling (GridSample, AffineGrid, RoiAlign, DeformConv), geometry (Col2Im,
CenterCropPad, MaxUnpool), signal (Hann/Hamming/Blackman windows, DFT, STFT, MelWeightMatrix),
misc (EyeLike, Unique, BitCast, NegativeLogLikelihoodLoss, SoftmaxCrossEntropyLoss).

Besides the ONNX ops, `conv` registers `FusedConv` (a Conv with its activation and an optional
residual addend), which only the runtime's execution plan creates (see
`udo_build.runtime.float_session`).
"""

from __future__ import annotations

from . import (  # noqa: F401  (importing a family registers its kernels)
    activation,
    attention,
    cast,
    conv,
    elementwise,
    gemm,
    geometry,
    index,
    math_ext,
    misc,
    norm,
    pool,
    quantize_ops,
    recurrent,
    reduce,
    resize,
    sampling,
    shape,
    signal,
    transformer_norm,
)
from ._package import DEFAULT
from .htp import HTP_OPS

DEFAULT.cpu_only(*sorted(set(DEFAULT.ops()) - HTP_OPS))  # every family registered by now

__all__ = ["DEFAULT"]
