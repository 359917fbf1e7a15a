"""The math, activation, normalization, reduction and cast kernels at the opsets that define
them, against onnx.reference.ReferenceEvaluator.

Each case is a one-node model at its own opset (Gelu is opset 20, RMSNormalization 23, ...),
run by the reference and by the emulator's runtime on the same node (no importer: this checks
the kernels at every opset they claim). Floats agree within 1e-5 relative (float16 within 1e-3),
narrow ml_dtypes floats (bfloat16, float8) bit for bit through float32, the rest exactly.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from udo_build.errors import UserError
from udo_build.kernels.default import DEFAULT

from .op_cases import Case
from .test_ops import emulate

_rng = np.random.default_rng(20)


def F(*shape: int, dtype: str = "float32", scale: float = 1.0) -> np.ndarray:  # noqa: N802
    return (_rng.standard_normal(shape) * scale).astype(dtype)


def N(*shape: int, dtype: str = "int32", low: int = -50, high: int = 50) -> np.ndarray:  # noqa: N802
    return _rng.integers(low, high, shape).astype(dtype)


def I(*values: int) -> np.ndarray:  # noqa: E743, N802
    return np.array(values, dtype=np.int64)


@dataclass(frozen=True)
class At:
    """A case at an opset."""

    opset: int
    op: str
    inputs: tuple[Any, ...]
    attrs: dict[str, Any] = field(default_factory=dict)
    id: str = ""

    def __str__(self) -> str:
        return f"{self.op}{self.opset}-{self.id}" if self.id else f"{self.op}{self.opset}"


def A(opset: int, op: str, *inputs: Any, id: str = "", **attrs: Any) -> At:  # noqa: A002, N802
    return At(opset, op, inputs, attrs, id)


WIDE = np.array([-3e5, -500.0, -2.5, -0.3, 0.0, 0.7, 1.5, 250.0, 3e5, np.inf, -np.inf, np.nan],
                dtype=np.float32)

ACTIVATIONS = [
    A(20, "Gelu", F(3, 17, scale=3), id="exact"),
    A(20, "Gelu", F(3, 17, scale=3), approximate="tanh", id="tanh"),
    A(22, "Mish", F(4, 11, scale=4)),
    A(24, "Swish", F(4, 11, scale=4)),
    A(24, "Swish", F(4, 11, scale=4), alpha=0.6, id="alpha"),
    A(9, "Shrink", F(5, 7, scale=2), id="hard"),
    A(9, "Shrink", F(5, 7, scale=2), bias=0.3, lambd=0.8, id="soft"),
    A(9, "Shrink", N(5, 7, dtype="int32", low=-5, high=5), bias=1.0, lambd=2.0, id="int32"),
    A(22, "Celu", F(3, 8, scale=2), alpha=1.7),
    A(13, "Sigmoid", F(4, 5, dtype="float16", scale=6), id="float16"),
]

ELEMENTWISE = [
    A(20, "IsInf", WIDE),
    A(20, "IsInf", WIDE, detect_negative=0, id="positive"),
    A(20, "IsInf", WIDE, detect_positive=0, id="negative"),
    A(18, "BitwiseAnd", N(3, 4, 5), N(4, 5), id="broadcast"),
    A(18, "BitwiseOr", N(2, 6, dtype="uint8", low=0, high=255), N(6, dtype="uint8", low=0,
                                                                     high=255)),
    A(18, "BitwiseXor", N(3, 4, dtype="int64"), N(3, 1, dtype="int64")),
    A(18, "BitwiseNot", N(3, 4, dtype="int16")),
    A(13, "Mod", N(4, 6), np.array([3, -4, 5, -7, 2, 9], np.int32), id="int"),
    A(13, "Mod", F(4, 6, scale=5), F(6, scale=3), fmod=1, id="fmod"),
    A(13, "Sign", F(3, 4)),
    A(13, "Equal", N(3, 4, low=0, high=3), N(4, low=0, high=3), id="int-broadcast"),
]

SCANS = [
    A(14, "CumSum", F(4, 5), np.array(1, np.int64)),
    A(14, "CumSum", F(4, 5), np.array(-2, np.int64), exclusive=1, id="exclusive"),
    A(14, "CumSum", F(4, 5, 3), np.array(1, np.int32), reverse=1, id="reverse"),
    A(14, "CumSum", N(6, 3), np.array(0, np.int64), exclusive=1, reverse=1, id="int-both"),
    A(26, "CumProd", F(3, 6), np.array(1, np.int64)),
    A(26, "CumProd", F(3, 6), np.array(0, np.int64), exclusive=1, reverse=1, id="both"),
    A(14, "Trilu", F(4, 6)),
    A(14, "Trilu", F(2, 4, 6), np.array(-1, np.int64), upper=0, id="lower-batched"),
    A(14, "Trilu", F(5, 3), np.array(2, np.int64), id="k2"),
    A(14, "Trilu", N(3, 3), np.array(-5, np.int64), upper=0, id="k-beyond"),
    A(12, "Einsum", F(2, 3, 4), F(2, 4, 5), equation="bij,bjk->bik", id="batch-matmul"),
    A(12, "Einsum", F(3, 4), equation="ij->ji", id="transpose"),
    A(12, "Einsum", F(3, 4), F(4, 2), equation="ij,jk", id="implicit"),
    A(12, "Einsum", F(2, 3, 3), equation="...ii ->...i", id="diagonal"),
    A(12, "Einsum", F(5), F(5), equation="i,i", id="inner"),
    A(22, "Det", F(3, 3)),
    A(22, "Det", F(2, 4, 4), id="batched"),
]

NORMALIZATIONS = [
    A(21, "GroupNormalization", F(2, 6, 4, 3), F(6), F(6), num_groups=3, id="per-channel"),
    A(18, "GroupNormalization", F(2, 6, 5), F(2), F(2), num_groups=2, epsilon=1e-3,
      id="per-group"),
    A(21, "GroupNormalization", F(1, 4, 3, 3), F(4), F(4), num_groups=1, id="one-group"),
    A(23, "RMSNormalization", F(2, 5, 8), F(8)),
    A(23, "RMSNormalization", F(2, 5, 8), F(5, 8), axis=1, epsilon=1e-2, id="axis1"),
    A(23, "RMSNormalization", F(3, 4), F(3, 4), axis=-2, id="negative-axis"),
    A(13, "MeanVarianceNormalization", F(2, 3, 4, 5)),
    A(13, "MeanVarianceNormalization", F(2, 3, 4), axes=[1, 2], id="axes"),
]

_R = F(3, 4, 5)
_POSITIVE = np.abs(F(3, 4, 5)) + 0.1
REDUCTIONS = [
    *(A(18, op, _POSITIVE, I(1), id="axes-input") for op in (
        "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
        "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp", "ReduceSum")),
    *(A(18, op, _R, I(0, -1), keepdims=0, id="two-axes-flat") for op in (
        "ReduceMean", "ReduceMax", "ReduceL2", "ReduceLogSumExp")),
    *(A(18, op, _R, id="all") for op in ("ReduceMean", "ReduceMin", "ReduceSumSquare")),
    *(A(18, op, _R, I(), noop_with_empty_axes=1, id="noop") for op in (
        "ReduceMean", "ReduceMax", "ReduceL1")),
    *(A(13, op, _POSITIVE, axes=[2, 0], id="axes-attribute") for op in (
        "ReduceMean", "ReduceMax", "ReduceProd", "ReduceLogSum")),
    *(A(18, op, np.zeros((2, 0, 4), np.float32), I(1), id="empty-set") for op in (
        "ReduceSum", "ReduceProd", "ReduceMax", "ReduceMin", "ReduceL2", "ReduceLogSum",
        "ReduceLogSumExp", "ReduceSumSquare")),
    A(20, "ReduceMax", _rng.random((3, 4)) > 0.5, I(1), id="bool"),
    A(20, "ReduceMin", _rng.random((3, 4)) > 0.5, I(0), keepdims=0, id="bool"),
    A(18, "ReduceMax", N(3, 5), I(1), id="int"),
    A(13, "ArgMax", np.array([[1, 3, 3, 0], [2, 2, 1, 2]], np.float32), axis=1,
      select_last_index=1, id="last"),
    A(13, "ArgMin", np.array([[1, 0, 3, 0], [2, 1, 1, 2]], np.float32), axis=-1, keepdims=0,
      select_last_index=1, id="last"),
]

_NARROW = np.array([0.3, -1.7, 300.0, -1e4, 1e6, np.inf, -np.inf, np.nan, -0.0, 2.5e-3, 7.5],
                   dtype=np.float32)
CASTS = [
    *(A(21, "Cast", _NARROW, to=to, id=TensorProto.DataType.Name(to)) for to in (
        TensorProto.BFLOAT16, TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E4M3FNUZ,
        TensorProto.FLOAT8E5M2, TensorProto.FLOAT8E5M2FNUZ, TensorProto.FLOAT16)),
    *(A(21, "Cast", _NARROW, to=to, saturate=0, id=f"{TensorProto.DataType.Name(to)}-wrap")
      for to in (TensorProto.FLOAT8E4M3FN, TensorProto.FLOAT8E5M2)),
    *(A(21, "Cast", np.arange(-9, 9, 1.5, dtype=np.float32), to=to,
        id=TensorProto.DataType.Name(to)) for to in (TensorProto.INT4, TensorProto.UINT4)),
    A(21, "Cast", F(3, 4, dtype="float16"), to=TensorProto.FLOAT8E5M2, id="from-float16"),
    A(21, "Cast", N(3, 4, dtype="int32", low=-300, high=300), to=TensorProto.INT8,
      id="int-wraps"),
    A(21, "CastLike", F(3, 4), np.zeros(1, np.float16), id="float16"),
]

CASES = ACTIVATIONS + ELEMENTWISE + SCANS + NORMALIZATIONS + REDUCTIONS + CASTS


def _model(case: At) -> Any:
    inputs = [f"in{i}" if x is not None else "" for i, x in enumerate(case.inputs)]
    node = helper.make_node(case.op, inputs, ["out0"], **case.attrs)
    graph = helper.make_graph(
        [node], "case",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(np.asarray(x).dtype),
                                       np.shape(x))
         for n, x in zip(inputs, case.inputs, strict=True) if n],
        [helper.make_empty_tensor_value_info("out0")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", case.opset)])


def oracle(case: At) -> np.ndarray:
    feeds = {f"in{i}": np.asarray(x) for i, x in enumerate(case.inputs) if x is not None}
    return np.asarray(ReferenceEvaluator(_model(case)).run(None, feeds)[0])


def _assert_agrees(got: np.ndarray, want: np.ndarray, case: At) -> None:
    assert isinstance(got, np.ndarray)
    assert (got.dtype, got.shape) == (want.dtype, want.shape), case
    if want.dtype.kind == "V":  # ml_dtypes' floats: the same values, NaN where NaN
        np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))
    elif want.dtype.kind == "f":
        rtol = 1e-3 if want.dtype.itemsize < 4 else 1e-5
        finite = np.abs(want[np.isfinite(want)])
        atol = rtol * 0.1 * max(1.0, float(finite.max(initial=0)))
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("case", CASES, ids=str)
def test_kernel_matches_the_reference_at_its_opset(case: At) -> None:
    want = oracle(case)
    attrs = {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in case.attrs.items()}
    got = emulate(Case(case.op, case.inputs, attrs), [want])[0]
    _assert_agrees(got, want, case)


MODULES = ("activation", "elementwise", "reduce", "cast", "math_ext", "transformer_norm")


def _scalar_ops() -> list[str]:
    """The ops of these families that take one float tensor of any rank and no attribute."""
    import inspect

    ops = []
    for op in DEFAULT.ops():
        fn = DEFAULT.select(op, ["float32"]).fn
        if fn.__module__.rsplit(".", 1)[-1] not in MODULES:
            continue
        params = inspect.signature(fn).parameters.values()
        required = [p for p in params if p.default is p.empty]
        if len(required) == 1 and required[0].kind == required[0].POSITIONAL_OR_KEYWORD:
            ops.append(op)
    return ops


def test_kernels_return_arrays_for_0d_inputs() -> None:
    """A ufunc on 0-d arrays returns a numpy scalar; the runtime stores arrays (read-only views
    of constants), so every kernel must give an array back."""
    x = np.array(0.75, np.float32)
    ops = _scalar_ops()
    assert {"Sigmoid", "Gelu", "Sqrt", "ReduceMean", "Softsign"} <= set(ops)
    for op in ops:
        if op in ("Softmax", "LogSoftmax", "Hardmax", "MeanVarianceNormalization", "Det",
                  "Trilu"):
            continue  # an axis (a matrix) a 0-d tensor does not have
        if op == "BitwiseNot":
            continue  # integers only
        with np.errstate(invalid="ignore"):  # Acosh of 0.75
            result = DEFAULT.select(op, ["float32"]).fn(x)
        first = result[0] if isinstance(result, tuple) else result
        assert isinstance(first, np.ndarray), op
    for op in ("Add", "Div", "Pow", "Mod", "Equal", "BitShift"):
        fn = DEFAULT.select(op, ["float32"]).fn
        args = (np.array(6, np.int32), np.array(2, np.int32))
        kwargs = {"direction": "LEFT"} if op == "BitShift" else {}
        assert isinstance(fn(*args, **kwargs), np.ndarray), op


@pytest.mark.parametrize(("op", "inputs", "attrs", "says"), [
    ("Gelu", (F(3),), {"approximate": "erf"}, "not supported: approximate='erf'"),
    ("Cast", (F(3),), {"to": TensorProto.FLOAT8E8M0}, "not supported: the target type 24"),
    ("Cast", (F(3),), {"to": TensorProto.STRING}, "not supported: the target type 8"),
    ("GroupNormalization", (F(1, 6, 2), F(4), F(4)), {"num_groups": 3}, "4 values"),
    ("GroupNormalization", (F(1, 6, 2), F(6), F(6)), {"num_groups": 4}, "does not divide"),
    ("RMSNormalization", (F(2, 3), F(3)), {"stash_type": 0}, "not supported: stash_type=0"),
    ("Einsum", (F(2, 3), F(4, 5)), {"equation": "ij,jk->ik"}, "does not fit"),
    ("Dropout", (F(3), np.array(0.5, np.float32), np.array(True)), {},
     "not supported: training mode"),
])
def test_unsupported_variants_and_bad_inputs_are_user_errors(op: str, inputs: tuple[Any, ...],
                                                         attrs: dict[str, Any],
                                                         says: str) -> None:
    with pytest.raises(UserError, match=re.escape(says)) as caught:
        DEFAULT.select(op, ["float32"]).fn(*inputs, **attrs)
    assert str(caught.value).startswith(f"{op}: ")


def test_half_float_gelu_is_rounded_once() -> None:
    """float16 Gelu computes in float32 and rounds once: within float16's half ulp (plus
    float32's error) of the exact value (the reference, all in float16, is further off)."""
    x = F(4, 25, dtype="float16", scale=3)
    got = DEFAULT.select("Gelu", ["float16"]).fn(x)
    exact = np.array([0.5 * v * (1 + math.erf(v / math.sqrt(2)))
                      for v in x.astype(np.float64).ravel()]).reshape(x.shape)
    assert got.dtype == np.float16
    ulp = np.spacing(np.abs(exact).astype(np.float16)).astype(np.float64)
    assert np.all(np.abs(got.astype(np.float64) - exact) <= 0.5 * ulp + 1e-6 * np.abs(exact))


def test_group_normalization_per_group_is_per_channel_repeated() -> None:
    """Opset 18's scale per group is opset 21's scale per channel, each value repeated over
    its group's channels."""
    fn = DEFAULT.select("GroupNormalization", ["float32"]).fn
    x, scale, bias = F(2, 6, 5), F(3), F(3)
    per_group = fn(x, scale, bias, num_groups=3)
    per_channel = fn(x, np.repeat(scale, 2), np.repeat(bias, 2), num_groups=3)
    np.testing.assert_array_equal(per_group, per_channel)
    assert per_group.dtype == np.float32


def test_cast_table_reads_every_supported_type() -> None:
    from udo_build.kernels.default.cast import NARROW_TYPES, NUMPY_TYPES, onnx_dtype

    for code in (*NUMPY_TYPES, *NARROW_TYPES):
        expected = helper.tensor_dtype_to_np_dtype(code)
        assert onnx_dtype(code) == np.dtype(expected), TensorProto.DataType.Name(code)
    value = numpy_helper.from_array(np.array([1.5], np.float32))
    assert value.data_type == TensorProto.FLOAT
