"""The one driver that applies a rule set to a fixed point, with a worklist and an iteration cap.

    changed = rewrite(graph, rules, ctx, trace, pass_name="EARLY")

The worklist starts with every op in topological order. An op is tried against the rules whose
pattern roots at its op name (and the wildcard rules), in the set's order; the first that
matches, whose constraint holds and whose replacement does not decline, fires: the root's
outputs are replaced, the ops that no longer feed anything are removed, and only the
neighbourhood goes back on the worklist (the new ops, the readers of the replaced values, and
the readers and producers of values that lost a reader, whose one-use constraints may now
hold). So a pass costs what it rewrites, not passes over the whole graph.

The cap (16 rewrites per op of the graph, plus 256) stops rules that undo each other: the
error names the rules that kept firing, with how often they fired in the last rewrites.

A `Trace` counts the firings per pass and rule (the record keeps those counts) and, for the
rules it is asked about (`why`), says why each attempt failed: which input of which op did not
match, which constraint was false, or that the replacement declined.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from .graph import NONE, Op, OpGraph
from .replace import Builder, build
from .rules import Rule, match

MAX_REASONS = 20  # per rule, in a trace
WINDOW = 200  # firings the cap error summarizes


class RuleLoopError(Exception):
    """A rule pass did not reach a fixed point within its cap."""

    def __init__(self, pass_name: str, rewrites: int, recent: Counter[str],
                 packages: dict[str, str]) -> None:
        self.pass_name = pass_name
        self.rules = dict(recent.most_common())
        self.packages = sorted({packages[r] for r in self.rules})
        names = ", ".join(f"{rule} ({count}x)" for rule, count in recent.most_common())
        super().__init__(f"rule pass {pass_name} did not reach a fixed point after {rewrites} "
                         f"rewrites; rules that kept firing: {names}")


@dataclass
class Trace:
    """What the rules did: firings per (pass, rule), and why the asked-about rules missed."""

    why: frozenset[str] = frozenset()
    events: bool = False  # also list every firing
    fired: Counter[tuple[str, str]] = field(default_factory=Counter)
    firings: list[str] = field(default_factory=list)  # the rules that fired, in order
    misses: dict[str, list[str]] = field(default_factory=dict)
    log: list[str] = field(default_factory=list)

    def miss(self, rule: Rule, op: Op, reason: str) -> None:
        if rule.name in self.why:
            reasons = self.misses.setdefault(rule.name, [])
            if len(reasons) < MAX_REASONS:
                reasons.append(f"at {op} ({op.origin}): {reason}")

    def hit(self, pass_name: str, rule: Rule, op: Op) -> None:
        self.fired[(pass_name, rule.name)] += 1
        self.firings.append(rule.name)
        if self.events:
            self.log.append(f"{pass_name}: {rule.name} at {op} ({op.origin})")

    def counts(self) -> list[dict[str, Any]]:
        return [{"pass": p, "rule": r, "count": n} for (p, r), n in sorted(self.fired.items())]

    def lines(self) -> list[str]:
        out = [f"{p}: {r} fired {n}x" for (p, r), n in sorted(self.fired.items())]
        for name in sorted(self.why):
            reasons = self.misses.get(name)
            fired = sum(n for (_, r), n in self.fired.items() if r == name)
            if not reasons:
                out.append(f"{name}: fired {fired}x; no attempt failed"
                           if fired else f"{name}: never tried (no op it roots at)")
                continue
            out.append(f"{name}: fired {fired}x; did not match:")
            out.extend(f"  {r}" for r in reasons)
        return out + self.log


def rewrite(graph: OpGraph, rules: Sequence[Rule], ctx: Any, trace: Trace,
            pass_name: str = "rules", cap: int | None = None) -> bool:
    """Apply the rules to a fixed point; True when anything changed."""
    by_op: dict[str, list[Rule]] = {}
    wildcard: list[Rule] = []
    for rule in rules:
        for name in rule.match.ops:
            (wildcard if name == "*" else by_op.setdefault(name, [])).append(rule)
    cap = cap if cap is not None else 16 * len(graph.ops) + 256
    work = deque(op.id for op in graph.order())
    queued = set(work)
    recent: deque[str] = deque(maxlen=WINDOW)
    count = 0
    while work:
        op_id = work.popleft()
        queued.discard(op_id)
        op = graph.ops.get(op_id)
        if op is None:
            continue
        for rule in by_op.get(op.qname, []) + wildcard:
            touched = _try(rule, op, graph, ctx, trace, pass_name)
            if touched is None:
                continue
            count += 1
            recent.append(rule.name)
            if count > cap:
                raise RuleLoopError(pass_name, count, Counter(recent),
                                    {r.name: r.package for r in rules})
            for other in touched:
                if other not in queued and other in graph.ops:
                    queued.add(other)
                    work.append(other)
            break
    return count > 0


def _try(rule: Rule, op: Op, graph: OpGraph, ctx: Any, trace: Trace,
         pass_name: str) -> list[int] | None:
    m, why = match(rule.match, op, graph, ctx)
    if m is None:
        trace.miss(rule, op, f"pattern: {why}")
        return None
    if rule.constraint is not None:
        why = rule.constraint.check(m)
        if why:
            trace.miss(rule, op, f"constraint: {why}")
            return None
    builder = Builder(graph, op.origin)
    values = build(rule.replace, m, builder)
    if values is None:
        _discard(graph, builder.made)
        trace.miss(rule, op, "the replacement declined")
        return None
    trace.hit(pass_name, rule, op)
    return _commit(graph, op, values, builder.made)


def _commit(graph: OpGraph, root: Op, values: Sequence[int], made: list[int]) -> list[int]:
    touched = list(made)
    renames = []
    for old, new in zip(root.outputs, values, strict=False):
        if new != old:
            touched += graph.replace_uses(old, new)
            renames.append((old, new, graph.names[old]))
    touched += remove_dead(graph, [root.id])
    if graph.dialect.named:  # a made value takes the name of the tensor it replaces
        fresh = {v for op_id in made if op_id in graph.ops for v in graph.ops[op_id].outputs}
        for old, new, name in renames:
            if new in fresh and old not in graph.types:
                graph.rename(new, name)
    return touched


def remove_dead(graph: OpGraph, start: Sequence[int]) -> list[int]:
    """Remove the ops among `start` (and then their producers) whose outputs nothing uses;
    the ids of ops whose inputs lost a reader."""
    stack = list(start)
    touched: list[int] = []
    while stack:
        node = graph.ops.get(stack.pop())
        if node is None or any(graph.uses(v) for v in node.outputs):
            continue
        graph.remove(node.id)
        for vid in node.outputs:
            graph.drop_value(vid)
        for vid in dict.fromkeys(node.inputs):
            if vid == NONE or vid not in graph.types:
                continue
            touched += list(graph.users[vid])
            producer = graph.producer.get(vid)
            if producer is not None:
                touched.append(producer)
                stack.append(producer)
            elif vid in graph.consts and not graph.uses(vid):
                graph.drop_value(vid)
    return touched


def _discard(graph: OpGraph, made: list[int]) -> None:
    """Undo the ops a declining replacement already made."""
    remove_dead(graph, list(reversed(made)))
