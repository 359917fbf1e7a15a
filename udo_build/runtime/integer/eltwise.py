"""Integer elementwise arithmetic with numpy broadcasting: Add, Sum (variadic) and Mul.

Add/Sum: q = requantize(sum_i M_i (x_i - z_i)) with one shift for all inputs (M_i / 2^shift =
s_i / s_y; the largest M_i has the full width), as TFLite and the HTP add: every term lands on
the same 2^-shift grid, so float64 holds the sum exactly. Mul: requantize((a - za)(b - zb)) with
the multiplier s_a s_b / s_y (two 16-bit inputs: a product up to 2^34, requantized wide, in
int64). Inputs broadcast as numpy's do, each with its own encoding, 8- or 16-bit.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...ir.encodings import Encoding
from .fixed import Requant, centered, lookup, pair_table, qtype, zero_point
from .registry import QUANTIZED, Bound, Context, binds, combos, per_tensor, register


def add(*xs: np.ndarray, zero_points: tuple[int, ...], requant: Requant,
        table: np.ndarray | None = None) -> np.ndarray:
    """requantize(sum_i (x_i - zero_points[i]) x requant.m0[i]) (one common shift); two 8-bit
    inputs look their result up in `table` (every pair, computed at load by this kernel)."""
    if table is not None and _bytes(xs):
        return lookup(table, *xs)
    factors = requant.factor.reshape(-1)
    t = xs[0].astype(np.float64)
    t *= factors[0]
    for x, f in zip(xs[1:], factors[1:], strict=True):
        term = x.astype(np.float64)
        term *= f
        if np.broadcast_shapes(t.shape, term.shape) == t.shape:
            t += term
        else:
            t = t + term
    t += -float(np.dot(np.asarray(zero_points, np.float64), factors))  # exact: one grid
    return requant.round(t)


def mul(a: np.ndarray, b: np.ndarray, *, zero_points: tuple[int, int], requant: Requant,
        table: np.ndarray | None = None) -> np.ndarray:
    """requantize((a - za) x (b - zb)); 8-bit inputs look it up in `table`, as add does."""
    if table is not None and _bytes((a, b)):
        return lookup(table, a, b)
    t = np.multiply(centered(a, zero_points[0], np.float64),
                    centered(b, zero_points[1], np.float64))
    return requant.apply(t, owned=True)


def _bytes(xs: tuple[np.ndarray, ...]) -> bool:
    return len(xs) == 2 and all(x.dtype.itemsize == 1 for x in xs)


def _with_table(kernel: Callable[..., np.ndarray], encs: list[Encoding],
                kwargs: dict[str, Any]) -> Bound:
    """The kernel's keyword arguments, with the table of every pair of 8-bit inputs."""
    types = [qtype(e) for e in encs]
    if len(types) == 2 and all(t.itemsize == 1 for t in types):
        kwargs["table"] = pair_table(kernel, types[0], types[1], **kwargs)
    return Bound(kwargs)


register("Add", add, combos(QUANTIZED, QUANTIZED))
register("Sum", add, [(t,) for t in QUANTIZED])
register("Mul", mul, combos(QUANTIZED, QUANTIZED))


def _bind_add(ctx: Context) -> Bound | None:
    encs = per_tensor(*ctx.inputs)
    if encs is None:
        return None
    reals = np.array([e.scale for e in encs], np.float64) / ctx.out.scale
    raw = sum(2 * max(abs(e.qmin), abs(e.qmax)) for e in encs)  # |x_i| + |z_i| summed
    requant = Requant.make(reals, raw, ctx.out, ctx.output.clamp, common=True)
    if requant is None:
        return None
    return _with_table(add, encs, {"zero_points": tuple(zero_point(e) for e in encs),
                                   "requant": requant})


binds("Add")(_bind_add)
binds("Sum")(_bind_add)


@binds("Mul")
def bind_mul(ctx: Context) -> Bound | None:
    encs = per_tensor(ctx.input(0), ctx.input(1))
    if encs is None:
        return None
    a, b = encs
    bound = max(abs(a.qmin), a.qmax) * 2 * max(abs(b.qmin), b.qmax) * 2
    requant = Requant.make(a.scale * b.scale / ctx.out.scale, bound, ctx.out,
                           ctx.output.clamp)
    if requant is None:
        return None
    return _with_table(mul, encs, {"zero_points": (zero_point(a), zero_point(b)),
                                   "requant": requant})
