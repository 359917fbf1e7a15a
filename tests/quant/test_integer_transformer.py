"""The integer kernels of transformer ops (udo_build.runtime.integer: gemm, eltwise, lut,
transformer).

MatMul of two activations and broadcast Add/Mul are checked against the exact QDQ oracle
(tests/quant/oracle.py), as every integer kernel of test_integer.py is. Tables (Gelu, Sigmoid,
...), Softmax and the normalizations are integer algorithms of their own: each is checked on
every element against an independent, per-element Python-integer implementation of the algorithm
the module documents (exact rationals for the last requantization, so equal but within float
noise of a tie), and for accuracy against the float op quantized (within 1 LSB). A small
transformer block checks the whole: every op integer, SQNR against float close to the QDQ
model's.
"""

from __future__ import annotations

import math
import zlib
from fractions import Fraction
from typing import Any

import numpy as np
import pytest

from udo_build.ir import Graph, Model, Node
from udo_build.ir.encodings import Encoding
from udo_build.ir.qmodel import QuantizedModel
from udo_build.quant.qdq import to_qdq
from udo_build.quant.quantizers import asymmetric, symmetric_weights
from udo_build.runtime.float_session import Session
from udo_build.runtime.integer import QuantizedSession
from udo_build.runtime.integer.fixed import quantize

from .oracle import ExactQdq, assert_exact
from .qhelpers import encode, f32, single


def _rhe(num: int, den: int) -> int:
    """round_half_even(num / den) in Python integers (den > 0)."""
    q, r = divmod(num, den)
    return q + (1 if 2 * r > den or (2 * r == den and q % 2) else 0)


def _requantized(values: list[Fraction], out: Encoding) -> tuple[np.ndarray, np.ndarray]:
    """Exact codes of real values in units of out's scale (Fractions), and those values as
    floats (where they lie near a tie)."""
    q = [min(max(_rhe(v.numerator, v.denominator) - out.offset, out.qmin), out.qmax)
         for v in values]
    return np.array(q, np.int64), np.array([float(v) - out.offset for v in values])


def _session_of(op: str, x: Encoding, y: Encoding, shape: tuple[int, ...],
                weights: dict[str, np.ndarray] | None = None,
                params: dict[str, list[Encoding]] | None = None,
                **attrs: Any) -> QuantizedSession:
    weights = weights or {}
    node = Node.make("op", op, ["x", *weights], ["y"], attrs)
    model = Model(Graph("case", (f32("x", shape),), (f32("y"),), (node,)), weights)
    session = QuantizedSession(QuantizedModel(model, {"x": x, "y": y}, params or {}))
    assert [s.label for s in session.plan(("y",)).steps] == [f"integer::{op} (node op)"]
    return session


# -- against the exact QDQ oracle -----------------------------------------------------------------


def _act(rng: np.random.Generator, shape: tuple[int, ...], scale: float = 1.0,
         shift: float = 0.0) -> np.ndarray:
    return (rng.standard_normal(shape) * scale + shift).astype(np.float32)


EXACT_CASES = [  # op, input shapes (scale), act bits, id
    ("MatMul", [((2, 4, 16, 32), 1.0), ((2, 4, 32, 16), 1.0)], 8, "attention-scores"),
    ("MatMul", [((2, 1, 8, 32), 1.0), ((1, 3, 32, 8), 2.0)], 8, "broadcast-batch"),
    ("MatMul", [((3, 8, 64), 1.0), ((64, 8), 0.5)], 8, "2d-right-activation"),
    ("MatMul", [((2, 4, 16, 16), 0.2), ((2, 4, 16, 32), 1.0)], 16, "16bit-attention-values"),
    ("MatMul", [((32,), 1.0), ((2, 32, 8), 1.0)], 8, "vector-left"),
    ("MatMul", [((2, 8, 32), 1.0), ((32,), 1.0)], 8, "vector-right"),
    ("Add", [((4, 1, 6), 1.0), ((3, 1), 3.0)], 8, "both-broadcast"),
    ("Add", [((2, 3, 4, 5), 1.0), ((5,), 0.1)], 16, "16bit-row"),
    ("Mul", [((4, 1, 6), 1.0), ((3, 6), 2.0)], 8, "both-broadcast"),
    ("Mul", [((2, 8, 16), 1.0), ((2, 1, 16), 3.0)], 16, "16bit-broadcast"),
]


