"""The integer path's execution plan: for every node, an integer kernel or its float kernel
between dequantize and quantize, and what each tensor is at run time.

Walking the graph in order, a tensor is quantized at run time when it has an activation
encoding (or is requantized into an absorbing activation's encoding); weights with parameter
encodings are quantized once, at load, unless they come quantized (a record's constants: integers
of the encoding's type, taken as they are). A default-package node runs an integer kernel when one
accepts the raw types of its inputs and its binder accepts the node (every output quantized,
weights encoded, ...). Every other node, and every custom op, runs its float kernel on the
dequantized inputs (quantized weights dequantized once: the float kernel sees the values the
integer kernels use) and its encoded outputs are quantized after, as the vendor's generic tensor
interface does; unencoded tensors stay float (float fallback).

Absorption: a Conv/Gemm/MatMul/Add/Sum output without an encoding, read only by a Relu or Clip
with an encoded output (`QuantizedModel.absorbed`), is never materialized: the producer's
integer kernel requantizes straight into the activation's encoding, clamped at its bounds, and
the activation node is skipped. A tensor the caller requests is never absorbed (its producer
then runs as float fallback in that plan). Each distinct set of requested outputs has its own
plan; a plan frees every intermediate after its last reader, as the float runtime does.
A residual Add (or Sum) of an integer convolution's 8-bit output that nothing else reads runs
fused into that convolution, one step where the Add was (`fuse.py`: the same numbers).

A model that streams its weights (udo_build.ir.weights) keeps what the plan makes of them
(quantized weights, LPBQ integers, a binder's packed constants) spilled to files, mapped, and
each node's pages are given back once its step is planned (the session gives them back after
each step it runs): a plan of a large model holds maps, not arrays. The values are the same.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any

import numpy as np

from ...errors import UserError
from ...ir.encodings import Encoding
from ...ir.graph import DEFAULT_PACKAGE, Node, needed_nodes
from ...ir.qmodel import QuantizedModel
from ...ir.weights import release, spill, streams
from ...kernels.oppkg import Impl
from . import registry
from .fixed import dequantize_along, lpbq_integers, qtype, quantize_along
from .fuse import fuse_residuals
from .movement import clamp_of
from .registry import Bound, Context, Operand, OutputSpec


@dataclass(frozen=True, eq=False)
class QStep:
    fn: Callable[..., Any]
    inputs: tuple[str, ...]  # "" for an omitted optional input
    outputs: tuple[str, ...]
    kwargs: dict[str, Any]
    label: str  # package::op (node name)
    user: bool  # a UDO kernel: its failures are the user's
    integer: bool  # an integer kernel (else a float kernel between dequantize and quantize)
    dequantize: tuple[Encoding | None, ...] = ()  # per input, before a float kernel
    quantize: tuple[Encoding | None, ...] = ()  # per output, after a float kernel
    frees: tuple[str, ...] = ()


@dataclass(frozen=True, eq=False)
class QPlan:
    steps: tuple[QStep, ...]
    constants: dict[str, np.ndarray]
    outputs: tuple[str, ...]
    feeds: frozenset[str]  # the graph inputs the plan reads
    encodings: dict[str, Encoding]  # tensors held quantized at run time
    absorbed: dict[str, str]  # absorbed tensor -> the activation output it went into


@dataclass
class _State:
    encodings: dict[str, Encoding]
    absorbable: dict[str, Node]  # absorbed tensor -> its Relu/Clip reader
    constants: dict[str, np.ndarray] = field(default_factory=dict)
    skip: set[str] = field(default_factory=set)
    absorbed: dict[str, str] = field(default_factory=dict)


class Planner:
    def __init__(self, qmodel: QuantizedModel, float_impl: Callable[[Node], Impl]) -> None:
        self.qmodel = qmodel
        self.graph = qmodel.model.graph
        self.weights = dict(qmodel.model.weights)
        # a model that streams its weights (udo_build.ir.weights): what is made of them is
        # spilled to files too, so the plan holds maps, not arrays
        self.streams = streams(self.weights)
        self._keep: Callable[[np.ndarray], np.ndarray] = spill if self.streams else _as_it_is
        self.infos = self.graph.infos()
        self.float_impl = float_impl
        self._readers = {o: n for n in self.graph.nodes for o in n.inputs}
        self._params: dict[tuple[str, int], np.ndarray] = {}  # quantized weights
        self._reals: dict[tuple[str, int], np.ndarray] = {}  # their values, when asked for
        self._bound: dict[tuple[Any, ...], Bound | None] = {}  # by node and what it sees
        self._lpbq_ints: dict[str, tuple[np.ndarray, tuple[Encoding, ...]]] = {}

    def build(self, outputs: tuple[str, ...]) -> QPlan:
        nodes = needed_nodes(self.graph.nodes, outputs)
        consumers = self.graph.consumers()
        absorbable = {t: consumers[t][0] for t in self.qmodel.absorbed() if t not in outputs}
        inputs = [t.name for t in self.graph.inputs if t.name not in self.weights]
        state = _State({n: self.qmodel.activations[n] for n in inputs
                        if n in self.qmodel.activations}, absorbable)
        live = set(outputs) | {i for n in nodes for i in n.inputs}
        nodes = [_without_unread(n, live) for n in nodes]
        steps = []
        for node in nodes:
            step = self._step(node, state)
            if step is not None:
                steps.append(step)
                self._release(node, step, state)
        constants = {**self.weights, **state.constants}
        steps = _with_frees(fuse_residuals(steps, set(outputs)), set(outputs) | set(constants))
        read = {i for s in steps for i in s.inputs} | set(outputs)
        return QPlan(tuple(steps), {k: v for k, v in constants.items() if k in read},
                     outputs, frozenset(n for n in inputs if n in read),
                     dict(state.encodings), state.absorbed)

    def _release(self, node: Node, step: QStep, state: _State) -> None:
        """A streaming model's: the pages the node's weights and what was made of them were
        read into, given back (udo_build.ir.weights)."""
        if self.streams:
            release(*(self.weights[n] for n in node.inputs if n in self.weights),
                    *(state.constants[n] for n in step.inputs if n in state.constants),
                    *step.kwargs.values())

    # -- one node ----------------------------------------------------------------------------

    def _step(self, node: Node, state: _State) -> QStep | None:
        if node.name in state.skip:
            return None
        operands = tuple(self._operand(node, i, state) for i in range(len(node.inputs)))
        if node.package == DEFAULT_PACKAGE:
            targets = tuple(self._target(o, state) for o in node.outputs)
            types = [o.dtype for o in operands if o is not None]
            impl = registry.select(node.op, types)
            bound = None if impl is None else self._bind(node, operands, targets)
            if impl is not None and bound is not None:
                return self._integer(node, impl, operands, targets, bound, state)
        return self._fallback(node, operands, state)

    def _bind(self, node: Node, operands: tuple[Operand | None, ...],
              targets: tuple[OutputSpec, ...]) -> Bound | None:
        """The node's load-time constants (packed weights, requantizations), made once for
        what it reads and makes: every plan that runs it alike shares them (a model's packed
        weights are held once, however many sets of outputs are asked for)."""
        key = (node.name, tuple(None if o is None else (o.name, o.dtype, o.encodings, o.shape)
                                for o in operands), targets)
        if key not in self._bound:
            bound = registry.bind(Context(node, operands, targets))
            if bound is not None and bound.replace:
                bound = replace(bound, replace={i: self._keep(v) if isinstance(v, np.ndarray)
                                                else v for i, v in bound.replace.items()})
            self._bound[key] = bound
        return self._bound[key]

    def _operand(self, node: Node, i: int, state: _State) -> Operand | None:
        name = node.inputs[i]
        if not name:
            return None
        info = self.infos.get(name)
        shape = info.shape if info is not None else None
        if name in self.weights:
            w = self.weights[name]
            encs = self.qmodel.params.get(name)
            if not encs or (w.dtype.kind != "f" and w.dtype != qtype(encs[0])):
                return Operand(name, str(w.dtype), None, w, w, w.shape)
            real = partial(self._dequantized, node, i, encs)  # made when a binder reads it
            if encs[0].lpbq_bitwidth:  # the integers q x block scale, one scale per channel
                ints, plain = self._lpbq(node, i, encs)
                return Operand(name, str(ints.dtype), plain, ints, real, w.shape)
            q = self._param(node, i, encs)
            return Operand(name, str(q.dtype), tuple(encs), q, real, w.shape)
        if name in state.encodings:
            enc = state.encodings[name]
            return Operand(name, str(qtype(enc)), (enc,), shape=shape)
        return Operand(name, info.dtype if info is not None else "float32", shape=shape)

    def _param(self, node: Node, i: int, encs: list[Encoding]) -> np.ndarray:
        """A weight quantized with its encodings (along the node's channel axis; a quantized
        one as it is), computed once."""
        key = self._key(node, i, encs)
        if key not in self._params:
            self._params[key] = self._keep(self._quantized(key, encs))
        return self._params[key]

    def _quantized(self, key: tuple[str, int], encs: list[Encoding]) -> np.ndarray:
        name, axis = key
        w = self.weights[name]
        if encs[0].blocked:
            _check_blocks(name, w.shape, encs)
        elif len(encs) > 1 and (w.ndim == 0 or w.shape[axis] != len(encs)):
            raise UserError(f"weight {name!r} of shape {list(w.shape)} has {len(encs)} "
                            f"encodings, not one per index of axis {axis}",
                            hint="give one encoding, or one per output channel")
        return quantize_along(w, encs, axis) if w.dtype.kind == "f" else w

    def _dequantized(self, node: Node, i: int, encs: list[Encoding]) -> np.ndarray:
        """A quantized weight's values (`_param` dequantized), computed once, when first
        asked for: only float kernels and a few binders read them."""
        key = self._key(node, i, encs)
        if key not in self._reals:
            self._reals[key] = self._keep(dequantize_along(self._param(node, i, encs), encs,
                                                           key[1]))
        return self._reals[key]

    def _key(self, node: Node, i: int, encs: list[Encoding]) -> tuple[str, int]:
        """A weight by its name and the axis its encodings are along."""
        name = node.inputs[i]
        w = self.weights[name]
        return name, registry.channel_axis(node, i, w.ndim, len(encs), w.shape)

    def _lpbq(self, node: Node, i: int, encs: list[Encoding]
              ) -> tuple[np.ndarray, tuple[Encoding, ...]]:
        name = node.inputs[i]
        if name not in self._lpbq_ints:  # the codes are not kept: only these integers are read
            key = self._key(node, i, encs)
            q = self._params[key] if key in self._params else self._quantized(key, encs)
            ints, plain = lpbq_integers(q, encs)
            self._lpbq_ints[name] = self._keep(ints), plain
        return self._lpbq_ints[name]

    def _real(self, name: str) -> np.ndarray | None:
        """A constant's real value (a quantized one with one encoding dequantized)."""
        w = self.weights.get(name)
        encs = self.qmodel.params.get(name)
        if w is None or w.dtype.kind == "f" or not encs:
            return w
        if encs[0].blocked:
            return None
        return encs[0].dequantize(w) if len(encs) == 1 else None

    def _target(self, name: str, state: _State) -> OutputSpec:
        reader = state.absorbable.get(name)
        if reader is not None:
            clamp = clamp_of(reader, {n: self._real(n) for n in reader.inputs[1:] if n})
            if clamp is not None:
                out = reader.outputs[0]
                return OutputSpec(out, self.qmodel.activations[out], clamp)
        return OutputSpec(name, self.qmodel.activations.get(name) if name else None)

    def _integer(self, node: Node, impl: Impl, operands: Sequence[Operand | None],
                 targets: Sequence[OutputSpec], bound: Bound, state: _State) -> QStep:
        inputs = []
        for i, operand in enumerate(operands):
            name = "" if operand is None else operand.name
            if i in bound.replace:
                name = f"{name}#{node.name}"
                state.constants[name] = bound.replace[i]
            elif operand is not None and operand.constant and operand.encodings:
                name = f"{name}#q"
                state.constants[name] = operand.value  # type: ignore[assignment]
            inputs.append(name)
        for original, target in zip(node.outputs, targets, strict=True):
            if target.name != original:  # requantized into the absorbing activation
                state.skip.add(state.absorbable[original].name)
                state.absorbed[original] = target.name
            state.encodings[target.name] = target.encoding  # type: ignore[assignment]
        return QStep(impl.fn, tuple(inputs), tuple(t.name for t in targets), bound.kwargs,
                     f"integer::{node.op} (node {node.name})", False, True)

    def _fallback(self, node: Node, operands: Sequence[Operand | None],
                  state: _State) -> QStep:
        impl = self.float_impl(node)
        fn = impl.fn
        inputs, dequantize = [], []
        for i, operand in enumerate(operands):
            name = "" if operand is None else operand.name
            enc = None
            if i == 0 and _gathers_codes(node, operand):  # a table: the rows taken dequantized
                name = f"{name}#q"
                state.constants[name] = operand.value  # type: ignore[union-attr,assignment]
                fn = partial(_dequantized_rows, impl.fn, operand.encodings[0])  # type: ignore
            elif operand is not None and operand.constant and operand.encodings:
                name = f"{name}#dq"  # the weight's own encodings: an LPBQ operand's are the
                state.constants[name] = operand.real  # per-channel ones of its integers
            elif operand is not None and operand.encodings:
                enc = operand.encodings[0]
            inputs.append(name)
            dequantize.append(enc)
        quantize = tuple(self.qmodel.activations.get(o) if o else None for o in node.outputs)
        for name, enc in zip(node.outputs, quantize, strict=True):
            if enc is not None:
                state.encodings[name] = enc
        return QStep(fn, tuple(inputs), node.outputs, node.kwargs,
                     f"{node.package}::{node.op} (node {node.name})",
                     node.package != DEFAULT_PACKAGE, False, tuple(dequantize), quantize)


