"""The quantization, sampling, geometry, signal and misc kernels against onnx's reference
evaluator, case by case (data tables; the runner of test_index_ops: one node at its opset, the
emulator's float Session vs onnx.reference). Floats agree within 1e-5 relative, integers
exactly. The variants here are the ones onnx's conformance cases leave out."""

from __future__ import annotations

import numpy as np
import pytest

from udo_build.errors import UserError

from .op_cases import F, I
from .test_index_ops import C, Case, check, emulate

_rng = np.random.default_rng(2031)


def U8(*shape: int) -> np.ndarray:  # noqa: N802
    return _rng.integers(0, 256, shape).astype(np.uint8)


def S8(*shape: int) -> np.ndarray:  # noqa: N802
    return _rng.integers(-128, 128, shape).astype(np.int8)


def S(*values: float) -> np.ndarray:  # noqa: N802
    return np.array(values, np.float32)


def Z(dtype: type, *values: int) -> np.ndarray:  # noqa: N802
    return np.array(values, dtype)


def grid(*shape: int, reach: float = 1.3) -> np.ndarray:
    return _rng.uniform(-reach, reach, shape).astype(np.float32)


QUANTIZE = [
    C("QuantizeLinear", F(2, 3, 4, scale=50), S(0.5, 0.25, 2.0), Z(np.int8, -3, 0, 7),
      axis=1, opset=21, id="int8-per-axis"),
    C("QuantizeLinear", F(2, 6, scale=300), S(0.7), Z(np.int16, 12), opset=21, id="int16"),
    C("QuantizeLinear", F(3, 6, scale=9), F(3, 2, scale=0.1) ** 2 + 0.05,
      Z(np.uint16, *range(6)).reshape(3, 2), axis=-1, block_size=3, opset=21,
      id="uint16-blocked-negative-axis"),
    C("QuantizeLinear", F(4, 5, scale=30), S(0.5), axis=0, output_dtype=3, opset=21,
      id="output-dtype-int8"),
    C("DequantizeLinear", S8(3, 4), S(0.1, 0.2, 0.3), Z(np.int8, 1, -2, 3), axis=0, opset=21,
      id="int8-per-axis"),
    C("DequantizeLinear", np.arange(-6, 6, dtype=np.int32).reshape(3, 4), S(0.5), opset=21,
      id="int32"),
    C("DequantizeLinear", U8(2, 6), np.array([[0.5, 2.0], [1.5, 0.25]], np.float32),
      np.array([[3, 200], [0, 128]], np.uint8), axis=1, block_size=3, opset=21, id="blocked"),
    C("DynamicQuantizeLinear", F(3, 5, scale=4) + 6, outputs=3, id="positive"),
    C("MatMulInteger", U8(2, 3, 4), U8(4, 5), Z(np.uint8, 120), Z(np.uint8, *range(5)),
      id="batched-per-column-zero"),
    C("MatMulInteger", S8(3, 4), S8(4, 2), Z(np.int8, -1), id="int8"),
    C("ConvInteger", U8(1, 4, 6, 6), U8(4, 2, 3, 3), Z(np.uint8, 100),
      Z(np.uint8, 1, 2, 3, 4), group=2, strides=[2, 1], pads=[1, 0, 1, 2],
      id="grouped-per-channel-zero"),
    C("QLinearMatMul", U8(2, 4, 3), S(0.02), Z(np.uint8, 128), U8(3, 5), S(0.03),
      Z(np.uint8, 120), S(0.5), Z(np.uint8, 100), opset=21, id="batched"),
    C("QLinearConv", U8(1, 3, 5, 5), S(0.05), Z(np.uint8, 110), S8(4, 3, 2, 2),
      S(0.02, 0.04, 0.01, 0.03), Z(np.int8, 0, 0, 0, 0), S(0.2), Z(np.uint8, 128),
      np.array([50, -20, 0, 300], np.int32), pads=[1, 1, 0, 0], strides=[2, 2],
      id="per-channel-bias"),
]

SAMPLING = [
    C("GridSample", F(2, 3, 5, 6), grid(2, 4, 3, 2, reach=2.5), mode="linear",
      padding_mode="reflection", align_corners=1, opset=20, id="reflection-aligned"),
    C("GridSample", F(1, 2, 5, 4), grid(1, 3, 3, 2, reach=2.0), mode="cubic",
      padding_mode="border", opset=20, id="cubic-border"),
    C("GridSample", F(1, 2, 5, 4), grid(1, 3, 3, 2, reach=2.5), mode="cubic",
      padding_mode="reflection", opset=20, id="cubic-reflection"),
    C("GridSample", F(1, 2, 3, 4, 5), grid(1, 2, 3, 2, 3, reach=1.6), mode="nearest",
      padding_mode="reflection", opset=20, id="3d-nearest-reflection"),
    C("GridSample", F(1, 2, 3, 4, 5), grid(1, 2, 2, 2, 3, reach=1.6), mode="linear",
      padding_mode="border", opset=20, id="3d-linear-border"),
    C("AffineGrid", F(2, 2, 3), I(2, 3, 4, 5), align_corners=0, opset=20, id="2d"),
    C("RoiAlign", F(2, 3, 8, 9), np.array([[0.5, 1, 6, 7.5], [2, 0, 8, 3], [-1, -1, 3, 12]],
                                          np.float32),
      I(1, 0, 1), output_height=3, output_width=2, spatial_scale=0.75, sampling_ratio=0,
      opset=16, id="adaptive-sampling"),
    C("RoiAlign", F(1, 2, 6, 6), np.array([[0, 0, 4, 5], [1, 2, 9, 3]], np.float32), I(0, 0),
      mode="max", output_height=2, output_width=3, sampling_ratio=1,
      coordinate_transformation_mode="output_half_pixel", opset=16, id="max"),
    C("DeformConv", F(1, 4, 7, 6), F(6, 2, 3, 2), F(1, 2 * 6 * 2, 3, 6, scale=1.5), F(6),
      np.abs(F(1, 2 * 6, 3, 6)), group=2, offset_group=2, strides=[2, 1], dilations=[1, 1],
      pads=[0, 1, 1, 0], opset=19, id="grouped-strided-mask"),
    C("DeformConv", F(2, 2, 6, 6), F(3, 2, 2, 2), F(2, 8, 4, 4, scale=0.7), dilations=[2, 2],
      opset=19, id="dilated"),
    C("Col2Im", F(1, 2 * 3, 4), I(6), I(3), strides=[1], id="1d", opset=18),
    C("Col2Im", F(2, 3 * 4, 6), I(4, 5), I(2, 2), strides=[2, 2], pads=[1, 0, 1, 1],
      dilations=[1, 2], id="everything", opset=18),
    C("CenterCropPad", F(5, 4, 3), I(2, 7), axes=[0, -2], id="odd-crop-and-pad", opset=18),
    C("MaxUnpool", F(1, 2, 2, 3), I(*[0, 5, 9, 14, 18, 23, 35, 33, 40, 41, 47, 46]).reshape(
        1, 2, 2, 3), kernel_shape=[3, 3], strides=[2, 3], pads=[1, 0, 0, 1], id="pads"),
]