def _exact_case(op: str, shapes: list[tuple[tuple[int, ...], float]], bits: int,
                id_: str, mixed: bool = False) -> None:
    rng = np.random.default_rng(zlib.crc32(f"{op}{id_}".encode()))
    inputs = [(f"in{i}", _act(rng, s, scale)) for i, (s, scale) in enumerate(shapes)]
    model = single(op, inputs, {}, {})
    samples = [{n: _act(rng, v.shape, float(np.std(v))) for n, v in inputs} for _ in range(3)]
    qmodel = encode(model, samples, act_bits=bits)
    if mixed:  # the second input 8-bit, the rest 16-bit
        e = qmodel.activations["in1"]
        lo, hi = e.scale * (e.qmin + e.offset), e.scale * (e.qmax + e.offset)
        qmodel.activations["in1"] = asymmetric(lo, hi, 8)
    session = QuantizedSession(qmodel)
    assert [s.integer for s in session.plan(("y",)).steps] == [True]
    test = {n: _act(rng, v.shape, float(np.std(v))) for n, v in inputs}
    quantized = {n: quantize(x, qmodel.activations[n]) for n, x in test.items()}
    ours = session.run_quantized(quantized)["y"]
    assert len(np.unique(ours)) > 8
    dequantized = {n: qmodel.activations[n].dequantize(q) for n, q in quantized.items()}
    exact, unrounded = ExactQdq(to_qdq(qmodel)).quantized_and_unrounded(dequantized, ["y"])["y"]
    assert ours.shape == exact.shape
    assert_exact(ours, exact, unrounded, f"{op}-{id_}")


@pytest.mark.parametrize("op, shapes, bits, id_", EXACT_CASES, ids=[c[3] for c in EXACT_CASES])
def test_matmul_and_broadcast_eltwise_are_exact(op: str, shapes: Any, bits: int,
                                                id_: str) -> None:
    _exact_case(op, shapes, bits, id_)


@pytest.mark.parametrize("op", ["Add", "Mul", "MatMul"])
def test_inputs_of_different_bit_widths_are_exact(op: str) -> None:
    shapes = [((2, 8, 16), 1.0), ((2, 16, 8) if op == "MatMul" else (1, 16), 2.0)]
    _exact_case(op, shapes, 16, "mixed", mixed=True)


# -- tables -----------------------------------------------------------------------------------


def _gelu(x: float, approximate: str) -> float:
    if approximate == "tanh":
        return 0.5 * x * (1 + math.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1 + math.erf(x / math.sqrt(2)))


TABLES = [  # op, attrs, float function, input range, bits
    ("Gelu", {}, lambda x: _gelu(x, "none"), (-5.0, 5.0), 8),
    ("Gelu", {"approximate": "tanh"}, lambda x: _gelu(x, "tanh"), (-4.0, 6.0), 8),
    ("Gelu", {}, lambda x: _gelu(x, "none"), (-6.0, 6.0), 16),
    ("Sigmoid", {}, lambda x: 1 / (1 + math.exp(-x)), (-8.0, 8.0), 16),
    ("Swish", {"alpha": 1.5}, lambda x: x / (1 + math.exp(-1.5 * x)), (-6.0, 6.0), 8),
    ("HardSwish", {}, lambda x: x * min(max(x / 6 + 0.5, 0), 1), (-6.0, 6.0), 8),
]


@pytest.mark.parametrize("op, attrs, f, span, bits", TABLES,
                         ids=[f"{t[0]}-{t[4]}bit-{t[1].get('approximate', '')}" for t in TABLES])
def test_table_activations_equal_the_float_op_quantized_on_every_code(
        op: str, attrs: dict[str, Any], f: Any, span: tuple[float, float], bits: int) -> None:
    """Every input code (256 or 65536) through the kernel, against f in Python floats; there
    is no float kernel of Gelu in the default package to run as fallback."""
    x_enc = asymmetric(*span, bits)
    ys = [f(v) for v in np.linspace(*span, 1001)]
    y_enc = asymmetric(min(ys), max(ys), bits)
    session = _session_of(op, x_enc, y_enc, (2 ** bits,), **attrs)
    codes = np.arange(2 ** bits).astype(np.uint8 if bits == 8 else np.uint16)
    ours = session.run_quantized({"x": codes})["y"]
    reals = [f(x_enc.scale * (int(q) + x_enc.offset)) for q in codes]
    expected = [min(max(round(y / y_enc.scale) - y_enc.offset, 0), 2 ** bits - 1) for y in reals]
    np.testing.assert_array_equal(ours.astype(np.int64), expected)
    assert len(np.unique(ours)) > 2 ** bits // 8  # the table spans the output range


# -- Softmax ---------------------------------------------------------------------------------


