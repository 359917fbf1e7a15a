"""Activations and friends: Relu and its relatives, Sigmoid, Softplus, Gelu, Mish, Swish,
Shrink, Softmax, LogSoftmax, Hardmax, and the pass-through ops Identity and Dropout (inference:
the identity).

Floats keep their type, the narrow ones of ml_dtypes (bfloat16) too: constants take the input's
type, and Gelu, which needs erf, computes in float32 or wider and casts back."""

from __future__ import annotations

import numpy as np

from ...errors import UserError
from ._common import axis_of, relu_into
from ._package import DEFAULT
from .elementwise import erfc_of_abs, ieee


def _c(value: float, like: np.ndarray) -> np.ndarray:
    """A scalar in the array's float type (so float32 stays float32 on any numpy)."""
    return np.asarray(value, dtype=np.float32 if like.dtype.kind in "iub" else like.dtype)


def _wide(x: np.ndarray) -> np.ndarray:
    """x in float32 at least (float64 stays), for math narrow floats do not have."""
    return x if x.dtype == np.float64 else x.astype(np.float32)


@DEFAULT.op("Relu")
def relu(x: np.ndarray) -> np.ndarray:
    return relu_into(x, np.empty_like(x, order="C"))


@DEFAULT.op("LeakyRelu")
@ieee
def leaky_relu(x: np.ndarray, *, alpha: float = 0.01) -> np.ndarray:
    return np.where(x >= 0, x, x * _c(alpha, x))


@DEFAULT.op("PRelu")
@ieee
def prelu(x: np.ndarray, slope: np.ndarray) -> np.ndarray:
    return np.where(x >= 0, x, x * slope)


@DEFAULT.op("ThresholdedRelu")
def thresholded_relu(x: np.ndarray, *, alpha: float = 1.0) -> np.ndarray:
    return np.where(x > _c(alpha, x), x, 0).astype(x.dtype)


@DEFAULT.op("Clip")
def clip(x: np.ndarray, low: np.ndarray | None = None,
         high: np.ndarray | None = None) -> np.ndarray:
    if low is None and high is None:
        return x.copy()
    return np.asarray(np.clip(x, low, high))


@DEFAULT.op("Sigmoid")
@ieee
def sigmoid(x: np.ndarray) -> np.ndarray:
    """1 / (1 + exp(-x)), without overflow: exp only ever sees -|x|; half floats through
    float32, rounded once."""
    w = _wide(x) if x.dtype.itemsize < 4 else x
    e = np.exp(-np.abs(w))
    return np.asarray(np.where(w >= 0, 1, e) / (1 + e)).astype(x.dtype, copy=False)


@DEFAULT.op("HardSigmoid")
@ieee
def hard_sigmoid(x: np.ndarray, *, alpha: float = 0.2, beta: float = 0.5) -> np.ndarray:
    return np.asarray(np.clip(x * _c(alpha, x) + _c(beta, x), 0, 1))


@DEFAULT.op("HardSwish")
@ieee
def hard_swish(x: np.ndarray) -> np.ndarray:
    return np.asarray(x * np.clip(x * _c(1 / 6, x) + _c(0.5, x), 0, 1))


@DEFAULT.op("Elu")
@ieee
def elu(x: np.ndarray, *, alpha: float = 1.0) -> np.ndarray:
    return np.where(x > 0, x, np.expm1(np.minimum(x, 0)) * _c(alpha, x))


@DEFAULT.op("Selu")
@ieee
def selu(x: np.ndarray, *, alpha: float = 1.67326319217681884765625,
         gamma: float = 1.05070102214813232421875) -> np.ndarray:
    return np.asarray(_c(gamma, x) * np.where(x > 0, x, np.expm1(np.minimum(x, 0)) * _c(alpha, x)))


@DEFAULT.op("Celu")
@ieee
def celu(x: np.ndarray, *, alpha: float = 1.0) -> np.ndarray:
    a = _c(alpha, x)
    return np.asarray(np.maximum(x, 0) + np.minimum(0, a * np.expm1(np.minimum(x, 0) / a)))