SIGNAL = [
    C("HannWindow", np.array(7, np.int64), output_datatype=11, id="float64"),
    C("HammingWindow", np.array(6, np.int64), periodic=0, id="symmetric"),
    C("BlackmanWindow", np.array(9, np.int32), output_datatype=10, id="float16"),
    C("DFT", F(2, 7, 2), np.array(10, np.int64), axis=1, id="padded-complex"),
    C("DFT", F(3, 8, 1), np.array(5, np.int64), axis=1, onesided=1, id="truncated-rfft"),
    C("DFT", F(2, 3, 6, 2), None, np.array(-3, np.int64), inverse=1, opset=20,
      id="inverse-axis-input"),
    C("STFT", F(2, 40, 2), np.array(7, np.int64), None, np.array(10, np.int64), onesided=0,
      id="complex-signal"),
    C("MelWeightMatrix", np.array(6, np.int64), np.array(64, np.int64),
      np.array(16000, np.int64), S(100), S(7000), output_datatype=11, id="float64"),
]

MISC = [
    C("EyeLike", F(3, 5), k=-1, id="below"),
    C("EyeLike", np.zeros((4, 2), np.int64), dtype=9, k=1, id="bool"),
    C("Shrink", np.arange(-5, 6, dtype=np.int32), lambd=2.0, bias=1.0, id="int32"),
    C("MeanVarianceNormalization", F(2, 3, 4, 5), axes=[1, 3], id="axes"),
    C("Unique", np.array([[3, 1, 3], [2, 1, 3], [3, 1, 3]], np.int64), outputs=4, sorted=0,
      axis=0, id="rows-first-occurrence"),
    C("Unique", np.array([4.5, -1, 4.5, 0, -1, 7], np.float32), outputs=4, sorted=0,
      id="flat-first-occurrence"),
    C("Det", F(2, 3, 4, 4), id="batched"),
    C("NegativeLogLikelihoodLoss", F(5, 4), I(0, 3, 2, 3, 1), F(4) ** 2, ignore_index=3,
      reduction="mean", id="2d-weighted-ignored"),
    C("SoftmaxCrossEntropyLoss", F(3, 5, 2), np.array([[4, 0], [1, 1], [2, 4]], np.int64),
      outputs=2, reduction="sum", ignore_index=1, id="sum-with-log-prob"),
    C("BitCast", np.array([[1.5, -2.0]], np.float16), to=5, opset=26, id="float16-int16"),
]

CASES = [*QUANTIZE, *SAMPLING, *SIGNAL, *MISC]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_kernel_matches_the_reference(case: Case) -> None:
    check(case)


def test_cases_cover_every_kernel_of_these_families() -> None:
    from udo_build.kernels.default import DEFAULT

    families = ("quantize_ops", "sampling", "geometry", "signal", "misc")
    ops = {op for op in DEFAULT.ops()
           if any(impl.fn.__module__.endswith(f".{f}") for f in families
                  for impl in DEFAULT.impls(op))}
    assert ops <= {case.op for case in CASES}  # (a few cases test ops of other families too)


def test_unsupported_variants_are_refused_by_name() -> None:
    """A type or mode the package lacks is a NotImplementedError (the runtime's clean
    refusal) that says what, not a wrong value."""
    from udo_build.kernels.default import quantize_ops, sampling

    with pytest.raises(NotImplementedError, match="element type float8e4m3fn"):
        quantize_ops.quantize_linear(F(3), S(1.0), output_dtype=17)
    with pytest.raises(NotImplementedError, match="cubic of a 3-D image"):
        sampling.grid_sample(F(1, 1, 2, 2, 2), grid(1, 1, 1, 1, 3), mode="cubic")
    with pytest.raises(ValueError, match="padding_mode 'wrap'"):
        sampling.grid_sample(F(1, 1, 2, 2), grid(1, 1, 1, 2), padding_mode="wrap")


def test_a_refused_variant_reaches_the_user_as_not_supported() -> None:
    case = C("GridSample", F(1, 1, 2, 2, 2), grid(1, 1, 1, 1, 3), mode="cubic", opset=20,
             id="cubic-3d")
    with pytest.raises(UserError, match=r"GridSample \(node node\): not supported: "
                                        "GridSample cubic of a 3-D image"):
        emulate(case, [np.zeros((1, 1, 1, 1, 1), np.float32)])
