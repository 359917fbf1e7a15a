"""The integer path (udo_build.runtime.integer): every integer kernel against the exact result of
the one-op QDQ export (the export's arithmetic in float64 by onnx's reference evaluator,
tests/quant/oracle.py: the same on every machine), equal on every element but where the exact
value lies within float noise of a rounding tie, and there within 1 LSB; SqueezeNet end to end
(within 2 LSB); the float fallback of other ops and of custom ops between dequantize and
quantize, failures of user kernels, and intermediates freed after their last use.

onnxruntime is compared too (within 1 LSB on >= 99.9% of the elements), but only where a probe
finds its uint8 x int8 kernels exact on this machine: on CPUs without AVX-512 VNNI (AVX2 only)
they add products in saturating int16 pairs and miss by tens of LSB. Where the probe says so
the tests still check against the exact oracle, and a warning says what was found.

Encodings come from `qhelpers.encode` (min/max of the float activations), not from the quantize
pipeline, so these tests pin the integer path alone.
"""

from __future__ import annotations

import sys
import weakref
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from udo_build.errors import StepFailed
from udo_build.ir import Graph, Model, Node
from udo_build.ir.encodings import Encoding
from udo_build.kernels.load import load_kernels
from udo_build.kernels.oppkg import OpPackage
from udo_build.quant.qdq import to_qdq
from udo_build.runtime.integer import QuantizedSession
from udo_build.runtime.integer.exact import pack, product
from udo_build.runtime.integer.fixed import Requant, fixed_point, qtype, quantize

from .oracle import ExactQdq, assert_exact, exact_on_this_machine, onnxruntime_if_exact
from .qhelpers import encode, f32, single

ROOT = Path(__file__).resolve().parents[2]
_rng = np.random.default_rng(20261122)


@dataclass(frozen=True)
class A:
    """An activation (graph input): N(shift, scale^2) samples of this shape."""

    shape: tuple[int, ...]
    scale: float = 1.0
    shift: float = 0.0

    def sample(self, rng: np.random.Generator) -> np.ndarray:
        return (rng.standard_normal(self.shape) * self.scale + self.shift).astype(np.float32)


def act(*shape: int, scale: float = 1.0, shift: float = 0.0) -> A:
    return A(shape, scale, shift)


def he(*shape: int) -> np.ndarray:
    fan_in = int(np.prod(shape[1:]))
    return (_rng.standard_normal(shape) * np.sqrt(2 / fan_in)).astype(np.float32)


def w(*shape: int, scale: float = 0.2) -> np.ndarray:
    return (_rng.standard_normal(shape) * scale).astype(np.float32)


