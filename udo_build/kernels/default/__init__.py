"""The built-in "default" op package: numpy kernels of the standard (ONNX opset 17) ops.

One module per op family registers its kernels on `DEFAULT` when imported. A kernel is a pure
function in ONNX semantics: inputs positionally in ONNX order (omitted optional inputs are None),
attributes keyword-only with the ONNX defaults; it returns an array, or a tuple when the op has
several outputs (optional trailing outputs may be returned even when the node does not use them;
the runtime keeps as many as the node names). A kernel that needs the node's number of outputs
(Split at opset 17) declares a keyword-only `num_outputs`, which the runtime fills in. Kernels
never modify their inputs; float32 stays float32.

Families: conv (Conv, ConvTranspose), pool (Max/Average/Lp/Global pools, LRN), gemm (Gemm,
MatMul), norm (Batch/Instance/Layer/Lp normalization), elementwise (arithmetic, math,
comparisons, logic, Where, Cast, variadic Sum/Max/Min/Mean), activation (Relu family, Sigmoid,
Softmax, LogSoftmax, Identity, Dropout...), reduce (Reduce*, ArgMax/ArgMin), shape (Reshape,
Transpose, Concat, Split, Slice, Gather, Pad, Shape, ConstantOfShape...), index (GatherND,
ScatterND, ScatterElements, TopK, OneHot, NonZero, Compress, ReverseSequence,
NonMaxSuppression), recurrent (RNN, GRU, LSTM), attention (RotaryEmbedding, Attention: opset
23 and later), resize (Resize nearest/linear), quantize_ops (Quantize/DequantizeLinear,
DynamicQuantizeLinear, QLinearMatMul, QLinearConv, MatMulInteger, ConvInteger), sampling
(GridSample, AffineGrid, RoiAlign, DeformConv), geometry (Col2Im, CenterCropPad, MaxUnpool),
signal (Hann/Hamming/Blackman windows, DFT, STFT, MelWeightMatrix), misc (EyeLike, Shrink,
MeanVarianceNormalization, Unique, Det, BitCast, NegativeLogLikelihoodLoss,
SoftmaxCrossEntropyLoss).

Besides the ONNX ops, `conv` registers `FusedConv` (a Conv with its activation and an optional
residual addend), which only the runtime's execution plan creates (see
`udo_build.runtime.float_session`).
"""

from __future__ import annotations

from . import (  # noqa: F401  (importing a family registers its kernels)
    activation,
    attention,
    conv,
    elementwise,
    gemm,
    geometry,
    index,
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
)
from ._package import DEFAULT

__all__ = ["DEFAULT"]
