"""AdaRound: each layer's weights rounded up or down as learned on the calibration data, not to
the nearest grid point.

    qmodel, rounded = adaround(qmodel, packages, feeds, count, AdaroundSettings())

As AIMET's AdaRound (Nagel et al., "Up or down? Adaptive rounding", 2020): with the weight
encodings fixed, for each Conv/Gemm with encoded weights (udo_build.quant.layer_inputs), a
rounding variable V per weight chooses floor(w / s) + h(V), h a rectified sigmoid in [0, 1];
Adam minimizes the layer's reconstruction error on input patches drawn from the calibration
data (on the input encoding's grid), plus a regularizer sum(1 - |2h - 1|^beta) whose beta
anneals from 20 to 2 and drives every h to 0 or 1; h >= 0.5 rounds up. Layers are independent
(each reads the float model's input on its grid). The weights are written on their grid
(s x integer), so the integer path reads the chosen integers back.

Reproducible bytes on every machine: the matrix products run on integers held in float64
(patches are grid integers, the rounding error is held to F fraction bits), every partial sum
below 2^53, so any BLAS gives the exact result; the sigmoid is the algebraic one
(v / sqrt(1 + v^2)) and beta an integer power, so every other step is an IEEE operation
(+ - x / sqrt, rounding) with one correct result. Patches are drawn with numpy's PCG64 seeded by
(seed, layer, inference); the iteration count is fixed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import replace
from typing import Any

import numpy as np

from ..ir.encodings import Encoding
from ..ir.qmodel import QuantizedModel
from .algorithm_settings import AdaroundSettings
from .layer_inputs import LayerInput, gather, layers_of, rows_of

ZETA, GAMMA = 1.1, -0.1  # the rectified sigmoid's stretch
BETA_START, BETA_END, WARMUP = 20, 2, 0.2  # regularizer exponent schedule, warm-up fraction
LEARNING_RATE = 0.05
ADAM = (0.9, 0.999, 1e-8)
EXACT_BITS = 52


def adaround(qmodel: QuantizedModel, packages: Mapping[str, Any],
             feeds: Iterable[Mapping[str, np.ndarray]], count: int,
             settings: AdaroundSettings) -> tuple[QuantizedModel, int]:
    """The model with its layers' weights adaptively rounded, and how many layers were."""
    layers = layers_of(qmodel)
    gather(qmodel, packages, feeds, layers, samples=settings.samples, count=count,
           seed=settings.seed)
    weights = dict(qmodel.model.weights)
    rounded = 0
    for layer in layers:
        if not layer.columns:
            continue
        name = layer.node.inputs[1]
        w = weights[name]
        rows = rows_of(layer.node, w).astype(np.float64)
        new = round_layer(rows, qmodel.params[name], layer, settings)
        weights[name] = _from_rows(layer, new, w)
        rounded += 1
    model = replace(qmodel.model, weights=weights)
    return replace(qmodel, model=model), rounded


def round_layer(rows: np.ndarray, encs: list[Encoding], layer: LayerInput,
                settings: AdaroundSettings) -> np.ndarray:
    """The weights [out, K] on their grid, rounded as learned (float64)."""
    scale = np.array([e.scale for e in encs], np.float64).reshape(-1, 1)
    ratio = rows / scale
    low = np.floor(ratio)
    v = _initial_v(ratio - low)
    x = np.concatenate(layer.columns, axis=2)  # [groups, K, P]
    x, bits = _exact_range(x)
    xt = np.ascontiguousarray(np.transpose(x, (0, 2, 1)))  # contiguous: BLAS, not a slow loop
    group_rows = rows.shape[0] // layer.groups
    norm = float(np.mean(x * x)) * x.shape[1] + 1e-12
    moments = (np.zeros_like(v), np.zeros_like(v))
    for step in range(settings.iterations):
        h = _h(v)
        e = np.rint((low + h - ratio) * 2.0 ** bits)  # the rounding error, F fraction bits
        e3 = e.reshape(layer.groups, group_rows, -1)
        residual = np.matmul(e3, x)  # exact: integers below 2^53
        grad_e = np.matmul(residual, xt).reshape(e.shape)
        grad_e = grad_e * (2.0 / (x.shape[2] * norm * 2.0 ** bits))
        beta = _beta(step, settings.iterations)
        grad_h = grad_e + settings.reg_weight * _reg_grad(h, beta)
        grad_v = grad_h * _dh_dv(v)
        v, moments = _adam(v, grad_v, moments, step + 1)
    up = _h(v) >= 0.5
    q = np.clip(low + up, encs[0].qmin, encs[0].qmax)
    return q * scale


