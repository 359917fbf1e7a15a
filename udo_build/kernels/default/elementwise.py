"""Elementwise ops with numpy broadcasting: arithmetic, unary math, comparisons and logic,
Where, IsInf, and the variadic Sum, Max, Min and Mean (Cast is in cast.py).

The simple ones are data: a table from op name to its numpy function, registered in a loop.
Every kernel returns an array, also for 0-d inputs (where a ufunc returns a numpy scalar).

Values outside an op's domain give what IEEE arithmetic gives and ONNX says, silently: Acosh of
0.5, Sqrt of -1 and 0 / 0 are NaN, Log of 0 and 1 / 0 are infinities (`ieee`: numpy's warnings
are off inside the kernel, so no error setting of the caller's turns them into exceptions).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import numpy as np

from ._package import DEFAULT

BINARY: dict[str, Callable[..., np.ndarray]] = {
    "Add": np.add, "Sub": np.subtract, "Mul": np.multiply,
    "Equal": np.equal, "Less": np.less, "LessOrEqual": np.less_equal, "Greater": np.greater,
    "GreaterOrEqual": np.greater_equal, "And": np.logical_and, "Or": np.logical_or,
    "Xor": np.logical_xor, "BitwiseAnd": np.bitwise_and, "BitwiseOr": np.bitwise_or,
    "BitwiseXor": np.bitwise_xor,
}
UNARY: dict[str, Callable[..., np.ndarray]] = {
    "Abs": np.abs, "Neg": np.negative, "Exp": np.exp, "Log": np.log, "Sqrt": np.sqrt,
    "Floor": np.floor, "Ceil": np.ceil, "Round": np.rint, "Sign": np.sign, "Not": np.logical_not,
    "Sin": np.sin, "Cos": np.cos, "Tan": np.tan, "Asin": np.arcsin, "Acos": np.arccos,
    "Atan": np.arctan, "Sinh": np.sinh, "Cosh": np.cosh, "Asinh": np.arcsinh,
    "Acosh": np.arccosh, "Atanh": np.arctanh, "Tanh": np.tanh, "IsNaN": np.isnan,
    "BitwiseNot": np.invert,
}


def ieee(kernel: Callable[..., Any]) -> Callable[..., Any]:
    """The kernel with numpy's floating-point warnings off: NaN and infinities as IEEE gives
    them (see the module docstring)."""
    @functools.wraps(kernel)
    def quiet(*args: Any, **kwargs: Any) -> Any:
        with np.errstate(all="ignore"):
            return kernel(*args, **kwargs)
    return quiet


def _register(name: str, fn: Callable[..., np.ndarray], arity: int) -> None:
    if arity == 1:
        def kernel(x: np.ndarray) -> np.ndarray:
            return np.asarray(fn(x))
    else:
        def kernel(a: np.ndarray, b: np.ndarray) -> np.ndarray:  # type: ignore[misc]
            return np.asarray(fn(a, b))
    kernel.__name__ = kernel.__qualname__ = name.lower()
    DEFAULT.op(name)(ieee(kernel))


for _name, _fn in UNARY.items():
    _register(_name, _fn, 1)
for _name, _fn in BINARY.items():
    _register(_name, _fn, 2)


@DEFAULT.op("Div")
@ieee
def div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """a / b; integers truncate toward zero as in C."""
    if a.dtype.kind in "iu":
        return np.asarray(np.trunc(np.true_divide(a, b))).astype(a.dtype)
    return np.asarray(np.true_divide(a, b))


@DEFAULT.op("Mod")
@ieee
def mod(a: np.ndarray, b: np.ndarray, *, fmod: int = 0) -> np.ndarray:
    return np.asarray(np.fmod(a, b) if fmod else np.mod(a, b))


@DEFAULT.op("Pow")
@ieee
def power(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """x ** y in the type of x."""
    if x.dtype.kind == "f" and y.dtype != x.dtype:
        y = y.astype(x.dtype)
    return np.asarray(np.power(x, y)).astype(x.dtype, copy=False)


@DEFAULT.op("BitShift")
def bit_shift(x: np.ndarray, y: np.ndarray, *, direction: str) -> np.ndarray:
    return np.asarray(np.left_shift(x, y) if direction == "LEFT" else np.right_shift(x, y))


@DEFAULT.op("Reciprocal")
@ieee
def reciprocal(x: np.ndarray) -> np.ndarray:
    return np.asarray(np.reciprocal(x))


def erfc_of_abs(a: np.ndarray) -> np.ndarray:
    """erfc(a) for a >= 0: a Chebyshev fit with fractional error < 1.2e-7 (Numerical Recipes'
    erfcc); precise where erf is close to 1, which 1 - erf is not."""
    t = 1 / (1 + a / 2)
    poly = np.full_like(a, 0.17087277)
    for c in (-0.82215223, 1.48851587, -1.13520398, 0.27886807, -0.18628806, 0.09678418,
              0.37409196, 1.00002368, -1.26551223):
        poly = poly * t + np.asarray(c, dtype=a.dtype)
    return np.asarray(t * np.exp(poly - a * a))


@DEFAULT.op("Erf")
@ieee
def erf(x: np.ndarray) -> np.ndarray:
    """erf to float32 precision: a Taylor series below 0.5, 1 - erfc above."""
    a = np.abs(x)
    x2 = x * x
    series = np.zeros_like(x)
    term = x * np.asarray(2 / np.sqrt(np.pi), dtype=x.dtype)
    for n in range(12):
        series += term / np.asarray(2 * n + 1, dtype=x.dtype)
        term = term * -x2 / np.asarray(n + 1, dtype=x.dtype)
    return np.asarray(np.where(a < 0.5, series, np.copysign(1 - erfc_of_abs(a), x)))


@DEFAULT.op("IsInf")
def is_inf(x: np.ndarray, *, detect_negative: int = 1, detect_positive: int = 1) -> np.ndarray:
    found = np.asarray(np.isinf(x))
    if not detect_negative:
        found &= x > 0
    if not detect_positive:
        found &= x < 0
    return found


@DEFAULT.op("Where")
def where(condition: np.ndarray, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    return np.where(condition, x, y)


def _fold(fn: Callable[[np.ndarray, np.ndarray], np.ndarray],
          inputs: tuple[np.ndarray, ...]) -> np.ndarray:
    if not inputs:
        raise ValueError("a variadic op needs at least one input")
    if len(inputs) == 1:
        return inputs[0].copy()
    y = np.asarray(fn(inputs[0], inputs[1]))
    for x in inputs[2:]:
        if np.broadcast_shapes(y.shape, x.shape) == y.shape:
            fn(y, x, out=y)
        else:
            y = fn(y, x)
    return y


@DEFAULT.op("Sum")
@ieee
def sum_(*inputs: np.ndarray) -> np.ndarray:
    return _fold(np.add, inputs)


@DEFAULT.op("Max")
@ieee
def max_(*inputs: np.ndarray) -> np.ndarray:
    return _fold(np.maximum, inputs)


@DEFAULT.op("Min")
@ieee
def min_(*inputs: np.ndarray) -> np.ndarray:
    return _fold(np.minimum, inputs)


@DEFAULT.op("Mean")
@ieee
def mean(*inputs: np.ndarray) -> np.ndarray:
    y = _fold(np.add, inputs)
    return np.divide(y, np.asarray(len(inputs), dtype=y.dtype), out=y)
