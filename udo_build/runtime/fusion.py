"""Load-time rewrites of the float runtime's execution plan (the model itself never changes).

First, constant folding: a default-package node whose inputs are all constants runs once, when
the plan is built (`fold_constants`), as DenseNet's Unsqueeze of its batch-norm factors.

Then the rules. Each is a named value anchored at a node of some ops (a convolution, a batch
norm) whose output has one consumer and is not requested: it declines (returns None) or returns
the node that replaces the anchor and that consumer, plus any new constants. `fuse` applies the
rules to a fixed point, with an iteration cap.

- fold_batch_norm: Conv -> BatchNormalization (inference) with constant weights and statistics:
  the BN's scale folds into the weights and its shift into the bias.
- fold_scale / fold_shift: Conv -> Mul / Add by a constant per output channel (or a scalar), as
  DenseNet and Inception v2 have after their batch norms.
- fuse_add: Conv -> Add/Sum of two tensors (a residual): the other operand, computed before the
  convolution and of the output's shape, is added in place to the convolution's output.
- fuse_relu: Conv -> Relu: the activation runs in place on the convolution's output.
- scale_batch_norm / shift_batch_norm: BatchNormalization -> Mul / Add by a constant per channel
  (DenseNet's pre-activations): folded into the batch norm's scale and bias.

Folded factors are computed in float64; the weights are scaled in float32 (one rounding):
results differ from the unfused graph by float32 rounding only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..ir.graph import DEFAULT_PACKAGE, Node

CONVS = ("Conv", "FusedConv")


@dataclass
class Context:
    nodes: list[Node]
    constants: dict[str, np.ndarray]
    keep: frozenset[str]  # tensors that must stay observable (requested outputs)
    shapes: Mapping[str, tuple[int, ...] | None]
    producer: dict[str, int] = field(default_factory=dict)
    consumers: dict[str, list[int]] = field(default_factory=dict)

    def index(self) -> None:
        self.producer = {o: i for i, n in enumerate(self.nodes) for o in n.outputs if o}
        self.consumers = {}
        for i, n in enumerate(self.nodes):
            for name in dict.fromkeys(n.inputs):
                if name:
                    self.consumers.setdefault(name, []).append(i)

    def only_consumer(self, node: Node) -> Node | None:
        """The one node reading `node`'s single output, when nothing else needs that output."""
        out = node.outputs[0] if len(node.outputs) == 1 else None
        users = self.consumers.get(out or "", [])
        if out is None or out in self.keep or len(users) != 1:
            return None
        user = self.nodes[users[0]]
        if user.package != DEFAULT_PACKAGE or user.inputs.count(out) != 1:
            return None
        return user

    def constant(self, name: str) -> np.ndarray | None:
        return self.constants.get(name) if name else None

    def fresh(self, base: str) -> str:
        name, n = base, 1
        while name in self.constants or name in self.producer or name in self.consumers:
            n, name = n + 1, f"{base}.{n}"
        return name


@dataclass(frozen=True)
class Rewrite:
    node: Node  # the node taking the anchor's place
    consumer: Node  # the node it absorbs
    constants: dict[str, np.ndarray]


@dataclass(frozen=True)
class Rule:
    name: str
    ops: tuple[str, ...]  # the ops of the anchor node
    apply: Callable[[Node, Context], Rewrite | None]


def _fused(conv: Node, inputs: Sequence[str], outputs: Sequence[str], **attrs: object) -> Node:
    kwargs = {**conv.kwargs, **attrs}
    kwargs.setdefault("activation", "")
    return Node.make(conv.name, "FusedConv", inputs, outputs, kwargs)


def _state(conv: Node) -> tuple[str, bool]:
    """(activation, has a residual addend) of a convolution."""
    has_z = len(conv.inputs) > 3 and bool(conv.inputs[3])
    return str(conv.attr("activation", "")), has_z


def _affine(conv: Node, ctx: Context, consumer: Node, multiplier: np.ndarray | None,
            addend: np.ndarray | None) -> Rewrite | None:
    """The convolution with y -> y * multiplier + addend folded in (vectors over channels)."""
    w = ctx.constant(conv.inputs[1])
    if w is None or w.dtype != np.float32 or _state(conv) != ("", False):
        return None
    b_name = conv.inputs[2] if len(conv.inputs) > 2 else ""
    b = ctx.constant(b_name)
    if b_name and b is None:
        return None
    m = w.shape[0]
    scale = np.ones(m) if multiplier is None else multiplier
    shift = np.zeros(m) if addend is None else addend
    bias = (np.zeros(m) if b is None else b.astype(np.float64)) * scale + shift
    weights = w * scale.astype(np.float32).reshape((-1,) + (1,) * (w.ndim - 1))
    names = (ctx.fresh(f"{conv.name}::w"), ctx.fresh(f"{conv.name}::b"))
    node = _fused(conv, (conv.inputs[0], *names), consumer.outputs[:1])
    return Rewrite(node, consumer, {names[0]: weights.astype(np.float32),
                                    names[1]: bias.astype(np.float32)})


