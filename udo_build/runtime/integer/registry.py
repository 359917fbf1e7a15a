"""The integer op package and the load-time binders of its kernels.

`INTEGER` is an op package of typed implementations only (`@INTEGER.op(op, types=...)`): a node
runs an integer kernel when one accepts the raw types of its inputs (uint8/uint16 activations,
int8/int16 weights, int32 biases, int64 shapes...). Every kernel has a binder
(`@binds(op)`): at load it turns the node, its operands' encodings and constant values, and
its outputs' encodings into the kernel's keyword arguments (fixed-point multipliers, BLAS
operands of the weights) and the derived constants it reads (a bias in accumulator units). A
binder that cannot serve a node (an output without encoding, a weight without one, an attribute
it does not handle) declines with None, and the node runs through its float kernel between
dequantize and quantize.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import product
from typing import Any

import numpy as np

from ...ir.encodings import Encoding
from ...ir.graph import Node
from ...kernels.oppkg import Cost, Impl, Kernel, OpPackage

INTEGER = OpPackage("integer")
ACTIVATIONS = ("uint8", "uint16")  # unsigned asymmetric activations
QUANTIZED = ("uint8", "uint16", "int8", "int16")  # any quantized tensor (weights are signed)
WEIGHTS = ("int8", "int16")


@dataclass(frozen=True, eq=False)
class Operand:
    """A node input as the integer path holds it."""

    name: str
    dtype: str  # the raw numpy dtype at run time
    encodings: tuple[Encoding, ...] | None = None  # None: not quantized
    value: np.ndarray | None = None  # a constant's raw value (quantized for a quantized param)
    # a constant's float value, or what computes it when first asked (a quantized weight's
    # dequantized values: only the binders that read them make them, a MatMul's never)
    real_value: np.ndarray | Callable[[], np.ndarray | None] | None = None
    shape: tuple[int | str, ...] | None = None  # as the graph knows it

    @property
    def real(self) -> np.ndarray | None:
        """A constant's float value."""
        return self.real_value() if callable(self.real_value) else self.real_value

    @property
    def encoding(self) -> Encoding | None:
        """The one encoding of a per-tensor quantized operand (None otherwise)."""
        return self.encodings[0] if self.encodings and len(self.encodings) == 1 else None

    @property
    def constant(self) -> bool:
        return self.value is not None

    @property
    def array(self) -> np.ndarray:
        """A constant's raw value."""
        if self.value is None:
            raise ValueError(f"{self.name} is not a constant")
        return self.value


@dataclass(frozen=True)
class OutputSpec:
    """A node output: its encoding (None: float) and the clamp of an absorbed Relu/Clip."""

    name: str
    encoding: Encoding | None
    clamp: tuple[float | None, float | None] = (None, None)


@dataclass(frozen=True, eq=False)
class Context:
    node: Node
    inputs: tuple[Operand | None, ...]  # None for an omitted optional input
    outputs: tuple[OutputSpec, ...]

    def input(self, i: int) -> Operand | None:
        return self.inputs[i] if i < len(self.inputs) else None

    @property
    def output(self) -> OutputSpec:
        return self.outputs[0]

    @property
    def out(self) -> Encoding:
        """The first output's encoding (binders only see nodes whose outputs have one)."""
        enc = self.outputs[0].encoding
        if enc is None:
            raise ValueError(f"{self.node.name}: the output has no encoding")
        return enc


@dataclass(frozen=True, eq=False)
class Bound:
    kwargs: dict[str, Any]
    replace: dict[int, np.ndarray] = field(default_factory=dict)  # input index -> new constant


Binder = Callable[[Context], Bound | None]
BINDERS: dict[str, Binder] = {}


def binds(op: str) -> Callable[[Binder], Binder]:
    def decorate(fn: Binder) -> Binder:
        if op in BINDERS:
            raise ValueError(f"two binders for integer {op}")
        BINDERS[op] = fn
        return fn
    return decorate


def register(op: str, fn: Kernel, patterns: Sequence[Sequence[str]],
             cost: Cost = Cost.FAST) -> None:
    """Register `fn` as the integer kernel of `op` for each tuple of input types."""
    for types in patterns:
        INTEGER.op(op, cost=cost, types=tuple(types))(fn)


def combos(*choices: Sequence[str]) -> list[tuple[str, ...]]:
    return list(product(*choices))


def select(op: str, input_types: Sequence[str]) -> Impl | None:
    """The cheapest integer kernel of `op` accepting these raw input types, if any."""
    impls = [i for i in INTEGER.impls(op) if i.matches(input_types)]
    return min(impls, key=lambda i: (i.cost, len(i.types or ()))) if impls else None


def bind(ctx: Context) -> Bound | None:
    binder = BINDERS.get(ctx.node.op)
    if binder is None or any(t.encoding is None for t in ctx.outputs if t.name):
        return None
    return binder(ctx)


def per_tensor(*operands: Operand | None) -> list[Encoding] | None:
    """The single encodings of these operands, or None if one is absent or per channel."""
    out = []
    for operand in operands:
        if operand is None or operand.encoding is None:
            return None
        out.append(operand.encoding)
    return out


def channel_axis(node: Node, index: int, ndim: int, count: int,
                 shape: Sequence[int] = ()) -> int:
    """The axis of a node's constant input that per-channel encodings index: output channels
    of Conv (0) and ConvTranspose (1) weights, B's output columns in Gemm (0 with transB, else
    the last) and MatMul (the last), a bias's only axis; otherwise the first axis of that size."""
    if count <= 1 or ndim == 0:
        return 0
    if index == 1 and node.op in ("Conv", "ConvTranspose", "Gemm", "MatMul"):
        if node.op == "Conv" or (node.op == "Gemm" and node.attr("transB", 0)):
            return 0
        return 1 if node.op == "ConvTranspose" else ndim - 1
    sizes = list(shape)
    return sizes.index(count) if count in sizes else 0