def _softmax_reference(q: np.ndarray, x: Encoding, y: Encoding,
                       axis: int) -> tuple[np.ndarray, np.ndarray]:
    """The documented algorithm, per row in Python integers; the last step exact."""
    moved = np.moveaxis(q.astype(np.int64), axis, -1)
    rows = moved.reshape(-1, moved.shape[-1])
    table: dict[int, int] = {}
    values = []
    for row in rows.tolist():
        top = max(row)
        e = [table.setdefault(top - v, round(math.exp(-x.scale * (top - v)) * 2 ** 24))
             for v in row]
        total = sum(e)
        values += [Fraction(_rhe(v << 22, total), 2 ** 22) / Fraction(y.scale) for v in e]
    codes, unrounded = _requantized(values, y)
    shape = moved.shape
    return (np.moveaxis(codes.reshape(shape), -1, axis),
            np.moveaxis(unrounded.reshape(shape), -1, axis))


@pytest.mark.parametrize("shape, axis, bits, spread", [
    ((2, 4, 16, 16), -1, 8, 3.0),
    ((2, 4, 8, 32), -1, 16, 4.0),
    ((3, 10, 6), 1, 8, 1.0),
])
def test_softmax_follows_its_integer_algorithm_and_the_float_op(
        shape: tuple[int, ...], axis: int, bits: int, spread: float) -> None:
    rng = np.random.default_rng(bits * 100 + len(shape))
    x = rng.standard_normal(shape) * spread
    x_enc = asymmetric(float(x.min()), float(x.max()), bits)
    y_enc = asymmetric(0.0, 1.0, bits)
    session = _session_of("Softmax", x_enc, y_enc, shape, axis=axis)
    q = quantize(x, x_enc)
    ours = session.run_quantized({"x": q})["y"]
    exact, unrounded = _softmax_reference(q, x_enc, y_enc, axis)
    assert_exact(ours, exact, unrounded, "Softmax")
    real = x_enc.dequantize(q).astype(np.float64)
    e = np.exp(real - real.max(axis=axis, keepdims=True))
    reference = y_enc.quantize(e / e.sum(axis=axis, keepdims=True))
    assert np.abs(ours.astype(np.int64) - reference).max() <= 1
    assert len(np.unique(ours)) > 16


# -- LayerNormalization, RMSNormalization ---------------------------------------------------------


