"""Every default-package kernel against the ONNX reference on one-node opset-17 models.

The case table is `op_cases.py`. Each case runs through the emulator's runtime (a one-node
Model, its attributes converted as the importer converts them: tensors become lists) and through
onnx.reference.ReferenceEvaluator (or onnxruntime where the case says so); results must agree in
dtype and shape, and in value within 1e-5 relative for float32.
"""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

from udo_build.ir import Graph, Model, Node, TensorInfo
from udo_build.kernels.default import DEFAULT
from udo_build.runtime.float_session import Session

from .op_cases import CASES, Case

OPSET = 17


def _names(case: Case) -> tuple[list[str], list[str]]:
    inputs = [f"in{i}" if x is not None else "" for i, x in enumerate(case.inputs)]
    return inputs, [f"out{i}" for i in range(case.outputs)]


def _feeds(case: Case) -> dict[str, np.ndarray]:
    inputs, _ = _names(case)
    return {name: np.asarray(x) for name, x in zip(inputs, case.inputs, strict=True) if name}


def oracle(case: Case) -> list[np.ndarray]:
    inputs, outputs = _names(case)
    attrs = {k: numpy_helper.from_array(v) if isinstance(v, np.ndarray) else v
             for k, v in case.attrs.items()}
    node = helper.make_node(case.op, inputs, outputs, **attrs)
    feeds = _feeds(case)
    graph = helper.make_graph(
        [node], "case",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for n, v in feeds.items()],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, None) if case.oracle != "reference"
         else helper.make_empty_tensor_value_info(n) for n in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8  # opset 17; what onnxruntime reads
    if case.oracle == "onnxruntime":
        import onnxruntime

        session = onnxruntime.InferenceSession(model.SerializeToString(),
                                               providers=["CPUExecutionProvider"])
        return list(session.run(outputs, feeds))
    return list(ReferenceEvaluator(model).run(outputs, feeds))


def emulate(case: Case, expected: list[np.ndarray]) -> list[np.ndarray]:
    inputs, outputs = _names(case)
    feeds = _feeds(case)
    attrs = {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in case.attrs.items()}
    graph = Graph(
        "case", tuple(TensorInfo(n, v.dtype.name, v.shape) for n, v in feeds.items()),
        tuple(TensorInfo(n, np.asarray(e).dtype.name, np.shape(e))
              for n, e in zip(outputs, expected, strict=True)),
        (Node.make("node", case.op, inputs, outputs, attrs),))
    result = Session(Model(graph, {})).run(feeds)
    return [result[name] for name in outputs]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_kernel_matches_onnx(case: Case) -> None:
    expected = oracle(case)
    actual = emulate(case, expected)
    for got, want in zip(actual, expected, strict=True):
        want = np.asarray(want)
        assert isinstance(got, np.ndarray)
        assert (got.dtype, got.shape) == (want.dtype, want.shape), case
        if want.dtype.kind == "f":
            atol = 1e-6 * max(1.0, float(np.abs(want).max(initial=0)))
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=atol)
        else:
            np.testing.assert_array_equal(got, want)


def test_every_light_model_op_has_cases() -> None:
    light = {"Conv", "BatchNormalization", "Relu", "LRN", "MaxPool", "AveragePool",
             "GlobalAveragePool", "Concat", "Reshape", "Flatten", "Gemm", "Dropout", "Softmax",
             "Sum", "Add", "Mul", "Unsqueeze", "Transpose", "ConstantOfShape", "Shape"}
    assert light <= set(DEFAULT.ops())
    assert light <= {case.op for case in CASES}


def test_float32_stays_float32() -> None:
    untested = [c for c in CASES if any(isinstance(x, np.ndarray) and x.dtype == np.float64
                                        for x in c.inputs)]
    assert not untested  # the table itself must not smuggle float64 in


