"""The built-in passes and the pipeline of each optimization level.

A pass is a named function (graph, context) -> (graph, changed). The pipeline is a flat list:

    lower                      (lower.py, before the passes)
    constprop, cse, dce        cleanup
    rules@2000 ...             one pass per rule priority, each to a fixed point (rewrite.engine)
      constprop, cse, dce      after each rule pass
    (selection, memory planning and the record follow, compile.py)

- constprop: an op whose inputs are all constants is computed now and its outputs become
  constants; an op whose implementation is flagged IS_CONST is computed on zeros of its
  non-constant inputs (its output does not depend on their values); INHIBIT_CONST_PROP
  prevents both. On int8 graphs only unencoded constants fold (shapes, indices): folding an
  encoded tensor would change what the integer path computes.
- cse: ops with equal structure (op, package, inputs, attributes, layout, model shapes) compute
  equal values: the later one's readers read the earlier one's outputs. Equal constants are
  already one value (the graph interns them by content).
- dce: only what the requested outputs need stays.

Levels: 1 runs the cleanup passes and the tiling rules only (no fusions, no layout rules: every
transpose lowering made stays); 2 also the default package's layout rules and fusions and the
rules of the user's op packages; 3 is level 2 with aggressive tiling (budget: a quarter of the
VTCM), which makes more, smaller pieces (a larger record) that keep more tensors in TCM.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ir.graph import DEFAULT_PACKAGE
from ..kernels.default import DEFAULT
from ..kernels.oppkg import Flags, OpPackage, OpPackageError
from ..rewrite.engine import Trace, remove_dead, rewrite
from ..rewrite.graph import NONE, Op, OpGraph
from ..rewrite.rules import Rule

PassFn = Callable[[OpGraph, "Context"], tuple[OpGraph, bool]]


@dataclass(frozen=True)
class Pass:
    name: str
    run: PassFn


@dataclass
class Context:
    level: int
    precision: str
    vtcm_bytes: int
    budget: int
    packages: Mapping[str, OpPackage] = field(default_factory=dict)
    trace: Trace = field(default_factory=Trace)
    log: list[dict[str, Any]] = field(default_factory=list)
    is_const: dict[tuple[str, str], bool] = field(default_factory=dict)


def _flags(op: Op, graph: OpGraph, packages: Mapping[str, OpPackage]) -> Flags | None:
    package = DEFAULT if op.package == DEFAULT_PACKAGE else packages.get(op.package)
    if package is None:
        return None
    from .ops import ONNX_OF

    name = ONNX_OF.get(op.op, op.op) if op.package == DEFAULT_PACKAGE else op.op
    if name in ("Reshape", "Slice", "ChannelShuffle"):
        return Flags.NONE
    try:
        impl = package.select(name, [graph.types[v].dtype for v in op.inputs if v != NONE])
    except OpPackageError:
        return None
    return impl.flags


def _may_be_const(op: Op, ctx: Context) -> bool:
    """Whether an implementation of the op is flagged IS_CONST (cached per op name)."""
    key = (op.package, op.op)
    if key not in ctx.is_const:
        from .select import kernel_name

        package = DEFAULT if op.package == DEFAULT_PACKAGE else ctx.packages.get(op.package)
        impls = package.impls(kernel_name(op)) if package is not None else []
        ctx.is_const[key] = any(i.flags & Flags.IS_CONST for i in impls)
    return ctx.is_const[key]


def constprop(graph: OpGraph, ctx: Context) -> tuple[OpGraph, bool]:
    changed = False
    for stale in graph.order():
        op = graph.ops.get(stale.id)  # folding earlier ops rewired (or removed) it
        if op is None:
            continue
        inputs = [v for v in op.inputs if v != NONE]
        constant = all(v in graph.consts for v in inputs)
        if not constant and not _may_be_const(op, ctx):
            continue
        flags = _flags(op, graph, ctx.packages)
        if flags is None or flags & Flags.INHIBIT_CONST_PROP:
            continue
        if not constant and not flags & Flags.IS_CONST:
            continue
        if ctx.precision == "int8" and any(graph.types[v].enc for v in [*inputs, *op.outputs]):
            continue
        values = _evaluate(graph, op, ctx.packages)
        if values is None:
            continue
        for vid, value in zip(op.outputs, values, strict=True):
            t = graph.types[vid]
            graph.replace_uses(vid, graph.const(np.asarray(value).astype(t.dtype, copy=False),
                                                f"{graph.names[vid]}:folded"))
        remove_dead(graph, [op.id])
        changed = True
    return graph, changed


def _evaluate(graph: OpGraph, op: Op, packages: Mapping[str, OpPackage]) -> Any:
    """The op on its constants; zeros stand in for the other inputs of an IS_CONST op."""
    from .execute import evaluate

    missing = [v for v in dict.fromkeys(op.inputs) if v != NONE and v not in graph.consts]
    for vid in missing:
        t = graph.types[vid]
        graph.consts[vid] = np.zeros(t.shape, dtype=t.dtype)
    try:
        return evaluate(graph, op, packages)
    finally:
        for vid in missing:
            del graph.consts[vid]


def cse(graph: OpGraph, ctx: Context) -> tuple[OpGraph, bool]:
    seen: dict[tuple[Any, ...], Op] = {}
    changed = False
    for stale in graph.order():
        op = graph.ops.get(stale.id)  # its inputs may have been merged meanwhile
        if op is None:
            continue
        first = seen.setdefault(op.key, op)
        if first is op:
            continue
        for old, new in zip(op.outputs, first.outputs, strict=True):
            graph.replace_uses(old, new)
        remove_dead(graph, [op.id])
        changed = True
    return graph, changed


def dce(graph: OpGraph, ctx: Context) -> tuple[OpGraph, bool]:
    live = {v for _, v in graph.outputs}
    keep: set[int] = set()
    for op in reversed(graph.order()):
        if any(v in live for v in op.outputs):
            keep.add(op.id)
            live.update(v for v in op.inputs if v != NONE)
    dead = [i for i in graph.ops if i not in keep]
    removed = [graph.remove(op_id) for op_id in dead]  # all before any value goes: a dead
    for op in removed:  # op may read what an earlier dead op makes
        for vid in op.outputs:
            graph.drop_value(vid)
    for vid in [v for v in graph.consts if v not in live]:
        graph.drop_value(vid)
    return graph, bool(dead)


CLEANUP: tuple[Pass, ...] = (Pass("constprop", constprop), Pass("cse", cse), Pass("dce", dce))


def rule_pass(priority: int, rules: Sequence[Rule]) -> Pass:
    name = f"rules@{priority}"

    def run(graph: OpGraph, ctx: Context) -> tuple[OpGraph, bool]:
        return graph, rewrite(graph, rules, ctx, ctx.trace, name)
    return Pass(name, run)


def pipeline(rules: Sequence[Rule], level: int) -> list[Pass]:
    """The passes of a level (see the module docstring)."""
    from .fusion_rules import FUSION_RULES, TILING_RULES
    from .layout_rules import LAYOUT_RULES

    chosen = list(TILING_RULES)
    if level >= 2:
        chosen = [*LAYOUT_RULES, *FUSION_RULES, *rules, *TILING_RULES]
    by_priority: dict[int, list[Rule]] = {}
    for rule in chosen:
        by_priority.setdefault(rule.priority, []).append(rule)
    passes = list(CLEANUP)
    for priority in sorted(by_priority):
        passes.append(rule_pass(priority, by_priority[priority]))
        passes.extend(CLEANUP)
    return passes


def run_passes(graph: OpGraph, passes: Sequence[Pass], ctx: Context,
               progress: Callable[[int, int], None] | None = None) -> OpGraph:
    """Run the passes in order (telling `progress` (passes done, their number) after each). A
    cleanup pass is skipped when the graph has not changed since it last ran (they are
    idempotent): a rule pass that rewrote nothing costs no cleanup."""
    ran_at: dict[str, int] = {}
    for done, p in enumerate(passes, 1):
        if progress is not None:
            progress(done - 1, len(passes))
        if p in CLEANUP and ran_at.get(p.name) == graph._version:
            continue
        before = len(graph.ops)
        graph, changed = p.run(graph, ctx)
        ran_at[p.name] = graph._version
        ctx.log.append({"pass": p.name, "changed": changed, "ops": len(graph.ops),
                        "removed": before - len(graph.ops)})
    if progress is not None:
        progress(len(passes), len(passes))
    return graph
