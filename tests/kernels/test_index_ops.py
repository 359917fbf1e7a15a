"""The index, recurrent and attention kernels against an oracle, case by case (data tables).

Each case is one node at its opset (ops and attributes newer than the importer's opset 17 run
at their own), run by the emulator's float Session on a Model built directly and by
onnx.reference.ReferenceEvaluator; recurrent ops use onnxruntime instead, because the
reference ignores sequence_lens, activations and clip. Floats agree within 1e-5 relative,
integers exactly.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest
from onnx import helper
from onnx.reference import ReferenceEvaluator

from udo_build.ir import Graph, Model, Node, TensorInfo
from udo_build.runtime.float_session import Session

from .op_cases import F, I, P
from .test_ops import _feeds, _names

_rng = np.random.default_rng(2020)


@dataclass(frozen=True)
class Case:
    op: str
    inputs: tuple[Any, ...]
    attrs: dict[str, Any] = field(default_factory=dict)
    outputs: int = 1
    opset: int = 17
    oracle: str = "reference"
    id: str = ""

    def __str__(self) -> str:
        return f"{self.op}-{self.id}"


def C(op: str, *inputs: Any, outputs: int = 1, opset: int = 17,  # noqa: N802
      oracle: str = "reference", id: str, **attrs: Any) -> Case:  # noqa: A002
    return Case(op, inputs, attrs, outputs, opset, oracle, id)


def B(*shape: int) -> np.ndarray:  # noqa: N802
    return _rng.random(shape) > 0.4


def boxes(n: int) -> np.ndarray:
    corners = _rng.uniform(0, 10, (1, n, 2, 2)).astype(np.float32)
    return np.concatenate([corners[:, :, 0], corners[:, :, 0] + corners[:, :, 1]], axis=-1)


TIES = np.array([[3, 1, 3, 2, 1, 3], [0, 0, 5, 5, 0, 1]], np.float32)

INDEX = [
    C("GatherND", F(2, 3, 4), I(1, 2, 0, -1).reshape(2, 2), id="pairs-negative"),
    C("GatherND", F(2, 3, 4), np.array([[[1], [0]], [[2], [1]]], np.int64), batch_dims=1,
      id="batch_dims1"),
    C("GatherND", np.arange(24, dtype=np.int32).reshape(2, 3, 4),
      np.array([[[0, 1, 2]], [[1, 2, 3]]], np.int64), id="full-index-int32"),
    C("ScatterND", F(4, 3), I(3, 0).reshape(2, 1), F(2, 3), id="rows"),
    C("ScatterND", F(4, 3), I(1, 1, -1, 0, 1, 1).reshape(3, 2), F(3), reduction="add",
      opset=18, id="add-repeated"),
    C("ScatterND", F(4, 3), I(1, 1, 1, 1).reshape(2, 2), F(2), reduction="mul", id="mul"),
    C("ScatterND", F(4, 3), I(0, 2, 0).reshape(3, 1), F(3, 3), reduction="max", opset=18,
      id="max"),
    C("ScatterND", F(4, 3), I(0, 2, 0).reshape(3, 1), F(3, 3), reduction="min", opset=18,
      id="min"),
    C("ScatterElements", F(3, 4), I(1, 0, 3, -1, 2, 0).reshape(3, 2), F(3, 2), axis=1,
      id="axis1-negative"),
    C("ScatterElements", F(3, 4), I(0, 0, 2, 0).reshape(1, 4), F(1, 4), axis=-2,
      reduction="add", id="add-negative-axis"),
    C("ScatterElements", F(2, 5), I(1, 1, 1, 0).reshape(2, 2), F(2, 2), axis=1,
      reduction="max", opset=18, id="max"),
    C("TopK", F(3, 7), I(3), outputs=2, id="largest"),
    C("TopK", F(4, 5, 3), I(2), axis=-2, largest=0, outputs=2, id="smallest-axis"),
    C("TopK", TIES, I(4), outputs=2, id="ties-largest"),
    C("TopK", TIES, I(5), largest=0, outputs=2, id="ties-smallest"),
    C("TopK", np.array([[7, 2, 9, 2, 7]], np.int64), I(5), outputs=2, id="int64-all"),
    C("TopK", F(2, 6), I(0), outputs=2, id="k0"),
    C("OneHot", I(0, 2, -1, 5, -7), np.array(4, np.int64), np.array([0.5, 3], np.float32),
      id="negative-and-outside"),
    C("OneHot", np.array([[1, 0], [3, -2]], np.float32), np.array(4.0, np.float32),
      np.array([1, 9], np.int64), axis=0, id="float-indices-axis0"),
    C("OneHot", I(2, 0, 1), np.array(3, np.int64), F(2), axis=0, id="axis0"),
    C("OneHot", I(1, 0, 2).reshape(3, 1), np.array(3, np.int32), F(2), axis=-2,
      id="negative-axis"),
    C("NonZero", np.array([[1, 0, 2], [0, 0, 3]], np.float32), id="2d"),
    C("NonZero", B(3, 2, 4), id="bool-3d"),
    C("Compress", F(3, 4), np.array([True, False, True, True]), axis=1, id="axis1"),
    C("Compress", F(3, 4), np.array([False, True]), axis=-2, id="short-condition"),
    C("Compress", F(2, 3), np.array([1, 0, 0, 1, 1], bool), id="flattened"),
    C("ReverseSequence", F(5, 3, 2), I(4, 1, 5), id="time-major"),
    C("ReverseSequence", F(3, 4), I(1, 2, 4), batch_axis=0, time_axis=1, id="batch-major"),
    C("NonMaxSuppression", boxes(12), F(1, 2, 12), I(4), np.array([0.3], np.float32),
      id="two-classes"),
    C("NonMaxSuppression", boxes(10), F(1, 1, 10), I(10), np.array([0.2], np.float32),
      np.array([0.1], np.float32), id="score-threshold"),
    C("NonMaxSuppression", np.abs(F(2, 8, 4)) + [0, 0, 1, 1], F(2, 1, 8), I(3),
      np.array([0.4], np.float32), center_point_box=1, id="centers-two-batches"),
    C("NonMaxSuppression", boxes(6)[:, :, [2, 3, 0, 1]], F(1, 1, 6), I(6),
      np.array([0.5], np.float32), id="flipped"),
    C("SpaceToDepth", F(2, 3, 4, 6), blocksize=2, mode="CRD", opset=28, id="crd"),
]

H = 4  # hidden size of the recurrent cases


def weights(gates: int, directions: int = 1, inputs: int = 3) -> tuple[np.ndarray, ...]:
    return (F(directions, gates * H, inputs, scale=0.5), F(directions, gates * H, H, scale=0.5),
            F(directions, 2 * gates * H, scale=0.3))


LENS = np.array([5, 2, 4], np.int32)
RT = "onnxruntime"

RECURRENT = [
    C("RNN", F(5, 3, 3), *weights(1), hidden_size=H, outputs=2, oracle=RT, id="forward"),
    C("RNN", F(5, 3, 3), *weights(1), LENS, F(1, 3, H), hidden_size=H, direction="reverse",
      outputs=2, oracle=RT, id="reverse-lens-initial"),
    C("RNN", F(5, 3, 3), *weights(1, 2), None, F(2, 3, H), hidden_size=H,
      direction="bidirectional", activations=["Relu", "Tanh"], outputs=2, oracle=RT,
      id="bidirectional-relu"),
    C("RNN", F(5, 3, 3, scale=3), *weights(1), hidden_size=H, clip=0.5,
      activations=["HardSigmoid"], activation_alpha=[0.3], activation_beta=[0.4], outputs=2,
      oracle=RT, id="clip-hardsigmoid"),
    C("GRU", F(5, 3, 3), *weights(3), hidden_size=H, outputs=2, oracle=RT, id="forward"),
    C("GRU", F(5, 3, 3), *weights(3), LENS, F(1, 3, H), hidden_size=H,
      linear_before_reset=1, outputs=2, oracle=RT, id="linear-before-reset-lens"),
    C("GRU", F(5, 3, 3), *weights(3, 2), LENS, hidden_size=H, direction="bidirectional",
      outputs=2, oracle=RT, id="bidirectional-lens"),
    C("GRU", F(5, 3, 3), *weights(3), hidden_size=H, direction="reverse",
      activations=["Sigmoid", "Relu"], outputs=2, oracle=RT, id="reverse-relu"),
    C("LSTM", F(5, 3, 3), *weights(4), hidden_size=H, outputs=3, oracle=RT, id="forward"),
    C("LSTM", F(5, 3, 3), *weights(4), LENS, F(1, 3, H), F(1, 3, H), F(1, 3 * H),
      hidden_size=H, outputs=3, oracle=RT, id="peepholes-lens-initial"),
    C("LSTM", F(5, 3, 3), *weights(4, 2), LENS, None, None, F(2, 3 * H),
      direction="bidirectional", hidden_size=H, outputs=3, oracle=RT,
      id="bidirectional-peepholes"),
    C("LSTM", F(5, 3, 3), *weights(4), None, F(1, 3, H), F(1, 3, H), hidden_size=H,
      direction="reverse", input_forget=1, clip=1.0, outputs=3, oracle=RT,
      id="reverse-coupled-clip"),
    C("LSTM", F(5, 3, 3), weights(4)[0], weights(4)[1], hidden_size=H,
      activations=["HardSigmoid", "Tanh", "Softsign"], activation_alpha=[0.25],
      activation_beta=[0.45], outputs=3, oracle=RT, id="no-bias-activations"),
]


def cache(positions: int, half: int) -> tuple[np.ndarray, np.ndarray]:
    angles = _rng.uniform(0, 6.3, (positions, half)).astype(np.float32)
    return np.cos(angles), np.sin(angles)


POSITIONS = np.array([[0, 3, 5], [2, 1, 7]], np.int64)

ATTENTION = [
    C("RotaryEmbedding", F(2, 3, 3, 8), *cache(8, 4), POSITIONS, opset=23,
      id="4d-position-ids"),
    C("RotaryEmbedding", F(2, 3, 12), *cache(8, 2), POSITIONS, num_heads=3, interleaved=1,
      opset=23, id="3d-interleaved"),
    C("RotaryEmbedding", F(2, 2, 3, 8), *(c[:6].reshape(2, 3, 2) for c in cache(8, 2)),
      rotary_embedding_dim=4, opset=23, id="partial-no-ids"),
    C("Attention", F(2, 3, 4, 8), F(2, 3, 6, 8), F(2, 3, 6, 5), opset=23, id="4d"),
    C("Attention", F(2, 4, 16), F(2, 6, 8), F(2, 6, 8), q_num_heads=4, kv_num_heads=2,
      opset=23, id="3d-gqa"),
    C("Attention", F(1, 2, 3, 4), F(1, 2, 3, 4), F(1, 2, 3, 4), None, F(1, 2, 5, 4),
      F(1, 2, 5, 4), is_causal=1, outputs=4, opset=23, id="causal-past-present"),
    C("Attention", F(2, 2, 3, 4), F(2, 2, 5, 4), F(2, 2, 5, 4), B(2, 1, 3, 4), scale=0.3,
      softcap=2.0, qk_matmul_output_mode=2, outputs=4, opset=23, id="short-bool-mask"),
    C("Attention", F(1, 2, 3, 4), F(1, 2, 5, 4), F(1, 2, 5, 4), F(3, 5),
      qk_matmul_output_mode=3, is_causal=1, outputs=4, opset=23, id="float-mask-causal"),
    C("Attention", F(2, 2, 2, 4), F(2, 2, 6, 4), F(2, 2, 6, 4), None, None, None,
      np.array([4, 6], np.int64), is_causal=1, opset=24, id="nonpad-kv"),
    C("Attention", F(1, 2, 5, 4), F(1, 2, 5, 4), F(1, 2, 5, 4), left_window_size=1,
      right_window_size=2, opset=25, id="window"),
]

CASES = [*INDEX, *RECURRENT, *ATTENTION]


def oracle(case: Case) -> list[np.ndarray]:
    inputs, outputs = _names(case)
    feeds = _feeds(case)
    graph = helper.make_graph(
        [helper.make_node(case.op, inputs, outputs, **case.attrs)], "case",
        [helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
         for n, v in feeds.items()],
        [helper.make_empty_tensor_value_info(n) for n in outputs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", case.opset)])
    if case.oracle == "onnxruntime":
        import onnxruntime

        model.ir_version = 8
        for out in model.graph.output:
            out.type.tensor_type.elem_type = 1  # float32: what onnxruntime wants declared
        session = onnxruntime.InferenceSession(model.SerializeToString(),
                                               providers=["CPUExecutionProvider"])
        return list(session.run(outputs, feeds))
    return list(ReferenceEvaluator(model).run(outputs, feeds))


def emulate(case: Case, expected: list[np.ndarray]) -> list[np.ndarray]:
    inputs, outputs = _names(case)
    feeds = _feeds(case)
    graph = Graph(
        "case", tuple(TensorInfo(n, v.dtype.name, v.shape) for n, v in feeds.items()),
        tuple(TensorInfo(n, np.asarray(e).dtype.name, np.shape(e))
              for n, e in zip(outputs, expected, strict=True)),
        (Node.make("node", case.op, inputs, outputs, case.attrs),))
    result = Session(Model(graph, {})).run(feeds)
    return [result[name] for name in outputs]


def check(case: Case) -> None:
    """The emulator's outputs equal the oracle's: dtypes and shapes, floats to 1e-5."""
    expected = oracle(case)
    actual = emulate(case, expected)
    for got, want in zip(actual, expected, strict=True):
        want = np.asarray(want)
        assert (got.dtype, got.shape) == (want.dtype, want.shape), case
        if want.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=str(case))
        else:
            np.testing.assert_array_equal(got, want, err_msg=str(case))


@pytest.mark.parametrize("case", CASES, ids=str)
def test_kernel_matches_oracle(case: Case) -> None:
    check(case)


def test_cases_cover_every_kernel_of_these_families() -> None:
    from udo_build.kernels.default import DEFAULT

    families = ("index", "recurrent", "attention")
    ops = {op for op in DEFAULT.ops()
           if DEFAULT.impls(op)[0].fn.__module__.rsplit(".", 1)[-1] in families}
    assert ops == {case.op for case in CASES} - {"SpaceToDepth"}


@pytest.mark.parametrize("op", ["RNN", "GRU", "LSTM"])
def test_recurrent_layout1_is_layout0_batch_major(op: str) -> None:
    """layout=1 (batch-major X, Y and states; onnxruntime has no such kernel) gives the
    layout-0 results, transposed."""
    from udo_build.kernels.default import DEFAULT

    fn = DEFAULT.select(op, ["float32"]).fn
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op]
    x, states = F(5, 3, 3), [F(2, 3, H) for _ in range(2 if op == "LSTM" else 1)]
    batch_major = [s.transpose(1, 0, 2) for s in states]
    args = (*weights(gates, 2), LENS)
    time_major = fn(x, *args, *states, direction="bidirectional")
    batch = fn(x.transpose(1, 0, 2), *args, *batch_major, direction="bidirectional", layout=1)
    np.testing.assert_array_equal(batch[0], time_major[0].transpose(2, 0, 1, 3))
    for got, want in zip(batch[1:], time_major[1:], strict=True):
        np.testing.assert_array_equal(got, want.transpose(1, 0, 2))


def test_topk_keeps_ties_in_index_order() -> None:
    """Equal values come out lower index first, both ways (onnx's rule), for every dtype."""
    from udo_build.kernels.default.index import top_k

    for dtype in (np.float32, np.int32, np.uint64):
        x = np.array([2, 5, 2, 5, 1, 2], dtype)
        values, order = top_k(x, I(4))
        assert order.tolist() == [1, 3, 0, 2] and values.tolist() == [5, 5, 2, 2]
        values, order = top_k(x, I(3), largest=0)
        assert order.tolist() == [4, 0, 2] and values.dtype == dtype


def test_bad_attributes_name_the_op_and_the_allowed_values() -> None:
    from udo_build.kernels.default import index, recurrent

    with pytest.raises(ValueError, match="reduction 'sum' is not one of none, add"):
        index.scatter_nd(F(3), I(0).reshape(1, 1), F(1), reduction="sum")
    with pytest.raises(ValueError, match="direction 'both' is not one of forward"):
        recurrent.rnn(F(2, 1, 3), *weights(1)[:2], direction="both")
    with pytest.raises(ValueError, match="activation 'Gelu' is not one of relu"):
        recurrent.gru(F(2, 1, 3), *weights(3)[:2], activations=["Gelu", "Tanh"])
    with pytest.raises(ValueError, match="TopK k=9 is outside"):
        index.top_k(P(2, 4), I(9))
