"""Per-op cases of the default package, as data: (op, inputs, ONNX attributes).

Each case becomes a one-node ONNX model at opset 17, run by onnx.reference.ReferenceEvaluator
(or by onnxruntime where the reference is wrong: its LRN sums over the batch axis) and by the
emulator. Inputs are numpy arrays (None: an omitted optional input); `F(...)` draws float32
N(0, 1) values, seeded by the case's position, so every run sees the same numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np

_rng = np.random.default_rng(20261121)


def F(*shape: int, scale: float = 1.0) -> np.ndarray:  # noqa: N802 (reads as a type)
    return (_rng.standard_normal(shape) * scale).astype(np.float32)


def P(*shape: int) -> np.ndarray:  # noqa: N802
    """Positive floats (logs, roots, powers)."""
    return _rng.uniform(0.2, 3.0, shape).astype(np.float32)


def I(*values: int) -> np.ndarray:  # noqa: E743, N802
    return np.array(values, dtype=np.int64)


@dataclass(frozen=True)
class Case:
    op: str
    inputs: tuple[Any, ...]
    attrs: dict[str, Any] = field(default_factory=dict)
    outputs: int = 1
    oracle: str = "reference"  # or "onnxruntime"
    id: str = ""

    def __str__(self) -> str:
        return f"{self.op}-{self.id}" if self.id else self.op


def C(op: str, *inputs: Any, outputs: int = 1, oracle: str = "reference", id: str = "",  # noqa: A002, N802
      **attrs: Any) -> Case:
    return Case(op, inputs, attrs, outputs, oracle, id)


CONV = [
    C("Conv", F(1, 3, 8, 8), F(4, 3, 3, 3), F(4), pads=[1, 1, 1, 1], id="3x3-pad-bias"),
    C("Conv", F(1, 3, 9, 8), F(5, 3, 3, 3), pads=[0, 1, 2, 1], strides=[2, 1], id="asym"),
    C("Conv", F(1, 2, 9, 9), F(3, 2, 3, 3), pads=[2, 2, 2, 2], dilations=[2, 2], id="dilated"),
    C("Conv", F(1, 2, 9, 9), F(3, 2, 3, 2), pads=[1, 0, 1, 3], dilations=[2, 1],
      strides=[2, 3], id="everything"),
    C("Conv", F(1, 4, 7, 7), F(6, 2, 3, 3), F(6), group=2, pads=[1, 1, 1, 1], id="group2"),
    C("Conv", F(2, 4, 7, 7), F(4, 1, 3, 3), F(4), group=4, pads=[1, 1, 1, 1], strides=[2, 2],
      id="depthwise"),
    C("Conv", F(1, 2, 6, 6), F(6, 1, 3, 3), group=2, pads=[0, 1, 1, 0], id="depth-multiplier"),
    C("Conv", F(1, 8, 6, 6), F(4, 2, 1, 1), group=4, id="grouped-1x1"),
    C("Conv", F(1, 3, 7, 7), F(5, 3, 1, 1), strides=[2, 2], id="1x1-s2"),
    C("Conv", F(1, 3, 4, 4), F(2, 3, 1, 1), F(2), pads=[1, 0, 0, 1], id="1x1-padded"),
    C("Conv", F(1, 3, 7, 8), F(4, 3, 3, 3), auto_pad="SAME_UPPER", strides=[2, 2],
      id="same-upper"),
    C("Conv", F(1, 3, 7, 8), F(4, 3, 4, 4), auto_pad="SAME_LOWER", id="same-lower"),
    C("Conv", F(1, 3, 7, 8), F(4, 3, 3, 3), auto_pad="VALID", id="valid"),
    C("Conv", F(2, 3, 9, 9), F(4, 3, 7, 7), F(4), pads=[3, 3, 3, 3], strides=[2, 2],
      id="7x7-s2-batch2"),
    C("Conv", F(1, 2, 10), F(3, 2, 3), pads=[1, 2], strides=[2], id="1d"),
    C("Conv", F(1, 2, 4, 5, 4), F(2, 2, 3, 3, 3), pads=[1, 0, 1, 1, 1, 0], id="3d"),
    C("ConvTranspose", F(1, 3, 4, 5), F(3, 2, 3, 3), F(2), id="basic"),
    C("ConvTranspose", F(1, 4, 3, 3), F(4, 1, 3, 2), strides=[2, 3], pads=[1, 0, 1, 1],
      output_padding=[1, 2], group=2, oracle="onnxruntime", id="strided-grouped"),
    C("ConvTranspose", F(2, 2, 3, 4), F(2, 3, 2, 2), dilations=[2, 1], strides=[2, 2],
      output_shape=[8, 8], id="output-shape"),
    C("ConvTranspose", F(1, 2, 5), F(2, 2, 3), strides=[2], auto_pad="SAME_UPPER",
      output_shape=[10], id="1d-same-upper"),
]

POOL = [
    C("MaxPool", F(1, 2, 7, 7), kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2],
      id="3x3-s2"),
    C("MaxPool", F(1, 2, 6, 6), kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1, id="ceil"),
    C("MaxPool", F(1, 2, 7, 6), kernel_shape=[2, 3], pads=[0, 1, 1, 0], strides=[2, 1],
      id="asym"),
    C("MaxPool", F(1, 1, 8, 8), kernel_shape=[2, 2], dilations=[2, 2], strides=[1, 1],
      id="dilated"),
    C("MaxPool", F(1, 2, 7, 7), kernel_shape=[3, 3], auto_pad="SAME_UPPER", strides=[2, 2],
      id="same-upper"),
    C("MaxPool", F(1, 2, 9), kernel_shape=[3], strides=[2], pads=[1, 1], id="1d"),
    C("AveragePool", F(1, 2, 7, 7), kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2],
      id="exclude-pad"),
    C("AveragePool", F(1, 2, 7, 7), kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2],
      count_include_pad=1, id="include-pad"),
    C("AveragePool", F(1, 2, 6, 6), kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1,
      id="ceil"),
    C("AveragePool", F(1, 2, 6, 6), kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1],
      ceil_mode=1, count_include_pad=1, id="ceil-include-pad"),
    C("AveragePool", F(1, 2, 7, 6), kernel_shape=[2, 3], pads=[0, 2, 1, 0], id="asym"),
    C("AveragePool", F(1, 3, 5, 5), kernel_shape=[5, 5], id="global-like"),
    C("LpPool", F(1, 2, 5, 5), kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[2, 2]),
    C("LpPool", F(1, 2, 5, 5), kernel_shape=[2, 2], p=3, id="p3"),
    C("GlobalAveragePool", F(2, 3, 5, 4)),
    C("GlobalMaxPool", F(2, 3, 5, 4)),
    C("LRN", F(1, 7, 3, 3), size=5, oracle="onnxruntime", id="alexnet"),
    C("LRN", F(2, 6, 2, 3), size=3, alpha=0.01, beta=0.5, bias=2.0, oracle="onnxruntime",
      id="size3-batch2"),
]

MATMUL = [
    C("Gemm", F(3, 4), F(4, 5), F(5), id="bias-row"),
    C("Gemm", F(4, 3), F(5, 4), F(3, 1), transA=1, transB=1, alpha=0.5, beta=2.0,
      id="transposed-column-bias"),
    C("Gemm", F(3, 4), F(5, 4), F(1), transB=1, id="scalar-bias"),
    C("Gemm", F(3, 4), F(4, 5), F(3, 5), beta=0.0, id="beta0"),
    C("Gemm", F(3, 4), F(4, 5), id="no-c"),
    C("MatMul", F(3, 4), F(4, 2), id="2d"),
    C("MatMul", F(2, 1, 3, 4), F(5, 4, 2), id="batched-broadcast"),
    C("MatMul", F(4), F(2, 4, 3), id="vector"),
]

NORM = [
    C("BatchNormalization", F(2, 3, 4, 5), F(3), F(3), F(3), P(3), epsilon=1e-3, id="4d"),
    C("BatchNormalization", F(4, 3), F(3), F(3), F(3), P(3), id="2d"),
    C("InstanceNormalization", F(2, 3, 4, 5), F(3), F(3)),
    C("LayerNormalization", F(2, 3, 4), F(4), F(4), id="last-axis"),
    C("LayerNormalization", F(2, 3, 4), F(3, 4), axis=1, outputs=3, id="axis1-3-outputs"),
]

ELEMENTWISE = [
    C("Add", F(2, 3, 4), F(3, 1), id="broadcast"),
    C("Sub", F(2, 3), F(3)),
    C("Mul", F(2, 3, 1, 1), F(1, 3, 4, 5), id="both-broadcast"),
    C("Div", F(2, 3), P(2, 3)),
    C("Div", I(7, -7, 9), I(2, 2, -4), id="int-truncates"),
    C("Pow", P(2, 3), F(2, 3)),
    C("Sum", F(2, 3), F(3), F(1, 3), id="three"),
    C("Sum", F(2, 3), id="one"),
    C("Max", F(2, 3), F(3), F(2, 1)),
    C("Min", F(2, 3), F(2, 3)),
    C("Mean", F(2, 3), F(3), F(2, 3)),
    C("Relu", F(3, 1024)),
    C("Relu", F(2, 3, 5), id="odd-size"),
    C("LeakyRelu", F(2, 3), alpha=0.2),
    C("PRelu", F(2, 3, 4), F(3, 1), id="channel-slope"),
    C("Clip", F(2, 3), np.array(-0.5, np.float32), np.array(0.5, np.float32)),
    C("Clip", F(2, 3), np.array(-0.5, np.float32), id="min-only"),
    C("Clip", F(2, 3), None, np.array(0.1, np.float32), id="max-only"),
    C("Sigmoid", F(2, 3, scale=40)),
    C("Tanh", F(2, 3)),
    C("HardSigmoid", F(2, 3, scale=4), alpha=0.3, beta=0.4),
    C("HardSwish", F(2, 3, scale=4)),
    C("Elu", F(2, 3), alpha=0.7),
    C("Selu", F(2, 3)),
    C("Softplus", F(2, 3, scale=30)),
    C("Exp", F(2, 3)),
    C("Log", P(2, 3)),
    C("Sqrt", P(2, 3)),
    C("Abs", F(2, 3)),
    C("Neg", F(2, 3)),
    C("Reciprocal", P(2, 3)),
    C("Erf", np.concatenate([F(50, scale=0.2), F(50, scale=2), np.array([0, 1e-4, -1e-3, 6],
                                                                        np.float32)])),
    C("Floor", F(2, 3, scale=3)),
    C("Ceil", F(2, 3, scale=3)),
    C("Where", F(2, 3) > 0, F(2, 3), F(3)),
    C("Equal", I(1, 2, 3), I(1, 0, 3)),
    C("Less", F(2, 3), F(3)),
    C("Greater", F(2, 3), F(2, 1)),
    C("Not", F(4) > 0),
    C("And", F(4) > 0, F(4) > 0),
    C("Or", F(4) > 0, F(4) > 0),
    C("Cast", F(2, 3, scale=5), to=7, id="to-int64"),
    C("Cast", I(1, 2), to=1, id="to-float"),
    C("Identity", F(2, 3)),
    C("Dropout", F(2, 3), id="inference"),
    C("Dropout", F(2, 3), outputs=2, id="with-mask"),
    C("Softmax", F(2, 3, 4), id="default-last-axis"),
    C("Softmax", F(2, 3, 4, scale=30), axis=1, id="axis1"),
    C("LogSoftmax", F(2, 5), axis=-1),
]

REDUCE = [
    C("ReduceSum", F(2, 3, 4), I(1, -1), keepdims=0, id="axes-input"),
    C("ReduceSum", F(2, 3), id="all"),
    C("ReduceSum", F(2, 3), I(), noop_with_empty_axes=1, id="noop"),
    C("ReduceMean", F(2, 3, 4), axes=[-1], id="negative-axis"),
    C("ReduceMean", F(2, 3, 4), id="all-keepdims"),
    C("ReduceMax", F(2, 3, 4), axes=[0, 2], keepdims=0),
    C("ReduceMin", F(2, 3), axes=[1]),
    C("ReduceProd", P(2, 3), axes=[1]),
    C("ReduceL2", F(2, 3), axes=[1]),
    C("ReduceL1", F(2, 3), axes=[0]),
    C("ReduceSumSquare", F(2, 3), axes=[1], keepdims=0),
    C("ReduceLogSumExp", F(2, 3, scale=30), axes=[1]),
    C("ArgMax", F(2, 3, 4), axis=1, keepdims=0),
    C("ArgMin", np.array([[1, 0, 0, 2]], np.float32), axis=-1, select_last_index=1,
      id="last-index"),
]

SHAPE = [
    C("Reshape", F(2, 3, 4), I(0, -1), id="zero-copies"),
    C("Reshape", F(2, 3, 4), I(4, 0, -1), id="zero-middle"),
    C("Reshape", np.zeros((0, 3), np.float32), I(3, 0), allowzero=1, id="allowzero"),
    C("Reshape", np.zeros((0, 3, 4), np.float32), I(3, 4, 0), allowzero=1,
      id="allowzero-reordered"),
    C("Reshape", np.zeros((2, 0, 3), np.float32), I(0, -1), id="empty-copies-and-infers"),
    C("Reshape", F(2, 3), I(6), id="rank-1"),
    C("Reshape", F(1), np.zeros(0, np.int64), id="to-rank-0"),
    C("Flatten", F(2, 3, 4), id="default"),
    C("Flatten", F(2, 3, 4), axis=0, id="axis0"),
    C("Flatten", F(2, 3, 4, 5), axis=-1, id="negative"),
    C("Transpose", F(2, 3, 4), perm=[2, 0, 1]),
    C("Transpose", F(2, 3, 4), id="reverse"),
    C("Squeeze", F(1, 3, 1, 2), I(-2), id="axes"),
    C("Squeeze", F(1, 3, 1, 2), id="all"),
    C("Unsqueeze", F(3, 4), I(0, -1)),
    C("Concat", F(2, 3), F(2, 1), F(2, 2), axis=-1),
    C("Split", F(6, 2), I(1, 5), outputs=2, id="sizes"),
    C("Split", F(2, 7), axis=1, outputs=3, id="equal-parts"),
    C("Slice", F(5, 6), I(1, -1), I(4, 0), I(0, 1), I(2, -2), id="steps"),
    C("Slice", F(5, 6), I(-1), I(-1000), I(0), I(-1), id="reverse-clamped"),
    C("Slice", F(5, 6), I(2), I(100), id="default-axes"),
    C("Gather", F(4, 3), I(0, -1, 2), id="axis0"),
    C("Gather", F(2, 5, 3), np.array([[1, -2], [0, 4]], np.int64), axis=1, id="axis1-2d"),
    C("Expand", F(3, 1), I(2, 1, 4)),
    C("Tile", F(2, 3), I(2, 1)),
    C("Pad", F(2, 3), I(1, 0, 0, 2), np.array(1.5, np.float32), id="constant"),
    C("Pad", F(3, 4), I(0, 2, 1, 1), mode="reflect", id="reflect"),
    C("Pad", F(3, 4), I(1, 1, 0, 2), mode="edge", id="edge"),
    C("Pad", F(3, 4), I(-1, 1, 0, -2), oracle="onnxruntime", id="negative-crops"),
    C("Shape", F(2, 3, 4), id="all"),
    C("Shape", F(2, 3, 4), start=1, end=-1, id="start-end"),
    C("Size", F(2, 3)),
    C("ConstantOfShape", I(2, 3), id="default"),
    C("ConstantOfShape", I(3), value=np.array([7], np.int64), id="int64"),
    C("ConstantOfShape", I(1, 2), value=np.array([0.5], np.float32), id="float32"),
    C("DepthToSpace", F(1, 8, 2, 3), blocksize=2, id="dcr"),
    C("DepthToSpace", F(1, 8, 2, 3), blocksize=2, mode="CRD", id="crd"),
    C("SpaceToDepth", F(1, 2, 4, 6), blocksize=2),
    C("Range", np.array(1.0, np.float32), np.array(4.0, np.float32),
      np.array(0.5, np.float32)),
]


def _f(*values: float) -> np.ndarray:
    return np.array(values, dtype=np.float32)


RESIZE = [
    C("Resize", F(1, 2, 3, 4), None, _f(1, 1, 2, 2), id="nearest-x2"),
    C("Resize", F(1, 2, 5, 4), None, _f(1, 1, 0.6, 1.7), nearest_mode="floor",
      coordinate_transformation_mode="asymmetric", id="nearest-floor-asymmetric"),
    C("Resize", F(1, 2, 3, 4), None, None, I(1, 2, 7, 5), nearest_mode="round_prefer_ceil",
      id="nearest-sizes"),
    C("Resize", F(1, 2, 3, 4), None, _f(1, 1, 2, 2), mode="linear", id="linear-half-pixel"),
    C("Resize", F(1, 2, 3, 4), None, None, I(1, 2, 5, 9), mode="linear",
      coordinate_transformation_mode="align_corners", id="linear-align-corners"),
    C("Resize", F(1, 2, 6, 4), None, _f(1, 1, 0.5, 1.5), mode="linear",
      coordinate_transformation_mode="pytorch_half_pixel", id="linear-pytorch"),
    C("Resize", F(2, 3, 4), None, None, I(2, 3, 1), mode="linear",
      coordinate_transformation_mode="pytorch_half_pixel", id="linear-to-one"),
]

CASES: list[Case] = [*CONV, *POOL, *MATMUL, *NORM, *ELEMENTWISE, *REDUCE, *SHAPE, *RESIZE]
