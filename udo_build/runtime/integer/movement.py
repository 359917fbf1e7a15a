"""Integer data movement and clamps: Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Identity
and Dropout move bytes (the float kernels on the raw values), Concat requantizes each input to
the output's encoding, Relu and Clip clamp. Whenever an input's encoding differs from the
output's, its values are requantized (x - z_x) x s_x / s_y; otherwise they move as they are.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import numpy as np

from ...ir.graph import Node
from ...kernels.default import DEFAULT
from ...kernels.default._common import axis_of
from .fixed import Rescale, clamp_bounds, rescale, same
from .registry import QUANTIZED, Bound, Context, binds, per_tensor, register

Clamp = tuple[float | None, float | None]
MOVES = ("Reshape", "Flatten", "Transpose", "Squeeze", "Unsqueeze", "Identity", "Dropout")


def _mover(op: str) -> Callable[..., np.ndarray]:
    move = DEFAULT.select(op, ["float32"]).fn

    def kernel(x: np.ndarray, *rest: np.ndarray | None, rescale: Rescale | None = None,
               **attrs: object) -> np.ndarray:
        y = move(x, *rest, **attrs)
        y = y[0] if isinstance(y, tuple) else y  # Dropout: (y, mask)
        return y if rescale is None else rescale(y)

    kernel.__name__ = kernel.__qualname__ = f"{op.lower()}_moved"
    return kernel


for _op in MOVES:
    register(_op, _mover(_op), [(t,) for t in QUANTIZED] + [(t, "int64") for t in QUANTIZED])


def concat(*xs: np.ndarray, axis: int, rescales: tuple[Rescale | None, ...]) -> np.ndarray:
    parts = [x if r is None else r(x) for x, r in zip(xs, rescales, strict=True)]
    return np.concatenate(parts, axis=axis_of(axis, xs[0].ndim))


def clamp(x: np.ndarray, *bounds: np.ndarray | None, lo: int, hi: int,
          rescale: Rescale | None = None) -> np.ndarray:
    """Relu / Clip: the bytes clamped to [lo, hi], or requantized into the output encoding
    with that clamp (bounds are the op's min/max inputs, already in lo and hi)."""
    if rescale is None:
        return np.clip(x, lo, hi).astype(x.dtype, copy=False)
    return rescale(x)


register("Concat", concat, [(t,) for t in QUANTIZED])
register("Relu", clamp, [(t,) for t in QUANTIZED])
register("Clip", clamp, [(t,) for t in QUANTIZED] + [(t, "float32") for t in QUANTIZED])


def _bind_move(ctx: Context) -> Bound | None:
    encs = per_tensor(ctx.input(0))
    if encs is None or len([o for o in ctx.outputs if o.name]) != 1:
        return None
    return Bound({**ctx.node.kwargs,
                     "rescale": rescale(encs[0], ctx.out)})


for _op in MOVES:
    binds(_op)(_bind_move)


@binds("Concat")
def bind_concat(ctx: Context) -> Bound | None:
    encs = per_tensor(*ctx.inputs)
    if encs is None:
        return None
    return Bound({**ctx.node.kwargs,
                     "rescales": tuple(rescale(e, ctx.out) for e in encs)})


@binds("Relu")
@binds("Clip")
def bind_clamp(ctx: Context) -> Bound | None:
    encs = per_tensor(ctx.input(0))
    bounds = clamp_of(ctx.node, {o.name: o.real for o in ctx.inputs if o is not None})
    if encs is None or bounds is None:
        return None
    out = ctx.out
    lo, hi = clamp_bounds(out, bounds)
    kwargs: dict[str, object] = {"lo": lo, "hi": hi}
    if not same(encs[0], out):
        kwargs["rescale"] = rescale(encs[0], out, bounds)
    return Bound(kwargs)


def clamp_of(node: Node, constants: Mapping[str, np.ndarray | None]) -> Clamp | None:
    """The real bounds of a Relu (0, None) or a Clip (its min and max inputs; None when one
    of them is not a constant)."""
    if node.op == "Relu":
        return (0.0, None)
    bounds: list[float | None] = []
    for name in (node.inputs[1:3] + ("", ""))[:2]:
        value = constants.get(name) if name else None
        if name and value is None:
            return None
        bounds.append(None if value is None else float(np.asarray(value).reshape(-1)[0]))
    return bounds[0], bounds[1]
