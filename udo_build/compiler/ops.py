"""The HTP form's op vocabulary: which ops exist, their layout class, tensor properties, and the
shapes of what they make.

- BHWC ops (`SPATIAL`): the ONNX ops whose meaning depends on where the channels are, lowered
  for 4-D data to their channel-last HTP names (Conv -> Conv2d, MaxPool -> MaxPool2d, ...).
  Their data input and output are bhwc; weights keep their ONNX layout (Conv2d: OIHW). They may
  carry a fused activation (`activation` "Relu" or "Clip", `clip` bounds).
- ANY ops: elementwise ops (numpy broadcasting over 4-D tensors), and the 4-D moves Transpose,
  Reshape (target shape as the attribute `shape`), Concat, Slice (`starts`, `ends` per axis),
  ChannelShuffle (`groups`, `axis`), Identity, and Softmax / LogSoftmax (`axis`). They work on
  tensors in any axis order, so transposes move through them.
- MODEL ops: every other op, and every custom op, runs in the model's layout and ranks: its
  inputs are reshaped to the model's shapes (`Op.model`) and its outputs back to 4-D.

Tensor properties (the vendor's Flat/Crouton layout and Tcm/MainMemory placement): BHWC ops read
and write crouton tensors (8x8x32 blocks of h, w, c) that may live in TCM; ANY ops flat tensors
in TCM; MODEL ops flat tensors in main memory.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..ir.graph import DEFAULT_PACKAGE
from ..rewrite.graph import ANY, BHWC, MODEL, Dialect, Op, TType

SPATIAL: dict[str, str] = {
    "Conv": "Conv2d", "MaxPool": "MaxPool2d", "AveragePool": "AvgPool2d",
    "GlobalAveragePool": "GlobalAvgPool2d", "GlobalMaxPool": "GlobalMaxPool2d", "LRN": "LRN",
    "BatchNormalization": "BatchNorm", "InstanceNormalization": "InstanceNorm",
    "DepthToSpace": "DepthToSpace", "SpaceToDepth": "SpaceToDepth",
}
ONNX_OF: dict[str, str] = {htp: onnx for onnx, htp in SPATIAL.items()}
UNARY = frozenset((
    "Relu", "LeakyRelu", "Sigmoid", "Tanh", "Exp", "Log", "Abs", "Neg", "Sqrt", "Softplus",
    "Softsign", "Elu", "Selu", "Celu", "HardSigmoid", "HardSwish", "Erf", "Floor", "Ceil",
    "Round", "Sign", "Sin", "Cos", "Clip", "Identity", "Reciprocal", "ThresholdedRelu"))
BINARY = frozenset(("Add", "Sub", "Mul", "Div", "Pow", "Max", "Min", "Sum", "Mean"))
AXIS_OPS = frozenset(("Softmax", "LogSoftmax", "Concat"))
MOVES = frozenset(("Transpose", "Reshape", "Slice", "ChannelShuffle", "Concat"))
WINDOWS = frozenset(("Conv2d", "MaxPool2d", "AvgPool2d"))
ACTIVATIONS = ("Relu", "Clip")
TO_BHWC = (0, 2, 3, 1)
TO_NCHW = (0, 3, 1, 2)


@dataclass(frozen=True)
class Props:
    """Where an op's activations may live and how they are laid out there."""

    tcm: bool
    crouton: bool


def props(op: Op) -> Props:
    if op.layout == MODEL or op.package != DEFAULT_PACKAGE:
        return Props(tcm=False, crouton=False)
    if op.layout == BHWC:
        return Props(tcm=True, crouton=True)
    return Props(tcm=True, crouton=op.op in UNARY or op.op in BINARY)


def backfill(shape: Sequence[int]) -> tuple[int, ...]:
    """A shape of rank < 4 as 4-D, with leading ones (ranks above 4 stay)."""
    shape = tuple(int(d) for d in shape)
    return (1,) * (4 - len(shape)) + shape if len(shape) < 4 else shape


def inverse(perm: Sequence[int]) -> tuple[int, ...]:
    out = [0] * len(perm)
    for i, p in enumerate(perm):
        out[p] = i
    return tuple(out)


def compose(inner: Sequence[int], outer: Sequence[int]) -> tuple[int, ...]:
    """The one permutation equal to Transpose(Transpose(x, inner), outer)."""
    return tuple(inner[p] for p in outer)


def is_identity(perm: Sequence[int]) -> bool:
    return tuple(perm) == tuple(range(len(perm)))


def crouton_bytes(ttype: TType) -> int:
    """Bytes of a bhwc tensor in crouton layout: h and w padded to 8, channels to 32."""
    if len(ttype.shape) != 4:
        return ttype.nbytes
    b, h, w, c = ttype.shape
    return b * _pad(h, 8) * _pad(w, 8) * _pad(c, 32) * np.dtype(ttype.dtype).itemsize


def _pad(n: int, multiple: int) -> int:
    return -(-n // multiple) * multiple


def out_shapes(op: str, shapes: Sequence[tuple[int, ...] | None],
               attrs: Mapping[str, Any]) -> list[tuple[int, ...]]:
    """Output shapes of the ANY ops a rule may build (a ValueError for other ops: the rule must
    give the size, as WithSize does)."""
    if op == "Transpose":
        return [tuple(shapes[0][p] for p in attrs["perm"])]  # type: ignore[index]
    if op == "Reshape":
        return [tuple(int(d) for d in attrs["shape"])]
    if op == "Concat":
        out = list(shapes[0])  # type: ignore[arg-type]
        out[attrs["axis"]] = sum(s[attrs["axis"]] for s in shapes)  # type: ignore[index]
        return [tuple(out)]
    if op == "Slice":
        return [tuple(e - s for s, e in zip(attrs["starts"], attrs["ends"], strict=True))]
    if op in UNARY or op in BINARY or op in ("ChannelShuffle", "Softmax", "LogSoftmax"):
        return [tuple(np.broadcast_shapes(*[s for s in shapes if s is not None]))]
    raise ValueError(f"the compiler cannot infer the output shape of {op}; give its size "
                     "(WithSize)")


def layout_of(op_name: str, package: str) -> str:
    if package != DEFAULT_PACKAGE:
        return MODEL
    if op_name in ONNX_OF:
        return BHWC
    if op_name in UNARY or op_name in BINARY or op_name in MOVES or op_name in AXIS_OPS:
        return ANY
    return MODEL


HTP = Dialect("HTP", layout=layout_of, shapes=out_shapes)
