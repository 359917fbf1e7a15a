"""The exact oracle of the integer-path tests: the QDQ export of a QuantizedModel
(udo_build.quant.qdq) evaluated by onnx's reference evaluator (`onnx.reference`) in float64.

Every QuantizeLinear becomes Clip(Round(x / scale) + zero_point, qmin, qmax) and every
DequantizeLinear (x - zero_point) * scale, all in double, with the export's own scales and zero
points; quantized weights and biases become their dequantized float64 values; every other node
runs as exported, on doubles. That is the QDQ model's arithmetic to ~1e-16 (relative): no
saturating int16 pair sums (onnxruntime's u8s8 kernels on CPUs without AVX-512 VNNI), no float32
accumulation; the same integers on every machine but where a value lies within ~1e-16 of a
rounding tie.

    exact = ExactQdq(to_qdq(qmodel))
    q = exact.quantized(feeds, ["y"])["y"]      # the integers the export's Q of y writes
    assert_exact(ours, *exact.quantized_and_unrounded(feeds, ["y"])["y"], "y")
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

_RANGES = {np.dtype(np.uint8): (0, 255), np.dtype(np.int8): (-128, 127),
           np.dtype(np.uint16): (0, 65535), np.dtype(np.int16): (-32768, 32767),
           np.dtype(np.int32): (-2 ** 31, 2 ** 31 - 1)}


class ExactQdq:
    def __init__(self, proto: onnx.ModelProto) -> None:
        self.model, self.quantized_of = _in_double(proto)
        self.evaluator = ReferenceEvaluator(self.model)

    def run(self, feeds: Mapping[str, np.ndarray], names: Sequence[str]) -> dict[str, np.ndarray]:
        """The float64 values of tensors `names` (graph outputs or intermediates)."""
        inputs = {k: np.asarray(v, np.float64) for k, v in feeds.items()}
        return dict(zip(names, self.evaluator.run(list(names), inputs), strict=True))

    def quantized(self, feeds: Mapping[str, np.ndarray],
                  names: Sequence[str]) -> dict[str, np.ndarray]:
        """The integers the export's QuantizeLinear writes for each encoded tensor of `names`
        (the tensor its DequantizeLinear reads), as int64."""
        return {n: q for n, (q, _) in self.quantized_and_unrounded(feeds, names).items()}

    def quantized_and_unrounded(self, feeds: Mapping[str, np.ndarray], names: Sequence[str]
                                ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Per encoded tensor of `names`: its integers (int64) and the value x / scale they
        were rounded from (float64), which tells where a result lies near a tie (x.5)."""
        wanted = [t for n in names for t in (self.quantized_of[n],
                                             f"{self.quantized_of[n]}/div")]
        values = self.run(feeds, wanted)
        out = {}
        for name in names:
            q = values[self.quantized_of[name]]
            assert np.array_equal(q, np.rint(q)), f"{name}: not integers"
            out[name] = (q.astype(np.int64), values[f"{self.quantized_of[name]}/div"])
        return out


def assert_exact(ours: np.ndarray, exact: np.ndarray, unrounded: np.ndarray, what: str) -> None:
    """`ours` equals the exact integers but where the exact value lies within float noise of a
    tie (x.5: fixed-point multipliers of 24 bits and float32 fallback kernels may round it the
    other way), and there by 1 at most."""
    diff = ours.astype(np.int64) - exact
    window = 2.0 ** -18 * np.maximum(1.0, np.abs(unrounded))
    near_tie = np.abs(np.abs(unrounded - np.floor(unrounded)) - 0.5) <= window
    wrong = (diff != 0) & ~((np.abs(diff) == 1) & near_tie)
    assert not wrong.any(), (
        f"{what}: {int(wrong.sum())} of {wrong.size} elements differ from the exact result away "
        f"from a rounding tie (by up to {int(np.abs(diff).max())} LSB); first at "
        f"{np.argwhere(wrong)[0].tolist()}: ours {ours[wrong][0]}, exact {exact[wrong][0]} "
        f"(from {unrounded[wrong][0]!r})")