def _as_it_is(array: np.ndarray) -> np.ndarray:
    return array


def _gathers_codes(node: Node, operand: Operand | None) -> bool:
    """A default Gather of a constant table with one encoding: it takes the rows of its codes
    and dequantizes those (the same values as the rows of the table dequantized, each element
    alone), so the table is held once, as codes, not also as floats (an LLM's embedding)."""
    return (node.op == "Gather" and node.package == DEFAULT_PACKAGE and operand is not None
            and operand.constant and operand.encodings is not None
            and len(operand.encodings) == 1 and not operand.encodings[0].blocked)


def _dequantized_rows(gather: Callable[..., np.ndarray], enc: Encoding, codes: np.ndarray,
                      *args: Any, **kwargs: Any) -> np.ndarray:
    return enc.dequantize(gather(codes, *args, **kwargs))


def _check_blocks(name: str, shape: tuple[int, ...], encs: list[Encoding]) -> None:
    """Block encodings must cover the weight: one per channel, blocks x size = its input axis."""
    first = encs[0]
    channel, block = (1, 0) if first.blocks_first else (0, 1)
    covered = len(first.block_scales) * first.block_size
    if len(shape) < 2 or shape[channel] != len(encs) or shape[block] != covered:
        raise UserError(f"weight {name!r} of shape {list(shape)} does not take {len(encs)} "
                        f"channel(s) of {len(first.block_scales)} blocks of {first.block_size}",
                        hint="block encodings are for MatMul, Gemm and Conv weights, one per "
                             "output channel, blocks covering the input axis")


def _without_unread(node: Node, live: set[str]) -> Node:
    """The node without the trailing outputs nothing reads (Dropout's mask)."""
    outputs = list(node.outputs)
    while len(outputs) > 1 and outputs[-1] not in live:
        outputs.pop()
    return node if len(outputs) == len(node.outputs) else replace(node, outputs=tuple(outputs))


def _with_frees(steps: list[QStep], keep: set[str]) -> list[QStep]:
    """Each step with the tensors that are dead after it (read last there, or never read)."""
    last: dict[str, int] = {}
    for i, step in enumerate(steps):
        for name in step.inputs:
            last[name] = i
    out = []
    for i, step in enumerate(steps):
        dead = [n for n in dict.fromkeys(step.inputs) if n and last.get(n) == i]
        dead += [o for o in step.outputs if o and o not in last]
        frees = tuple(n for n in dead if n not in keep)
        out.append(QStep(step.fn, step.inputs, step.outputs, step.kwargs, step.label, step.user,
                         step.integer, step.dequantize, step.quantize, frees))
    return out