def _norm_reference(q: np.ndarray, x: Encoding, gamma: np.ndarray, g: Encoding,
                    beta_real: np.ndarray | None, y: Encoding, axis: int, eps: float,
                    rms: bool) -> tuple[np.ndarray, np.ndarray]:
    """The documented algorithm, per row in Python integers; the last step exact."""
    n = math.prod(q.shape[axis:])
    rows = (q.astype(np.int64) + x.offset).reshape(-1, n).tolist()
    gc = np.broadcast_to(gamma.astype(np.int64) + g.offset, q.shape[axis:]).reshape(-1).tolist()
    unit = g.scale * 2.0 ** -24
    beta = [0] * n if beta_real is None else [
        round(float(b) / unit) for b in np.broadcast_to(beta_real, q.shape[axis:]).reshape(-1)]
    eps_term = round(n * n * (eps / x.scale ** 2))
    values = []
    for c in rows:
        s1, s2 = sum(c), sum(v * v for v in c)
        d = [n * v for v in c] if rms else [n * v - s1 for v in c]
        r = max((n * s2 if rms else n * s2 - s1 * s1) + eps_term, 1)
        lift = max((60 - r.bit_length()) // 2, 0)
        rho = _rhe(2 ** 59, math.isqrt(r << (2 * lift)))
        normalized = [_rhe(v * rho, 2 ** (59 - lift - 24)) for v in d]
        values += [(v * gk + bk) * Fraction(unit) / Fraction(y.scale)
                   for v, gk, bk in zip(normalized, gc, beta, strict=True)]
    codes, unrounded = _requantized(values, y)
    return codes.reshape(q.shape), unrounded.reshape(q.shape)


def _float_norm(x: np.ndarray, gamma: np.ndarray, beta: np.ndarray | None, axis: int,
                eps: float, rms: bool) -> np.ndarray:
    axes = tuple(range(axis % x.ndim, x.ndim))
    centered = x if rms else x - x.mean(axis=axes, keepdims=True)
    y = centered / np.sqrt(np.square(centered).mean(axis=axes, keepdims=True) + eps) * gamma
    return y if beta is None else y + beta


@pytest.mark.parametrize("op, shape, axis, bits, with_beta", [
    ("LayerNormalization", (2, 16, 64), -1, 8, True),
    ("LayerNormalization", (2, 8, 96), -1, 16, True),
    ("LayerNormalization", (3, 6, 10), -2, 8, False),
    ("RMSNormalization", (2, 16, 64), -1, 8, False),
    ("RMSNormalization", (2, 4, 128), -1, 16, False),
])
def test_normalizations_follow_their_integer_algorithm_and_the_float_op(
        op: str, shape: tuple[int, ...], axis: int, bits: int, with_beta: bool) -> None:
    rng = np.random.default_rng(bits + len(shape) + shape[-1])
    rms = op == "RMSNormalization"
    x = rng.standard_normal(shape) * rng.uniform(0.2, 3.0, shape[:-1] + (1,)) + (0 if rms else 1.5)
    normalized = shape[axis % len(shape):]
    gamma = (1 + 0.3 * rng.standard_normal(normalized)).astype(np.float32)
    beta = (0.2 * rng.standard_normal(normalized)).astype(np.float32)
    weights = {"gamma": gamma, **({"beta": beta} if with_beta else {})}
    params = {"gamma": symmetric_weights(gamma, 8),
              "beta": [asymmetric(float(beta.min()), float(beta.max()), 8)]}
    eps = 1e-5
    real_gamma = params["gamma"][0].dequantize(quantize(gamma, params["gamma"][0]))
    real_beta = params["beta"][0].dequantize(quantize(beta, params["beta"][0])) \
        if with_beta else None
    x_enc = asymmetric(float(x.min()), float(x.max()), bits)
    q = quantize(x, x_enc)
    real_x = x_enc.dequantize(q).astype(np.float64)
    ref = _float_norm(real_x, real_gamma, real_beta, axis, eps, rms)
    y_enc = asymmetric(float(ref.min()), float(ref.max()), bits)
    session = _session_of(op, x_enc, y_enc, shape, weights,
                          {k: v for k, v in params.items() if k in weights},
                          axis=axis, epsilon=eps)
    ours = session.run_quantized({"x": q})["y"]
    exact, unrounded = _norm_reference(q, x_enc, quantize(gamma, params["gamma"][0]),
                                       params["gamma"][0], real_beta, y_enc, axis % len(shape),
                                       eps, rms)
    assert_exact(ours, exact, unrounded, op)
    assert np.abs(ours.astype(np.int64) - y_enc.quantize(ref)).max() <= 1
    assert len(np.unique(ours)) > 2 ** min(bits, 10) // 4


def test_a_constant_row_normalizes_to_beta() -> None:
    """Zero variance and an epsilon below one code: R is 0 and the normalized value 0."""
    x_enc, y_enc = Encoding(8, 0.1, -128), asymmetric(-1.0, 1.0, 8)
    gamma, beta = np.ones(8, np.float32), np.linspace(-1, 1, 8).astype(np.float32)
    params = {"gamma": symmetric_weights(gamma, 8), "beta": [asymmetric(-1.0, 1.0, 8)]}
    session = _session_of("LayerNormalization", x_enc, y_enc, (2, 8),
                          {"gamma": gamma, "beta": beta}, params, epsilon=1e-12)
    ours = session.run_quantized({"x": np.full((2, 8), 77, np.uint8)})["y"]
    expected = y_enc.quantize(params["beta"][0].dequantize(quantize(beta, params["beta"][0])))
    np.testing.assert_array_equal(ours, np.broadcast_to(expected, (2, 8)))


def test_requesting_mean_or_inv_std_dev_falls_back_to_float() -> None:
    x_enc, y_enc = asymmetric(-3, 3, 8), asymmetric(-3, 3, 8)
    gamma = np.ones(8, np.float32)
    node = Node.make("op", "LayerNormalization", ["x", "gamma"], ["y", "mean"])
    model = Model(Graph("g", (f32("x", (2, 8)),), (f32("y"), f32("mean")), (node,)),
                  {"gamma": gamma})
    qmodel = QuantizedModel(model, {"x": x_enc, "y": y_enc, "mean": x_enc},
                            {"gamma": symmetric_weights(gamma, 8)})
    step = QuantizedSession(qmodel).plan(("y", "mean")).steps[0]
    assert (step.integer, step.label) == (False, "default::LayerNormalization (node op)")


# -- a transformer block ----------------------------------------------------------------------


def _block(d: int = 32, heads: int = 2, seq: int = 16) -> Model:
    """x -> LayerNorm -> Q, K, V -> softmax(Q K^T / sqrt(dh)) V -> Wo -> + x -> LayerNorm ->
    W1 -> SiLU (x Sigmoid(x)) -> W2 -> + : one encoder layer, every op with an integer kernel."""
    rng = np.random.default_rng(7)
    dh = d // heads

    def w(*shape: int, scale: float = 1.0) -> np.ndarray:
        return (rng.standard_normal(shape) * scale / math.sqrt(shape[0])).astype(np.float32)

    weights = {f"w{n}": w(d, d) for n in "qkvo"} | {
        "w1": w(d, 2 * d), "w2": w(2 * d, d), "g1": np.ones(d, np.float32),
        "b1": np.zeros(d, np.float32), "g2": (1 + 0.1 * rng.standard_normal(d)).astype(
            np.float32), "b2": (0.1 * rng.standard_normal(d)).astype(np.float32),
        "heads": np.array([1, seq, heads, dh], np.int64),
        "merged": np.array([1, seq, d], np.int64), "scale": np.array(1 / math.sqrt(dh),
                                                                      np.float32)}
    nodes = [Node.make("ln1", "LayerNormalization", ["x", "g1", "b1"], ["h"])]
    for n in "qkv":
        nodes += [Node.make(f"m{n}", "MatMul", ["h", f"w{n}"], [f"{n}0"]),
                  Node.make(f"r{n}", "Reshape", [f"{n}0", "heads"], [f"{n}1"])]
    nodes += [Node.make("tq", "Transpose", ["q1"], ["q"], {"perm": [0, 2, 1, 3]}),
              Node.make("tk", "Transpose", ["k1"], ["kt"], {"perm": [0, 2, 3, 1]}),
              Node.make("tv", "Transpose", ["v1"], ["v"], {"perm": [0, 2, 1, 3]}),
              Node.make("qk", "MatMul", ["q", "kt"], ["s0"]),
              Node.make("sc", "Mul", ["s0", "scale"], ["s"]),
              Node.make("sm", "Softmax", ["s"], ["p"], {"axis": -1}),
              Node.make("pv", "MatMul", ["p", "v"], ["o0"]),
              Node.make("to", "Transpose", ["o0"], ["o1"], {"perm": [0, 2, 1, 3]}),
              Node.make("ro", "Reshape", ["o1", "merged"], ["o2"]),
              Node.make("mo", "MatMul", ["o2", "wo"], ["o"]),
              Node.make("res1", "Add", ["x", "o"], ["r"]),
              Node.make("ln2", "LayerNormalization", ["r", "g2", "b2"], ["h2"]),
              Node.make("m1", "MatMul", ["h2", "w1"], ["f0"]),
              Node.make("sg", "Sigmoid", ["f0"], ["f1"]),
              Node.make("silu", "Mul", ["f0", "f1"], ["f"]),
              Node.make("m2", "MatMul", ["f", "w2"], ["f2"]),
              Node.make("res2", "Add", ["r", "f2"], ["y"])]
    graph = Graph("block", (f32("x", (1, seq, d)),), (f32("y"),), tuple(nodes))
    return Model(graph, weights)


def _sqnr(ref: np.ndarray, got: np.ndarray) -> float:
    noise = float(np.sum((ref.astype(np.float64) - got) ** 2))
    return 10 * math.log10(float(np.sum(ref.astype(np.float64) ** 2)) / max(noise, 1e-30))


@pytest.mark.parametrize("bits, weight_bits, floor", [(8, 8, 25.0), (16, 8, 30.0)])
def test_a_transformer_block_runs_integer_with_the_sqnr_of_its_qdq_model(
        bits: int, weight_bits: int, floor: float) -> None:
    model = _block()
    rng = np.random.default_rng(bits)
    feeds = [{"x": rng.standard_normal((1, 16, 32)).astype(np.float32)} for _ in range(5)]
    qmodel = encode(model, feeds[:4], act_bits=bits, weight_bits=weight_bits)
    session = QuantizedSession(qmodel)
    fallback = [s.label for s in session.plan(("y",)).steps if not s.integer]
    assert fallback == []
    reference = Session(model).run(feeds[4])["y"]
    ours = session.run(feeds[4])["y"]
    qdq = ExactQdq(to_qdq(qmodel)).run(feeds[4], ["y"])["y"]
    ours_db, qdq_db = _sqnr(reference, ours), _sqnr(reference, qdq)
    print(f"transformer block, {bits}-bit activations, {weight_bits}-bit weights: SQNR "
          f"{ours_db:.1f} dB integer, {qdq_db:.1f} dB QDQ")  # calibration clips: both alike
    assert ours_db >= floor
    assert ours_db >= qdq_db - 1.0, (ours_db, qdq_db)