def _h(v: np.ndarray) -> np.ndarray:
    sigmoid = 0.5 * (1.0 + v / np.sqrt(1.0 + v * v))
    return np.clip(sigmoid * (ZETA - GAMMA) + GAMMA, 0.0, 1.0)


def _dh_dv(v: np.ndarray) -> np.ndarray:
    inside = (_h(v) > 0.0) & (_h(v) < 1.0)
    one = 1.0 + v * v
    return np.where(inside, 0.5 * (ZETA - GAMMA) / (one * np.sqrt(one)), 0.0)


def _initial_v(rest: np.ndarray) -> np.ndarray:
    """v with h(v) = rest (the nearest rounding's fractional part): AdaRound's start."""
    p = np.clip((rest - GAMMA) / (ZETA - GAMMA), 1e-6, 1 - 1e-6)
    u = 2.0 * p - 1.0
    return u / np.sqrt(1.0 - u * u)


def _beta(step: int, iterations: int) -> int:
    """The regularizer's exponent (an integer): 0 (off) until WARMUP, then from BETA_START down
    to BETA_END."""
    start = int(WARMUP * iterations)
    if step < start:
        return 0
    done = (step - start) / max(iterations - start, 1)
    return int(round(BETA_START + (BETA_END - BETA_START) * done))


def _reg_grad(h: np.ndarray, beta: int) -> np.ndarray:
    """d/dh of 1 - |2h - 1|^beta; 0 when beta is 0 (the regularizer off)."""
    t = 2.0 * h - 1.0
    return -2.0 * beta * _ipow(np.abs(t), beta - 1) * np.sign(t)


def _ipow(a: np.ndarray, n: int) -> np.ndarray:
    """a^n by squaring (multiplications only: the same bits everywhere)."""
    result = np.ones_like(a)
    base = a
    while n > 0:
        if n & 1:
            result = result * base
        base = base * base
        n >>= 1
    return result


def _adam(v: np.ndarray, grad: np.ndarray, moments: tuple[np.ndarray, np.ndarray],
          t: int) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    b1, b2, eps = ADAM
    m = b1 * moments[0] + (1 - b1) * grad
    s = b2 * moments[1] + (1 - b2) * grad * grad
    m_hat = m / (1 - b1 ** t)
    s_hat = s / (1 - b2 ** t)
    return v - LEARNING_RATE * m_hat / (np.sqrt(s_hat) + eps), (m, s)


def _exact_range(x: np.ndarray) -> tuple[np.ndarray, int]:
    """(patches, F): patches coarsened (halved, rounded) until F >= 8 fraction bits of the
    rounding error keep both products' partial sums below 2^EXACT_BITS."""
    k, p = x.shape[1], x.shape[2]
    while True:
        peak = float(np.max(np.abs(x))) if x.size else 0.0
        need = math.log2(max(peak, 1.0) ** 2 * k * p) + 1
        bits = min(24, int(EXACT_BITS - need))
        if bits >= 8:
            return x.astype(np.float64), bits
        x = np.rint(x / 2.0)


def _from_rows(layer: LayerInput, rows: np.ndarray, w: np.ndarray) -> np.ndarray:
    node = layer.node
    if node.op == "Gemm" and not node.attr("transB", 0):
        rows = rows.T
    return rows.reshape(w.shape).astype(np.float32)
