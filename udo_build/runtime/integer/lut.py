"""Integer activations by table: Gelu, Sigmoid, Tanh, Erf, Softplus, Elu, LeakyRelu, HardSigmoid,
HardSwish, Mish and Swish of one quantized tensor.

A unary function of an 8-bit (16-bit) input takes 256 (65536) values, so the HTP evaluates it as
a lookup table. At load the binder computes, for every input code q, in float64:

    table[q] = clamp(zero_point_y + round_half_to_even(f(s_x (q - z_x)) / s_y), qmin, qmax)

and a run is one lookup per element. The table is a function of the two encodings and the
op's attributes only; f is evaluated in float64 by numpy or `math` (erf), so an entry could
differ between machines only where f(x) / s_y lies within a few ulps of a rounding tie.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import numpy as np

from ...ir.encodings import Encoding
from .fixed import clamp_bounds, qtype, zero_point
from .registry import ACTIVATIONS, Bound, Context, binds, per_tensor, register

Real = Callable[..., np.ndarray]  # f(x float64, **attrs) -> float64
_erf = np.frompyfunc(math.erf, 1, 1)


def erf(x: np.ndarray) -> np.ndarray:
    return _erf(x).astype(np.float64)


def sigmoid(x: np.ndarray) -> np.ndarray:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0, e) / (1.0 + e)


def softplus(x: np.ndarray) -> np.ndarray:
    return np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x)))


def gelu(x: np.ndarray, *, approximate: str = "none") -> np.ndarray:
    if approximate == "tanh":
        return 0.5 * x * (1.0 + np.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))
    return 0.5 * x * (1.0 + erf(x / math.sqrt(2.0)))


FUNCTIONS: dict[str, Real] = {
    "Gelu": gelu,
    "Sigmoid": sigmoid,
    "Tanh": np.tanh,
    "Erf": erf,
    "Softplus": softplus,
    "Elu": lambda x, *, alpha=1.0: np.where(x > 0, x, alpha * np.expm1(np.minimum(x, 0.0))),
    "LeakyRelu": lambda x, *, alpha=0.01: np.where(x >= 0, x, alpha * x),
    "HardSigmoid": lambda x, *, alpha=0.2, beta=0.5: np.clip(alpha * x + beta, 0.0, 1.0),
    "HardSwish": lambda x: x * np.clip(x / 6.0 + 0.5, 0.0, 1.0),
    "Mish": lambda x: x * np.tanh(softplus(x)),
    "Swish": lambda x, *, alpha=1.0: x * sigmoid(alpha * x),
}


def table_lookup(x: np.ndarray, *, table: np.ndarray) -> np.ndarray:
    """table[x] (every code of the unsigned input type has an entry)."""
    return np.take(table, x)


def build_table(f: Real, x_enc: Encoding, out: Encoding,
                clamp: tuple[float | None, float | None] = (None, None),
                **attrs: Any) -> np.ndarray:
    """The table of f from x_enc's codes to out's (see the module docstring)."""
    dtype = qtype(x_enc)
    codes = np.arange(2 ** (8 * dtype.itemsize), dtype=np.int64)
    raw = codes.astype(np.uint8 if dtype.itemsize == 1 else np.uint16).view(dtype)
    x = x_enc.scale * (raw.astype(np.float64) - zero_point(x_enc))
    y = np.asarray(f(x, **attrs), np.float64)
    lo, hi = clamp_bounds(out, clamp)
    q = np.clip(np.rint(y / out.scale) + zero_point(out), lo, hi)
    return q.astype(qtype(out))


def _binder(op: str) -> Callable[[Context], Bound | None]:
    def bind(ctx: Context) -> Bound | None:
        encs = per_tensor(ctx.input(0))
        if encs is None or len([o for o in ctx.outputs if o.name]) != 1:
            return None
        attrs = dict(ctx.node.kwargs)
        if op == "Gelu" and attrs.get("approximate", "none") not in ("none", "tanh"):
            return None
        table = build_table(FUNCTIONS[op], encs[0], ctx.out, ctx.output.clamp, **attrs)
        return Bound({"table": table})
    bind.__name__ = f"bind_{op.lower()}"
    return bind


for _op in FUNCTIONS:
    register(_op, table_lookup, [(t,) for t in ACTIVATIONS])
    binds(_op)(_binder(_op))