def _per_channel(v: np.ndarray, channels: int, rank: int) -> np.ndarray | None:
    """v as one value per output channel, if it broadcasts as (1, C, 1, ...) or a scalar."""
    if v.ndim > rank or v.dtype.kind != "f":
        return None
    shape = (1,) * (rank - v.ndim) + v.shape
    if shape[0] != 1 or any(d != 1 for d in shape[2:]) or shape[1] not in (1, channels):
        return None
    return np.broadcast_to(v.astype(np.float64).reshape(-1), (channels,))


def fold_batch_norm(conv: Node, ctx: Context) -> Rewrite | None:
    bn = ctx.only_consumer(conv)
    if bn is None or bn.op != "BatchNormalization" or bn.attr("training_mode", 0):
        return None
    if len([o for o in bn.outputs if o]) != 1 or bn.inputs[0] != conv.outputs[0]:
        return None
    stats = [ctx.constant(name) for name in bn.inputs[1:5]]
    if any(s is None for s in stats):
        return None
    scale, shift, mean, var = (s.astype(np.float64) for s in stats)  # type: ignore[union-attr]
    multiplier = scale / np.sqrt(var + float(bn.attr("epsilon", 1e-5)))
    return _affine(conv, ctx, bn, multiplier, shift - mean * multiplier)


def _channel_operand(conv: Node, consumer: Node, ctx: Context) -> np.ndarray | None:
    """The consumer's other operand as one value per output channel, if it is a constant."""
    w = ctx.constant(conv.inputs[1])
    if len(consumer.inputs) != 2 or w is None:
        return None
    other = consumer.inputs[1] if consumer.inputs[0] == conv.outputs[0] else consumer.inputs[0]
    value = ctx.constant(other)
    return None if value is None else _per_channel(value, w.shape[0], w.ndim)


def fold_scale(conv: Node, ctx: Context) -> Rewrite | None:
    mul = ctx.only_consumer(conv)
    if mul is None or mul.op != "Mul":
        return None
    value = _channel_operand(conv, mul, ctx)
    return None if value is None else _affine(conv, ctx, mul, value, None)


def fold_shift(conv: Node, ctx: Context) -> Rewrite | None:
    add = ctx.only_consumer(conv)
    if add is None or add.op not in ("Add", "Sum"):
        return None
    value = _channel_operand(conv, add, ctx)
    return None if value is None else _affine(conv, ctx, add, None, value)


def fuse_add(conv: Node, ctx: Context) -> Rewrite | None:
    add = ctx.only_consumer(conv)
    if add is None or add.op not in ("Add", "Sum") or len(add.inputs) != 2:
        return None
    if _state(conv) != ("", False):
        return None
    y = conv.outputs[0]
    z = add.inputs[1] if add.inputs[0] == y else add.inputs[0]
    if z == y or z in ctx.constants or ctx.producer.get(z, -1) >= ctx.producer[y]:
        return None  # the addend must exist before the convolution runs
    shape = ctx.shapes.get(y)
    if shape is None or ctx.shapes.get(z) != shape or ctx.shapes.get(add.outputs[0]) != shape:
        return None
    inputs = list(conv.inputs[:3]) + [""] * (3 - len(conv.inputs[:3]))
    return Rewrite(_fused(conv, (*inputs, z), add.outputs), add, {})


def fuse_relu(conv: Node, ctx: Context) -> Rewrite | None:
    relu = ctx.only_consumer(conv)
    if relu is None or relu.op != "Relu" or _state(conv)[0]:
        return None
    return Rewrite(_fused(conv, conv.inputs, relu.outputs, activation="Relu"), relu, {})