@DEFAULT.op("Softplus")
@ieee
def softplus(x: np.ndarray) -> np.ndarray:
    w = _wide(x) if x.dtype.itemsize < 4 else x
    return np.asarray(np.maximum(w, 0) + np.log1p(np.exp(-np.abs(w)))).astype(x.dtype, copy=False)


@DEFAULT.op("Gelu")
@ieee
def gelu(x: np.ndarray, *, approximate: str = "none") -> np.ndarray:
    """x * Phi(x), Phi the normal distribution: exactly, or its tanh fit. Phi(x) is
    erfc(-x / sqrt 2) / 2, from erfc of |x| on either side (precise in the far tails)."""
    w = _wide(x)
    if approximate == "tanh":
        inner = np.tanh(_c(np.sqrt(2 / np.pi), w) * (w + _c(0.044715, w) * w * w * w))
        return np.asarray(w * _c(0.5, w) * (1 + inner)).astype(x.dtype, copy=False)
    if approximate != "none":
        raise UserError(f"Gelu: not supported: approximate={approximate!r}",
                        hint="ONNX allows 'none' and 'tanh'")
    tail = erfc_of_abs(np.abs(w) * _c(np.sqrt(0.5), w)) * _c(0.5, w)
    return np.asarray(w * np.where(w < 0, tail, 1 - tail)).astype(x.dtype, copy=False)


@DEFAULT.op("Mish")
@ieee
def mish(x: np.ndarray) -> np.ndarray:
    """x * tanh(softplus(x))."""
    return np.asarray(x * np.tanh(softplus(x)))


@DEFAULT.op("Swish")
@ieee
def swish(x: np.ndarray, *, alpha: float = 1.0) -> np.ndarray:
    """x * sigmoid(alpha * x) (SiLU at alpha 1)."""
    return np.asarray(x * sigmoid(x * _c(alpha, x)))


@DEFAULT.op("Shrink")
def shrink(x: np.ndarray, *, bias: float = 0.0, lambd: float = 0.5) -> np.ndarray:
    """x - bias above lambd, x + bias below -lambd, 0 between; in x's type (also integers)."""
    y = np.where(x < -lambd, x + bias, np.where(x > lambd, x - bias, 0))
    return y.astype(x.dtype, copy=False)


@DEFAULT.op("Softsign")
@ieee
def softsign(x: np.ndarray) -> np.ndarray:
    return np.asarray(x / (1 + np.abs(x)))


@DEFAULT.op("Softmax")
@ieee
def softmax(x: np.ndarray, *, axis: int = -1) -> np.ndarray:
    """exp(x - max) / sum along one axis (opset 13 semantics)."""
    axis = axis_of(axis, x.ndim)
    y = x - x.max(axis=axis, keepdims=True)
    np.exp(y, out=y)
    y /= y.sum(axis=axis, keepdims=True)
    return y


@DEFAULT.op("LogSoftmax")
@ieee
def log_softmax(x: np.ndarray, *, axis: int = -1) -> np.ndarray:
    axis = axis_of(axis, x.ndim)
    y = x - x.max(axis=axis, keepdims=True)
    y -= np.log(np.exp(y).sum(axis=axis, keepdims=True))
    return y


@DEFAULT.op("Hardmax")
def hardmax(x: np.ndarray, *, axis: int = -1) -> np.ndarray:
    axis = axis_of(axis, x.ndim)
    y = np.zeros_like(x)
    np.put_along_axis(y, np.expand_dims(x.argmax(axis=axis), axis), 1, axis=axis)
    return y


@DEFAULT.op("Identity")
def identity(x: np.ndarray) -> np.ndarray:
    return x


@DEFAULT.op("Dropout")
def dropout(x: np.ndarray, ratio: np.ndarray | None = None,
            training_mode: np.ndarray | None = None, *, seed: int | None = None):
    """Inference: (x, an all-true mask). Training mode (random) is refused."""
    if training_mode is not None and bool(training_mode) and (ratio is None or float(ratio)):
        raise UserError("Dropout: not supported: training mode (a random mask)",
                        hint="export the model for inference (training_mode false)")
    return x, np.ones(x.shape, dtype=np.bool_)
