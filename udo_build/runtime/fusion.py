"""Load-time rewrites of the float runtime's execution plan (the model itself never changes).

First, constant folding: a default-package node whose inputs are all constants runs once, when
the plan is built (`fold_constants`), as DenseNet's Unsqueeze of its batch-norm factors.

Then the rules, run by the one rewrite engine on the nodes as a graph in the model's layout
(`udo_build.rewrite.model`); a rule never removes a requested tensor (they are the graph's
outputs). `RULES` are the folds every vocabulary shares (`udo_build.rewrite.fold`: batch norms
and per-channel Mul/Add by constants fold into the convolution or batch norm that feeds them),
then the runtime's own fusions into one FusedConv step:

- fuse_add: Add/Sum(Conv, z) of two tensors of one static shape (a residual), the addend made
  before the convolution (so it is there when the convolution runs): added in place to the
  convolution's output;
- fuse_relu: Relu(Conv or FusedConv without activation): the activation runs in place.

Folded factors are computed in float64; the weights are scaled in float32 (one rounding):
results differ from the unfused graph by float32 rounding only; the fusions are exact.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import numpy as np

from ..ir.graph import DEFAULT_PACKAGE, Node
from ..rewrite.fold import ONNX, Static, Unencoded, fold_rules
from ..rewrite.graph import TType
from ..rewrite.model import rewrite_nodes
from ..rewrite.replace import CopyAttrs, InputsOf, New, WithSize, WithType
from ..rewrite.rules import MIDDLE, All, AttrOf, Check, Eq, Match, OneUse, Op, Rule

CONVS = ("Conv", "FusedConv")
ADDS = ("Add", "Sum")


def _plain(name: str) -> All:
    """The convolution has no activation and no addend."""
    return All(Eq(AttrOf(name, "activation", ""), ""),
               Check(f"{name} has no addend", lambda m: len(m.op(name).inputs) < 4
                     or m.op(name).inputs[3] < 0))


def _addend_first(m: Match) -> bool:
    z = m.graph.producer.get(m.value("z"))
    return m.value("z") not in m.graph.consts and m.value("z") != m.value("conv") and (
        z is None or z < m.op("conv").id)


def _fused(*inputs: object, **attrs: object) -> New:
    return WithSize("*", WithType("*", New("FusedConv", *inputs,
                                           attrs=CopyAttrs("conv", **attrs))))


ADDEND = All(OneUse("conv"), _plain("conv"),
             Check("the addend is a tensor made before the convolution", _addend_first),
             Static("*"),
             Check("the addend, the convolution and the sum have one shape",
                   lambda m: m.shape("z") == m.shape("conv") == m.shape("*")))
CONV = Op(CONVS, ..., name="conv")

RULES: tuple[Rule, ...] = (
    *fold_rules(ONNX),
    Rule("fuse_add", MIDDLE, Op(ADDS, CONV, "z"),
         _fused(InputsOf("conv", 3), "z", activation=""), ADDEND),
    Rule("fuse_add_first", MIDDLE, Op(ADDS, "z", CONV),
         _fused(InputsOf("conv", 3), "z", activation=""), ADDEND),
    Rule("fuse_relu", MIDDLE, Op("Relu", CONV), _fused(InputsOf("conv"), activation="Relu"),
         All(OneUse("conv"), Unencoded("conv"), Eq(AttrOf("conv", "activation", ""), ""))),
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


def fuse(nodes: Sequence[Node], constants: Mapping[str, np.ndarray], keep: Sequence[str],
         types: Mapping[str, TType],
         rules: Sequence[Rule] = RULES) -> tuple[list[Node], dict[str, np.ndarray], list[str]]:
    """The rules applied to a fixed point: (nodes, the constants they read, names of the rules
    applied in order). A rule set that does not reach a fixed point is a `RuleLoopError`."""
    return rewrite_nodes(nodes, constants, keep, types, rules)