def k(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


@dataclass(frozen=True)
class Case:
    op: str
    inputs: tuple[Any, ...]  # A (graph input), an array (a constant), None (omitted)
    attrs: dict[str, Any] = field(default_factory=dict)
    then: str = ""  # an activation after the op ("Relu", "Clip"): absorbed
    options: dict[str, Any] = field(default_factory=dict)  # for qhelpers.encode
    integer: bool = True  # the op runs an integer kernel (else the float fallback)
    id: str = ""

    def __str__(self) -> str:
        return f"{self.op}-{self.id}" if self.id else self.op


def C(op: str, *inputs: Any, then: str = "", integer: bool = True, id: str = "",  # noqa: A002, N802
      options: dict[str, Any] | None = None, **attrs: Any) -> Case:
    return Case(op, inputs, attrs, then, options or {}, integer, id)


P1 = [1, 1, 1, 1]
CASES = [
    C("Conv", act(1, 3, 16, 16), he(8, 3, 3, 3), w(8), pads=P1, id="3x3-bias"),
    C("Conv", act(1, 8, 15, 15), he(16, 8, 3, 3), w(16), strides=[2, 2], pads=[1, 0, 1, 0],
      id="stride2-asymmetric-pads"),
    C("Conv", act(1, 4, 12, 12), he(8, 4, 3, 3), dilations=[2, 2], pads=[2, 2, 2, 2],
      id="dilated-no-bias"),
    C("Conv", act(1, 8, 10, 10), he(12, 4, 3, 3), w(12), group=2, pads=P1, id="group2"),
    C("Conv", act(2, 16, 10, 10), he(16, 1, 3, 3), w(16), group=16, pads=P1, id="depthwise"),
    C("Conv", act(1, 32, 12, 12), he(24, 32, 1, 1), w(24), id="1x1"),
    C("Conv", act(1, 16, 13, 13), he(24, 16, 1, 1), strides=[2, 2], id="1x1-stride2"),
    C("Conv", act(1, 3, 20, 20), he(16, 3, 7, 7), w(16), strides=[2, 2], pads=[3, 3, 3, 3],
      then="Relu", id="7x7-relu"),
    C("Conv", act(1, 8, 12, 12), he(16, 8, 3, 3), w(16), pads=P1, then="Clip", id="clip-0-6"),
    C("Conv", act(1, 8, 12, 12, shift=1.0), he(16, 8, 3, 3), w(16), pads=P1,
      options={"per_channel": False}, id="per-tensor"),
    C("Conv", act(1, 128, 6, 6), he(32, 128, 3, 3), w(32), pads=P1, id="K1152"),
    C("Conv", act(1, 16, 10, 10), he(16, 16, 3, 3), w(16), pads=P1,
      options={"weight_bits": 4}, id="4bit-weights"),
    C("Conv", act(1, 8, 10, 10), he(16, 8, 3, 3), w(16), pads=P1, options={"act_bits": 16},
      id="16bit-activations"),
    C("Conv", act(1, 4, 30), he(8, 4, 3), w(8), pads=[1, 1], id="1d"),
    C("Gemm", act(4, 64), w(32, 64), w(32), transB=1, id="transB"),
    C("Gemm", act(4, 64), w(64, 32), w(32), id="plain"),
    C("Gemm", act(2, 128), w(48, 128), w(48), transB=1, then="Relu", id="relu"),
    C("MatMul", act(3, 10, 64), w(64, 24), id="weights"),
    C("MatMul", act(2, 16, 32), act(2, 32, 24), id="activations"),
    C("Add", act(1, 8, 10, 10), act(1, 8, 10, 10, scale=3.0), id="two-scales"),
    C("Add", act(1, 8, 10, 10), act(1, 8, 1, 1, shift=1.0), id="broadcast"),
    C("Add", act(1, 8, 10, 10), act(1, 8, 10, 10), then="Relu", id="relu"),
    C("Add", act(1, 8, 10, 10), w(1, 8, 1, 1), id="constant"),
    C("Add", act(1, 8, 10, 10), act(1, 8, 10, 10, scale=2.0), options={"act_bits": 16},
      id="16bit"),
    C("Sum", act(1, 8, 10, 10), act(1, 8, 10, 10, scale=0.5), then="Relu", id="residual"),
    C("Sum", act(1, 8, 10, 10), act(1, 8, 10, 10), act(1, 8, 10, 10, scale=2.0),
      id="three"),
    C("Mul", act(1, 8, 10, 10), act(1, 8, 10, 10, scale=2.0), id="two"),
    C("Mul", act(1, 8, 10, 10), act(1, 8, 1, 1, shift=1.0), id="broadcast"),
    C("Mul", act(1, 8, 10, 10), w(1, 8, 1, 1, scale=1.0), id="constant"),
    C("Relu", act(1, 8, 12, 12), id="own-encoding"),
    C("Clip", act(1, 8, 12, 12), np.array(-1.0, np.float32), np.array(2.0, np.float32)),
    C("MaxPool", act(1, 8, 15, 15), kernel_shape=[3, 3], strides=[2, 2], id="rescaled"),
    C("MaxPool", act(1, 8, 15, 15), kernel_shape=[3, 3], strides=[2, 2], pads=P1,
      options={"shared": True}, id="shared-padded"),
    C("MaxPool", act(1, 8, 14, 14), kernel_shape=[3, 3], strides=[2, 2], ceil_mode=1,
      options={"shared": True}, id="ceil"),
    C("AveragePool", act(1, 8, 15, 15), kernel_shape=[3, 3], strides=[2, 2], pads=P1,
      id="pads-excluded"),
    C("AveragePool", act(1, 8, 15, 15), kernel_shape=[3, 3], strides=[2, 2], pads=P1,
      count_include_pad=1, id="pads-included"),
    C("AveragePool", act(1, 8, 14, 14), kernel_shape=[2, 2], strides=[2, 2], id="2x2"),
    C("GlobalAveragePool", act(1, 32, 7, 7, shift=0.5)),
    C("Concat", act(1, 4, 6, 6), act(1, 8, 6, 6, scale=2.0), axis=1),
    C("Reshape", act(1, 8, 6, 6), k(1, -1), id="rescaled"),
    C("Reshape", act(1, 8, 6, 6), k(2, 4, 36), options={"shared": True}, id="shared"),
    C("Flatten", act(2, 4, 3, 3), axis=1, options={"shared": True}),
    C("Transpose", act(1, 4, 6, 8), perm=[0, 2, 3, 1]),
    C("Squeeze", act(1, 16, 1, 1), k(2, 3), options={"shared": True}),
    C("Unsqueeze", act(4, 16), k(0), options={"shared": True}),
    C("Sigmoid", act(2, 8, 10), id="table"),
    C("Tanh", act(2, 8, 10), options={"act_bits": 16}, id="16bit-table"),
    C("LogSoftmax", act(2, 100, scale=3.0), axis=-1, integer=False, id="fallback"),
    C("Cos", act(2, 8, 10), integer=False, id="fallback"),
]


def build(case: Case) -> tuple[Model, list[dict[str, np.ndarray]], dict[str, np.ndarray]]:
    """The case's model, 3 calibration samples and one test sample."""
    rng = np.random.default_rng(zlib.crc32(str(case).encode()))
    inputs, weights, specs = [], {}, {}
    for i, spec in enumerate(case.inputs):
        name = f"in{i}"
        if spec is None:
            inputs.append(("", None))
        elif isinstance(spec, A):
            specs[name] = spec
            inputs.append((name, spec.sample(rng)))
        else:
            weights[name] = spec
            inputs.append((name, spec))
    model = single(case.op, inputs, weights, case.attrs, case.then)
    samples = [{n: s.sample(rng) for n, s in specs.items()} for _ in range(4)]
    return model, samples[:3], samples[3]


@pytest.mark.parametrize("case", CASES, ids=str)
def test_each_integer_op_is_exact(case: Case) -> None:
    model, samples, test = build(case)
    qmodel = encode(model, samples, **case.options)
    session = QuantizedSession(qmodel)
    step = next(s for s in session.plan(("y",)).steps if s.label.endswith("(node op)"))
    assert step.integer == case.integer, step.label
    if case.then:  # the activation was absorbed into the op's requantization
        assert [s.label for s in session.plan(("y",)).steps] == [step.label]
    quantized = {n: quantize(x, qmodel.activations[n]) for n, x in test.items()}
    ours = session.run_quantized(quantized)["y"]
    enc = qmodel.activations["y"]
    assert ours.dtype == qtype(enc)
    assert len(np.unique(ours)) > 8  # the case exercises the range, not one value
    dequantized = {n: qmodel.activations[n].dequantize(q) for n, q in quantized.items()}
    proto = to_qdq(qmodel)
    exact, unrounded = ExactQdq(proto).quantized_and_unrounded(dequantized, ["y"])["y"]
    assert ours.shape == exact.shape
    assert_exact(ours, exact, unrounded, str(case))
    runner, _ = onnxruntime_if_exact()
    if runner is not None:  # its kernels are exact here: it agrees but for float32 rounding
        theirs = quantize(runner(proto, dequantized, ["y"])[0], enc)
        diff = np.abs(ours.astype(np.int64) - theirs.astype(np.int64))
        within = float(np.mean(diff <= 1))
        assert within >= 0.999, f"onnxruntime: {within:.4%} within 1 LSB, max {diff.max()}"


def _saturating_u8s8(proto: Any, feeds: dict[str, np.ndarray],
                     names: list[str]) -> list[np.ndarray]:
    """A runner of the probe models as onnxruntime's u8s8 kernels run them on AVX2: uint8 x
    int8 products added in pairs into saturating int16 (vpmaddubsw), then in int32."""
    from onnx import numpy_helper

    graph = proto.graph
    inits = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    quants = [n for n in graph.node if n.op_type == "QuantizeLinear"]
    xq_node = next(n for n in quants if n.input[0] == "x")
    yq_node = next(n for n in quants if n.input[0] != "x")
    w_node = next(n for n in graph.node
                  if n.op_type == "DequantizeLinear" and n.input[0] in inits)
    x_scale, x_zero = float(inits[xq_node.input[1]]), int(inits[xq_node.input[2]])
    y_scale, y_zero = float(inits[yq_node.input[1]]), int(inits[yq_node.input[2]])
    w_scale = float(inits[w_node.input[1]])
    x = np.clip(np.rint(feeds["x"] / x_scale) + x_zero, 0, 255).astype(np.int32).reshape(-1)
    wq = inits[w_node.input[0]].astype(np.int32)
    conv = any(n.op_type == "Conv" for n in graph.node)
    w = wq.reshape(wq.shape[0], -1).T if conv else wq  # (K, N)
    pairs = (x[:, None] * w).reshape(-1, 2, w.shape[1]).sum(axis=1)
    acc = np.clip(pairs, -32768, 32767).sum(axis=0)
    q = np.clip(np.rint(acc * x_scale * w_scale / y_scale) + y_zero, 0, 255)
    y = ((q - y_zero) * y_scale).astype(np.float32)
    return [y.reshape(1, -1, 1, 1) if conv else y.reshape(1, -1)]


def test_the_probe_finds_saturating_kernels_inexact_and_exact_ones_exact() -> None:
    def exact_runner(proto: Any, feeds: dict[str, np.ndarray],
                     names: list[str]) -> list[np.ndarray]:
        return list(ExactQdq(proto).run(feeds, names).values())

    assert exact_on_this_machine(exact_runner) == (
        True, "its uint8 x int8 kernels are exact on this CPU")
    exact, found = exact_on_this_machine(_saturating_u8s8)
    assert not exact
    assert found.endswith("(int16 pair sums saturate): MatMul gives [101, 51] for [200, 100]; "
                          "Conv gives [101, 51] for [200, 100]"), found
    assert exact_on_this_machine(None) == (False, "onnxruntime is not installed")
    _, found_here = onnxruntime_if_exact()  # what the comparisons above ran with, for the log
    assert found_here.startswith("its uint8 x int8 kernels are ") or "not installed" in found_here


def test_the_float_path_agrees_with_the_integer_path_on_average() -> None:
    """The dequantized integer result tracks the float model (a sanity bound, not the
    oracle): a 3x3 convolution with ReLU within a few LSB of the float result."""
    case = CASES[7]
    model, samples, test = build(case)
    qmodel = encode(model, samples)
    ours = QuantizedSession(qmodel).run(test)["y"]
    from udo_build.runtime.float_session import Session

    ref = Session(model).run(test)["y"]
    assert np.abs(ours - ref).max() <= 4 * qmodel.activations["y"].scale


# -- requantization ------------------------------------------------------------------------------


@pytest.mark.parametrize("real", [0.75, 1e-3, 3.2e-5, 1.0, 0.999999999])
def test_fixed_point_multipliers_have_the_bits_asked(real: float) -> None:
    m0, shift = fixed_point(real, 24)
    assert 2 ** 23 <= int(m0) < 2 ** 24
    assert abs(int(m0) * 2.0 ** -int(shift) - real) <= real * 2.0 ** -24


def test_requantization_rounds_halves_to_even_and_clamps() -> None:
    out = Encoding(8, 0.5, -3)  # zero point 3
    requant = Requant.make(0.5, 1000, out)  # q = 3 + round(acc / 2)
    assert requant is not None
    acc = np.array([1.0, 3.0, 5.0, -1.0, -3.0, 600.0, -600.0])
    assert requant.apply(acc).tolist() == [3, 5, 5, 3, 1, 255, 0]
    relu = Requant.make(0.5, 1000, out, (0.0, None))
    assert relu is not None and relu.apply(acc).tolist() == [3, 5, 5, 3, 3, 255, 3]


@pytest.mark.parametrize("x_reach, w_max, k, chunks, dtype", [
    (255, 127, 64, 1, np.float32),  # small K: one float32 chunk
    (255, 127, 2000, 4, np.float32),  # sum|w| x 255 ~ 3.9 x 2^24: four float32 chunks
    (65535, 127, 300, 1, np.float64),  # 16-bit activations: float64
])
def test_exact_products_split_k_to_stay_exact(x_reach: int, w_max: int, k: int, chunks: int,
                                               dtype: type) -> None:
    rng = np.random.default_rng(k)
    w = rng.integers(-w_max, w_max + 1, (1, 8, k))
    w[0, 0] = w_max  # one channel at the worst case
    x = rng.integers(-x_reach, x_reach + 1, (k, 5))
    x[:, 0] = x_reach * np.sign(w[0, 0])  # its worst input
    packed = pack(w, x_reach)
    assert (len(packed.bounds), packed.dtype) == (chunks, np.dtype(dtype))
    expected = np.matmul(w[0].astype(np.int64), x.astype(np.int64))
    got = product(packed, x.astype(dtype))
    assert abs(float(expected[0, 0])) >= 2 ** 24 or k < 100  # beyond float32's exact range
    np.testing.assert_array_equal(got, expected)


# -- fallback and custom ops ---------------------------------------------------------------------


def _softplus_package() -> OpPackage:
    return load_kernels(ROOT / "examples" / "softplus" / "ops" / "kernels.py")[0]


def _udo_model() -> Model:
    """conv (absorbed relu) -> Softplus (custom) -> conv -> Sigmoid -> y."""
    nodes = (Node.make("c1", "Conv", ["x", "w1", "b1"], ["c1_out"], {"pads": P1}),
             Node.make("r1", "Relu", ["c1_out"], ["r1_out"]),
             Node.make("sp", "Softplus", ["r1_out"], ["sp_out"], {"beta": 1.0},
                       package="SoftplusPackage"),
             Node.make("c2", "Conv", ["sp_out", "w2"], ["c2_out"]),
             Node.make("sg", "Sigmoid", ["c2_out"], ["y"]))
    graph = Graph("udo", (f32("x", (1, 3, 8, 8)),), (f32("y"),), nodes,
                  (f32("sp_out", (1, 4, 8, 8)),))
    return Model(graph, {"w1": he(4, 3, 3, 3), "b1": w(4), "w2": he(6, 4, 1, 1)})


def _samples(n: int) -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(3)
    return [{"x": rng.standard_normal((1, 3, 8, 8)).astype(np.float32)} for _ in range(n)]


def test_a_custom_op_runs_its_float_kernel_between_dequantize_and_quantize() -> None:
    packages = {"SoftplusPackage": _softplus_package()}
    qmodel = encode(_udo_model(), _samples(3), packages=packages)
    session = QuantizedSession(qmodel, packages)
    kinds = {s.label: (s.integer, s.user) for s in session.plan(("y",)).steps}
    assert kinds == {"integer::Conv (node c1)": (True, False),
                     "SoftplusPackage::Softplus (node sp)": (False, True),
                     "integer::Conv (node c2)": (True, False),
                     "integer::Sigmoid (node sg)": (True, False)}
    x = _samples(4)[3]
    raw = session.run_quantized(x, ["r1_out", "sp_out", "c2_out", "y"])
    acts = qmodel.activations
    softplus = _softplus_package().impls("Softplus")[0].fn
    expected = quantize(softplus(acts["r1_out"].dequantize(raw["r1_out"])), acts["sp_out"])
    np.testing.assert_array_equal(raw["sp_out"], expected)
    sigmoid = 1 / (1 + np.exp(-acts["c2_out"].dequantize(raw["c2_out"]).astype(np.float64)))
    assert np.abs(raw["y"].astype(int) - acts["y"].quantize(sigmoid)).max() <= 1
    # requesting the absorbed conv output gives it, as float: its conv runs as float fallback
    assert session.run_quantized(x, ["c1_out"])["c1_out"].dtype == np.float32


def test_an_unencoded_tensor_stays_float_and_its_neighbours_convert() -> None:
    qmodel = encode(_udo_model(), _samples(3), unencoded=["c2_out"],
                    packages={"SoftplusPackage": _softplus_package()})
    session = QuantizedSession(qmodel, {"SoftplusPackage": _softplus_package()})
    steps = {s.label: s for s in session.plan(("y",)).steps}
    assert not steps["default::Conv (node c2)"].integer  # its output is float: fallback
    raw = session.run_quantized(_samples(4)[3], ["c2_out", "y"])
    assert raw["c2_out"].dtype == np.float32 and raw["y"].dtype == np.uint8
    expected = qmodel.activations["y"].quantize(1 / (1 + np.exp(-raw["c2_out"].astype(float))))
    assert np.abs(raw["y"].astype(int) - expected).max() <= 1


@pytest.mark.parametrize("body, message", [
    ("raise ValueError('bad beta')", "raised ValueError: bad beta"),
    ("return x.astype(np.float64)", "is float64, the model says float32"),
])
def test_a_failing_custom_kernel_is_the_users_step_failing(body: str, message: str) -> None:
    package = OpPackage("SoftplusPackage")
    namespace: dict[str, Any] = {"np": np}
    exec(f"def softplus(x, *, beta=1.0):\n    {body}\n", namespace)  # noqa: S102
    package.op("Softplus")(namespace["softplus"])
    good = {"SoftplusPackage": _softplus_package()}
    qmodel = encode(_udo_model(), _samples(2), packages=good)
    session = QuantizedSession(qmodel, {"SoftplusPackage": package})
    with pytest.raises(StepFailed, match=message):
        session.run(_samples(1)[0])


# -- freeing -------------------------------------------------------------------------------------


def test_intermediates_are_freed_after_their_last_use() -> None:
    """Probe UDOs on float (unencoded) tensors see which earlier arrays are still alive;
    integer steps free their inputs in the plan as the float runtime does."""
    made: dict[str, weakref.ref] = {}
    alive: list[list[str]] = []
    package = OpPackage("Probe")

    @package.op("Make")
    def make(x: np.ndarray) -> np.ndarray:
        alive.append(sorted(n for n, ref in made.items() if ref() is not None))
        out = x + np.float32(1)
        made[f"m{len(made) + 1}"] = weakref.ref(out)
        return out

    nodes = (Node.make("n1", "Make", ["x"], ["a"], package="Probe"),
             Node.make("n2", "Make", ["a"], ["b"], package="Probe"),
             Node.make("n3", "Relu", ["b"], ["c"]),
             Node.make("n4", "MaxPool", ["c"], ["d"], {"kernel_shape": [2, 2]}),
             Node.make("n5", "Make", ["d"], ["e"], package="Probe"),
             Node.make("n6", "Make", ["e"], ["y"], package="Probe"))
    model = Model(Graph("g", (f32("x", (1, 2, 4, 4)),), (f32("y"),), nodes))
    samples = [{"x": np.random.default_rng(i).standard_normal((1, 2, 4, 4), np.float32)}
               for i in range(2)]
    qmodel = encode(model, samples, packages={"Probe": package}, unencoded=["a", "e"])
    session = QuantizedSession(qmodel, {"Probe": package})
    plan = session.plan(("y",))
    assert [(s.integer, s.frees) for s in plan.steps] == [
        (False, ("x",)), (False, ("a",)), (True, ("b",)), (True, ("c",)), (False, ("d",)),
        (False, ("e",))]
    made.clear()
    alive.clear()
    session.run(samples[0])
    # m1 (a) is gone once n2 ran; m3 (e) is alive while n6 runs (it reads it), m2 (b, quantized
    # after n2) is gone by then
    assert alive == [[], ["m1"], [], ["m3"]]


# -- end to end ---------------------------------------------------------------------------------


def test_squeezenet_end_to_end_is_within_two_lsb_of_the_exact_result() -> None:
    sys.path.insert(0, str(ROOT / "bench"))
    try:
        import _light_models as light
    finally:
        sys.path.pop(0)
    from udo_build.model.onnx_import import import_onnx

    model = import_onnx(light.randomized("squeezenet", 0, import_onnx))
    x = model.graph.inputs[0]
    rng = np.random.default_rng(5)
    feeds = [{x.name: rng.standard_normal(x.static_shape).astype(np.float32)} for _ in range(4)]
    qmodel = encode(model, feeds[:3], shared=True)
    softmax = next(n for n in model.graph.nodes if n.op == "Softmax")
    logits = softmax.inputs[0]
    assert logits in qmodel.activations
    ours = QuantizedSession(qmodel).run_quantized(feeds[3], [logits])[logits]
    assert len(np.unique(ours)) > 50
    proto = to_qdq(qmodel)
    exact = ExactQdq(proto).quantized(feeds[3], [logits])[logits]
    diff = np.abs(ours.astype(int) - exact)  # roundings 1 LSB apart compound over 26 layers
    assert diff.max() <= 2, f"max {diff.max()} LSB, {np.mean(diff > 0):.2%} differ"
    runner, _ = onnxruntime_if_exact()
    if runner is not None:
        from onnx import TensorProto, helper

        proto.graph.output.append(helper.make_tensor_value_info(logits, TensorProto.FLOAT, None))
        theirs = quantize(runner(proto, feeds[3], [logits])[0], qmodel.activations[logits])
        diff = np.abs(ours.astype(int) - theirs.astype(int))
        assert diff.max() <= 2, f"onnxruntime: max {diff.max()} LSB, {np.mean(diff > 0):.2%} differ"
