"""Which of the default package's ops the HTP runs; the others run on the CPU runtime, in a
subnet of their own (udo_build.compiler.partition), as the vendor runtime falls back.

The list is the ONNX ops that the vendor's HTP op set expresses, read from the public mapping of
ONNX ops onto QNN HTP ops (the op builders of onnxruntime's QNN execution provider), plus the
ops that never reach the device because conversion or prepare removes them (constants, shape
arithmetic on static shapes, inference-mode Dropout) and the ops conversion rewrites into
mapped ones: CastLike (a Cast once the type is known), FusedConv (the emulator's own Conv with
its activation) and Erf, which the vendor's converter meets in the Gelu pattern
x * 0.5 * (1 + erf(x / sqrt(2))) and rewrites into the HTP's Gelu. An op of the package missing
here is CPU-only (marked in the package's __init__); `docs/ops.md` shows the split.
"""

from __future__ import annotations

MAPPED = frozenset("""
    Abs Add And ArgMax ArgMin Asin Atan AveragePool BatchNormalization Cast Ceil Clip Concat
    Conv ConvTranspose Cos CumSum DepthToSpace DequantizeLinear Div Einsum Elu Equal Exp Expand
    Flatten Floor Gather GatherElements GatherND Gelu Gemm GlobalAveragePool GlobalMaxPool
    Greater GreaterOrEqual GridSample GroupNormalization GRU HardSigmoid HardSwish Identity If
    InstanceNormalization IsNaN LayerNormalization LeakyRelu Less LessOrEqual Log LogSoftmax
    LpNormalization LRN LSTM MatMul Max MaxPool Mean Min Mod Mul Neg NonZero Not Or Pad Pow
    PRelu QuantizeLinear RandomNormalLike RandomUniformLike Reciprocal ReduceL2 ReduceMax
    ReduceMean ReduceMin ReduceProd ReduceSum Relu Reshape Resize RMSNormalization RoiAlign
    RotaryEmbedding Round ScatterElements ScatterND Selu Sigmoid Sign Sin Slice Softmax
    Softplus SpaceToDepth Split Sqrt Squeeze STFT Sub Sum Tan Tanh ThresholdedRelu Tile TopK
    Transpose Unsqueeze Upsample Where Xor
""".split())

REMOVED = frozenset("Constant ConstantOfShape Dropout Range Shape Size".split())

REWRITTEN = frozenset("CastLike Erf FusedConv".split())

HTP_OPS = MAPPED | REMOVED | REWRITTEN