REDUCE_AXES_INPUT = ("ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                     "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp")
# Keyword arguments and inputs of later opsets that the kernels accept on top of opset 17.
LATER = {("AveragePool", "dilations"), ("LpPool", "dilations"), ("LpPool", "ceil_mode"),
         ("Cast", "saturate"), ("CastLike", "saturate"), ("Split", "num_outputs"),
         ("Pad", "axes"), ("SpaceToDepth", "mode"), ("Attention", "nonpad_kv_seqlen"),
         ("Attention", "left_window_size"), ("Attention", "right_window_size"),
         ("Cast", "round_mode"), ("CastLike", "round_mode"), ("GroupNormalization", "stash_type"),
         ("QuantizeLinear", "block_size"), ("QuantizeLinear", "output_dtype"),
         ("QuantizeLinear", "saturate"), ("QuantizeLinear", "precision"),
         ("DequantizeLinear", "block_size"), ("DequantizeLinear", "output_dtype"),
         ("DFT", "axis_tensor"),  # DFT's axis: an attribute to opset 19, an input from 20
         *((op, "noop_with_empty_axes") for op in REDUCE_AXES_INPUT)}
# Attributes at opset 17 that later opsets made inputs: one parameter binds either.
BOTH = {(op, "axes") for op in REDUCE_AXES_INPUT}


def _schema(op: str):  # type: ignore[no-untyped-def]
    """The op's schema at opset 17, or at the opset that introduced it when it is newer."""
    from onnx import defs

    try:
        return defs.get_schema(op, OPSET)
    except defs.SchemaError:
        return min((s for s in defs.get_all_schemas_with_history()
                    if s.name == op and s.domain == ""), key=lambda s: s.since_version)


def _signature_problems(op: str) -> list[str]:
    import inspect

    schema = _schema(op)
    params = inspect.signature(DEFAULT.select(op, ["float32"]).fn).parameters.values()
    keywords = {p.name: p for p in params if p.kind == p.KEYWORD_ONLY or (op, p.name) in BOTH}
    inputs = [p.name for p in params if p.kind == p.POSITIONAL_OR_KEYWORD]
    variadic = any(p.kind == p.VAR_POSITIONAL for p in params)
    problems = [f"{op}: no keyword {name}" for name in schema.attributes if name not in keywords]
    for name, attr in schema.attributes.items():
        default = keywords[name].default if name in keywords else None
        if attr.required:
            expected = inspect.Parameter.empty
        elif attr.default_value.type:
            expected = helper.get_attribute_value(attr.default_value)
            expected = expected.decode() if isinstance(expected, bytes) else expected
            if isinstance(expected, list):  # e.g. RNN's activations ["Tanh", "Tanh"]
                expected = tuple(e.decode() if isinstance(e, bytes) else e for e in expected)
        else:
            expected = None
        if default != pytest.approx(expected) if isinstance(expected, float) else \
                default != expected:
            problems.append(f"{op}.{name}: default {default!r}, ONNX {expected!r}")
    problems += [f"{op}: keyword {k} is not an ONNX attribute" for k in keywords
                 if k not in schema.attributes and (op, k) not in LATER
                 and k != "num_outputs"]  # the node's output count, filled by the runtime
    onnx_variadic = any(i.option == i.option.Variadic for i in schema.inputs)
    extra_inputs = [i for i in inputs if (op, i) in LATER | BOTH]
    if variadic != onnx_variadic or (not variadic and
                                     len(inputs) - len(extra_inputs) != len(schema.inputs)):
        problems.append(f"{op}: inputs {inputs}, ONNX {[i.name for i in schema.inputs]}")
    return problems


def test_kernel_signatures_follow_onnx_schemas() -> None:
    """Attributes are keyword-only with the ONNX defaults (required ones have none); inputs are
    positional, in ONNX order."""
    problems = [p for op in DEFAULT.ops() if op != "FusedConv" for p in _signature_problems(op)]
    assert not problems, "\n".join(problems)


def test_lrn_even_size_follows_the_spec_formula() -> None:
    """onnxruntime refuses even sizes and the reference sums over the wrong axis: the spec's
    window is [c - floor((size-1)/2), c + ceil((size-1)/2)]."""
    x = np.random.default_rng(3).standard_normal((2, 6, 2, 3)).astype(np.float32)
    size, alpha, beta, bias = 4, 0.01, 0.5, 2.0
    squares = np.zeros_like(x)
    for c in range(6):
        squares[:, c] = (x[:, max(0, c - 1):min(6, c + 3)] ** 2).sum(axis=1)
    expected = x / (bias + alpha / size * squares) ** beta
    got = DEFAULT.select("LRN", ["float32"]).fn(x, size=size, alpha=alpha, beta=beta, bias=bias)
    np.testing.assert_allclose(got, expected, rtol=1e-5)


def test_convolutions_return_arrays_that_own_their_data() -> None:
    """A session hands a kernel's fresh array to its caller as is and copies views (they may
    share a buffer): a convolution's result is written into its own array, not a reshaped
    view of the matmul's, so calibration and runs copy no convolution output."""
    from udo_build.kernels.default.conv import conv, fused_conv

    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4, 9, 9)).astype(np.float32)
    w = rng.standard_normal((6, 2, 3, 3)).astype(np.float32)
    for y in (conv(x, w, group=2, pads=[1, 1, 1, 1]), conv(x[:1], w[:, :1].repeat(4, 1)),
              fused_conv(x, w, None, np.ones((2, 6, 7, 7), np.float32), activation="Relu",
                         group=2)):
        assert y.flags.owndata and y.flags.c_contiguous and y.dtype == np.float32


def test_reshape_refuses_what_onnx_leaves_undefined() -> None:
    """A 0 past the input's rank copies no dimension, and with allowzero a 0 beside a -1 has no
    meaning (onnx's reference fails on both): a ValueError that says so, not an IndexError."""
    from udo_build.kernels.default.shape import reshape

    x = np.zeros((2, 3), np.float32)
    with pytest.raises(ValueError, match="input .2, 3. has rank 2"):
        reshape(x, np.array([6, 1, 0], np.int64))
    with pytest.raises(ValueError, match="a 0 and a -1 together"):
        reshape(np.zeros((0, 3), np.float32), np.array([0, -1], np.int64), allowzero=1)