def _in_double(proto: onnx.ModelProto) -> tuple[onnx.ModelProto, dict[str, str]]:
    graph = proto.graph
    consts = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    initializers: dict[str, np.ndarray] = {
        k: (v.astype(np.float64) if v.dtype.kind == "f" else v) for k, v in consts.items()}
    nodes: list[onnx.NodeProto] = []
    quantized_of: dict[str, str] = {}  # a DequantizeLinear's output -> the integers it reads
    taken = {n for node in graph.node for n in (*node.input, *node.output)} | set(consts)

    def fresh(base: str, value: np.ndarray) -> str:
        name, i = base, 1
        while name in taken:
            name, i = f"{base}_{i}", i + 1
        taken.add(name)
        initializers[name] = value
        return name

    for node in graph.node:
        if node.op_type not in ("QuantizeLinear", "DequantizeLinear"):
            if node.domain not in ("", "ai.onnx"):
                raise ValueError(f"node {node.name}: {node.domain}::{node.op_type} has no "
                                 "reference implementation")
            nodes.append(node)
            continue
        x, scale_name, zp_name = node.input
        scale, zp = consts[scale_name].astype(np.float64), consts[zp_name]
        axis = next((a.i for a in node.attribute if a.name == "axis"), 1)
        if node.op_type == "DequantizeLinear" and x in consts:  # a weight or a bias
            q = consts[x].astype(np.float64)
            shape = [1] * q.ndim
            if scale.ndim:
                shape[axis] = -1
            initializers[node.output[0]] = \
                (q - zp.astype(np.float64).reshape(shape)) * scale.reshape(shape)
            continue
        assert scale.ndim == 0, f"{node.name}: per-axis activations are not exported"
        s = fresh(f"{node.name}_scale64", scale)
        z = fresh(f"{node.name}_zero_point64", zp.astype(np.float64))
        out = node.output[0]
        if node.op_type == "QuantizeLinear":
            lo, hi = _RANGES[zp.dtype]
            lo_name = fresh(f"{node.name}_qmin", np.array(float(lo)))
            hi_name = fresh(f"{node.name}_qmax", np.array(float(hi)))
            nodes += [helper.make_node("Div", [x, s], [f"{out}/div"]),
                      helper.make_node("Round", [f"{out}/div"], [f"{out}/round"]),
                      helper.make_node("Add", [f"{out}/round", z], [f"{out}/add"]),
                      helper.make_node("Clip", [f"{out}/add", lo_name, hi_name], [out])]
        else:
            quantized_of[out] = x
            nodes += [helper.make_node("Sub", [x, z], [f"{out}/sub"]),
                      helper.make_node("Mul", [f"{out}/sub", s], [out])]
    double = helper.make_graph(
        nodes, graph.name, [_as_double(v) for v in graph.input if v.name not in consts],
        [_as_double(v) for v in graph.output],
        [numpy_helper.from_array(v, k) for k, v in initializers.items()])
    model = helper.make_model(double, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, quantized_of


def _as_double(value: onnx.ValueInfoProto) -> Any:
    t = value.type.tensor_type
    elem = TensorProto.DOUBLE if t.elem_type == TensorProto.FLOAT else t.elem_type
    shape = [d.dim_value if d.HasField("dim_value") else None for d in t.shape.dim] \
        if t.HasField("shape") else None
    return helper.make_tensor_value_info(value.name, elem, shape)


# -- is onnxruntime exact on this machine? -------------------------------------------------------

Runner = Callable[[onnx.ModelProto, dict[str, np.ndarray], list[str]], list[np.ndarray]]
K = 64  # the probe's reduction length: 32 pairs of products


def probe_models() -> list[tuple[str, Any, dict[str, np.ndarray]]]:
    """(name, QuantizedModel, feed) of a MatMul and a 1x1 Conv whose uint8 x int8 products come
    in pairs of 255 x 127 + 255 x 127 = 64770: more than int16 holds. Kernels that add pairs in
    saturating int16 (vpmaddubsw: onnxruntime's u8s8 kernels on AVX2 without AVX-512 VNNI) get
    32767 per pair and land ~100 LSB low; exact kernels give y = 200 (column 0: all +1) and 100
    (column 1: 8 pairs of +1 and 8 of -1, then 16 pairs of +1), far from any tie."""
    from udo_build.ir import Graph, Model, Node
    from udo_build.ir.encodings import Encoding
    from udo_build.ir.qmodel import QuantizedModel

    from .qhelpers import f32

    k = np.arange(K)
    signs = np.where((k < K // 2) & (k % 4 >= 2), -1.0, 1.0)  # + + - - ... then all +
    columns = np.stack([np.ones(K), signs], 1)
    acts = {"x": Encoding(8, 1 / 255, 0), "y": Encoding(8, 64 / 200, 0)}
    out = []
    for op in ("MatMul", "Conv"):
        if op == "MatMul":
            w, shape, attrs = columns.astype(np.float32), (1, K), {}
        else:
            w, shape, attrs = columns.T.reshape(2, K, 1, 1).astype(np.float32), (1, K, 1, 1), {}
        node = Node.make("op", op, ["x", "w"], ["y"], attrs)
        model = Model(Graph(f"probe_{op}", (f32("x", shape),), (f32("y"),), (node,)), {"w": w})
        params = {"w": [Encoding(8, 1 / 127, 0, signed=True)]}
        out.append((op, QuantizedModel(model, acts, params), {"x": np.ones(shape, np.float32)}))
    return out


def onnxruntime_runner() -> Runner | None:
    try:
        import onnxruntime as ort
    except ImportError:
        return None

    def run(proto: onnx.ModelProto, feeds: dict[str, np.ndarray],
            names: list[str]) -> list[np.ndarray]:
        options = ort.SessionOptions()
        options.log_severity_level = 3
        options.intra_op_num_threads = 1
        session = ort.InferenceSession(proto.SerializeToString(), options,
                                       providers=["CPUExecutionProvider"])
        return list(session.run(names, feeds))
    return run


def exact_on_this_machine(runner: Runner | None) -> tuple[bool, str]:
    """Whether `runner` (onnxruntime) computes the probe models' integer products exactly here,
    and what was found."""
    from udo_build.quant.qdq import to_qdq
    from udo_build.runtime.integer.fixed import quantize

    if runner is None:
        return False, "onnxruntime is not installed"
    found = []
    for name, qmodel, feed in probe_models():
        proto = to_qdq(qmodel)
        exact = ExactQdq(proto).quantized(feed, ["y"])["y"]
        got = quantize(runner(proto, feed, ["y"])[0], qmodel.activations["y"]).astype(np.int64)
        if not np.array_equal(got, exact):
            found.append(f"{name} gives {got.ravel().tolist()} for {exact.ravel().tolist()}")
    if found:
        return False, ("its uint8 x int8 kernels are not exact on this CPU (int16 pair sums "
                       "saturate): " + "; ".join(found))
    return True, "its uint8 x int8 kernels are exact on this CPU"


@functools.cache
def onnxruntime_if_exact() -> tuple[Runner | None, str]:
    """onnxruntime's runner when the probe finds its integer kernels exact on this machine, else
    None; and what the probe found (a warning says it where it keeps a comparison from running:
    the tests still check against the exact oracle)."""
    runner = onnxruntime_runner()
    exact, found = exact_on_this_machine(runner)
    if not exact:
        warnings.warn(f"onnxruntime is not compared: {found}; the exact oracle still is",
                      stacklevel=2)
    return (runner if exact else None), found