def _batch_norm_affine(bn: Node, ctx: Context, op: str) -> Rewrite | None:
    """BN -> Mul (op "Mul") or Add by a per-channel constant, as one batch norm."""
    user = ctx.only_consumer(bn)
    shape = ctx.shapes.get(bn.outputs[0])
    if user is None or user.op not in ((op,) if op == "Mul" else ("Add", "Sum")) or not shape:
        return None
    if bn.attr("training_mode", 0) or len(shape) < 2 or len(user.inputs) != 2:
        return None
    params = [ctx.constant(name) for name in bn.inputs[1:5]]
    other = user.inputs[1] if user.inputs[0] == bn.outputs[0] else user.inputs[0]
    value = ctx.constant(other)
    if value is None or any(p is None or p.dtype != np.float32 for p in params):
        return None
    channel = _per_channel(value, shape[1], len(shape))
    if channel is None:
        return None
    scale, bias = (p.astype(np.float64) for p in params[:2])  # type: ignore[union-attr]
    if op == "Mul":
        scale, bias = scale * channel, bias * channel
    else:
        bias = bias + channel
    names = (ctx.fresh(f"{bn.name}::scale"), ctx.fresh(f"{bn.name}::B"))
    node = Node.make(bn.name, bn.op, (bn.inputs[0], *names, *bn.inputs[3:5]), user.outputs[:1],
                     bn.kwargs)
    return Rewrite(node, user, {names[0]: scale.astype(np.float32),
                                names[1]: bias.astype(np.float32)})


def scale_batch_norm(bn: Node, ctx: Context) -> Rewrite | None:
    return _batch_norm_affine(bn, ctx, "Mul")


def shift_batch_norm(bn: Node, ctx: Context) -> Rewrite | None:
    return _batch_norm_affine(bn, ctx, "Add")


RULES: tuple[Rule, ...] = (
    Rule("fold_batch_norm", CONVS, fold_batch_norm),
    Rule("fold_scale", CONVS, fold_scale),
    Rule("fold_shift", CONVS, fold_shift),
    Rule("fuse_add", CONVS, fuse_add),
    Rule("fuse_relu", CONVS, fuse_relu),
    Rule("scale_batch_norm", ("BatchNormalization",), scale_batch_norm),
    Rule("shift_batch_norm", ("BatchNormalization",), shift_batch_norm),
)


Evaluate = Callable[[Node, list], "tuple | None"]


def fold_constants(nodes: Sequence[Node], constants: Mapping[str, np.ndarray],
                   evaluate: Evaluate) -> tuple[list[Node], dict[str, np.ndarray]]:
    """Run the default-package nodes whose inputs are all constants: (the other nodes, the
    values they made). `evaluate(node, inputs)` returns the node's outputs, or None to keep
    the node."""
    known = dict(constants)
    kept, made = [], {}
    for node in nodes:
        if node.package != DEFAULT_PACKAGE or not all(not i or i in known for i in node.inputs):
            kept.append(node)
            continue
        values = evaluate(node, [known[i] if i else None for i in node.inputs])
        if values is None:
            kept.append(node)
            continue
        for name, value in zip(node.outputs, values, strict=False):
            if name:
                known[name] = made[name] = value
    return kept, made


class FusionError(RuntimeError):
    """The rules kept firing (a bug of udo-build)."""


def fuse(nodes: Sequence[Node], constants: Mapping[str, np.ndarray], keep: frozenset[str],
         shapes: Mapping[str, tuple[int, ...] | None],
         rules: Sequence[Rule] = RULES) -> tuple[list[Node], dict[str, np.ndarray], list[str]]:
    """Apply the rules to a fixed point: (nodes, constants added, names of the rules applied)."""
    ctx = Context(list(nodes), dict(constants), keep, shapes)
    added: dict[str, np.ndarray] = {}
    fired: list[str] = []
    start = 0  # nodes before it cannot match: a rewrite only changes what reads its inputs
    for _ in range(2 * len(nodes) + 1):
        ctx.index()
        anchor, rewrite, rule = _first_match(ctx, rules, start)
        if rewrite is None:
            return ctx.nodes, added, fired
        ctx.nodes[anchor] = rewrite.node
        ctx.nodes.remove(rewrite.consumer)
        ctx.constants.update(rewrite.constants)
        added.update(rewrite.constants)
        fired.append(rule)
        start = min([anchor] + [ctx.producer[i] for i in rewrite.node.inputs
                                if i in ctx.producer])
    raise FusionError("fusion did not reach a fixed point; rules that kept firing: "
                      + ", ".join(sorted(set(fired[-len(nodes):]))))


def _first_match(ctx: Context, rules: Sequence[Rule],
                 start: int) -> tuple[int, Rewrite | None, str]:
    for i in range(start, len(ctx.nodes)):
        node = ctx.nodes[i]
        if node.package != DEFAULT_PACKAGE:
            continue
        for rule in rules:
            if node.op not in rule.ops:
                continue
            rewrite = rule.apply(node, ctx)
            if rewrite is not None:
                return i, rewrite, rule.name
    return -1, None, ""
