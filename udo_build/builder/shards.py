"""Sharded CI: N runners split a recipe through a shared remote cache (`--shard K/N`).

Runners started together execute each action key once in all:

1. upstream (opdef, the packages, convert, quantize, outputs: the work that needs no fan-out,
   see plan.fan_out) is the first shard's; the others wait until the remote holds what their
   fan-out needs of it, then take it from there;
2. the fan-out units (a prepare; a run with its check) are split by their leaders' keys, so
   that actions with equal keys fall in one shard. The first shard decides the split and
   publishes it as an entry of its own (the key: the sorted keys of every unit, and N); the
   others wait for it, so every shard follows the same split even where their stores differ.
   The split balances the units that are not cached by the seconds each action took before:
   in the last build the first shard's store recorded (its history), else in the remote's
   timings (below), else by kind (the mean seconds of the kind there, else KIND_SECONDS): the
   longest unit first, to the least loaded shard;
3. the last shard (N/N) gathers: it waits until the remote holds every unit the gathering
   needs (assemble, a run of the deployable bundle), then builds it, and files the seconds
   every action took where it ran (the remote's timings, by recipe and action ids) for the
   next pipeline's split.

Waits look at the remote every SHARD_POLL seconds, at most `--shard-wait` seconds each.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, Protocol

from ..canonical import canonical_json, typed_digest
from ..errors import Problem, UserError
from .plan import FanOut, Plan, Shard, fan_out

if TYPE_CHECKING:
    from ..store import Store
    from .engine import ActionState, Options

SHARD_POLL = 2.0  # seconds between looks at the remote while the other shards work
KIND_SECONDS = {"prepare": 10.0, "run": 5.0, "check": 0.1}  # without any history; others 1.0
SCHEMA = "udo-build/shards"
VERSION = 1

class Events(Protocol):
    """Where a shard tells its waits (the session's events)."""

    def warning(self, problem: Problem) -> None: ...


Run = Callable[["Plan", "Options", bool], "dict[str, ActionState]"]  # (plan, options, quiet)


@dataclass(frozen=True)
class ShardBuild:
    """One shard's build: its store (with the remote tier), the selected plan, and how to run
    a plan (the session's engine, on its executor)."""

    store: Store
    plan: Plan
    shard: Shard
    options: Options
    events: Events
    run: Run
    wait: float  # seconds each wait for the other shards' work may take
    history: dict[str, Any]  # the recipe's last build on this store (load_history)


def build_shard(job: ShardBuild) -> dict[str, ActionState]:
    """Build this shard's part (see the module's docstring); the states of what it ran."""
    parts = fan_out(job.plan)
    units = {aid for unit in parts.units.values() for aid in unit}
    needed = set(job.plan.closure(units).actions) - units  # the upstream the fan-out needs
    first = job.shard.index == 1
    if not first:
        _wait(job, job.plan.closure(needed), set(), "the first shard's upstream work")
    states = job.run(job.plan.closure(set(parts.upstream) if first else needed),
                     job.options, False)
    if _failed(states):
        return states
    leaders = _unit_keys(job, parts)
    split = _assignment(job, parts, leaders)
    mine = {aid for leader, unit in parts.units.items()
            if split.get(leaders[leader].key or "") == job.shard.index for aid in unit}
    states = _merge(states, job.run(job.plan.closure(mine), job.options, False))
    if job.shard.index == job.shard.count and not _failed(states) and parts.gathering:
        gather = job.plan.gathering()
        _wait(job, gather, set(parts.gathering), "the other shards' work")
        states = _merge(states, job.run(gather, job.options, False))
        if not _failed(states):
            _publish_timings(job, states)
    return states


def _failed(states: dict[str, ActionState]) -> bool:
    return any(s.status == "failed" for s in states.values())


def _merge(old: dict[str, ActionState], new: dict[str, ActionState]) -> dict[str, ActionState]:
    """The states of two runs: an action this shard built keeps that state."""
    return {**new, **{aid: s for aid, s in old.items() if s.status != "cached" or aid not in new}}


# -- the split --------------------------------------------------------------------------------

def _unit_keys(job: ShardBuild, parts: FanOut) -> dict[str, ActionState]:
    """The units' leaders as a dry run sees them (their keys; whether they would run), the
    upstream being in this store now."""
    leaders = set(parts.units)
    peek = job.run(job.plan.closure(leaders), replace(job.options, dry_run=True, remote="peek"),
                   True)
    return {aid: peek[aid] for aid in leaders}


def _assignment(job: ShardBuild, parts: FanOut,
                leaders: dict[str, ActionState]) -> dict[str, int]:
    """Unit key -> its shard: decided by the first shard and published, else read from the
    remote (waiting for the first shard's)."""
    missing = [aid for aid, s in leaders.items() if not s.key]
    if missing:
        raise UserError(f"the key of {missing[0]} is not known after the upstream work",
                        hint="build without --shard once to see why")
    key = typed_digest(SCHEMA, VERSION, {"count": job.shard.count,
                                         "keys": sorted({s.key or "" for s in leaders.values()})})
    if job.shard.count == 1:  # all of it is this shard's
        return {s.key or "": 1 for s in leaders.values()}
    found = _read_assignment(job.store, key)
    if found is not None or job.shard.index != 1:
        return found if found is not None else _wait_for_assignment(job, key)
    timings = _read_doc(job.store, _timings_key(job.plan), "seconds") or {}
    split = split_units(job, parts, leaders, timings)
    _publish_doc(job.store, key, f"the split of {len(split)} keys", {"split": split})
    return split


def split_units(job: ShardBuild, parts: FanOut, leaders: dict[str, ActionState],
                timings: dict[str, Any] | None = None) -> dict[str, int]:
    """The units that would run, by key, to the shards: longest first, each to the shard with
    the least load so far (the lowest index on a tie); the same inputs, the same split. An
    action's seconds: its last build's in this store's history, else in `timings` (the
    remote's, by action id), else its kind's mean there, else KIND_SECONDS."""
    history = {aid: {"kind": job.plan.actions[aid].kind, "seconds": seconds}
               for aid, seconds in (timings or {}).items() if aid in job.plan.actions}
    history.update(job.history)
    weights: dict[str, float] = {}
    for leader, state in leaders.items():
        if state.would_run and state.key:
            weights[state.key] = max(weights.get(state.key, 0.0),
                                     sum(_seconds(job.plan, history, aid)
                                         for aid in parts.units[leader]))
    loads = [0.0] * job.shard.count
    split: dict[str, int] = {}
    for key, weight in sorted(weights.items(), key=lambda kw: (-kw[1], kw[0])):
        index = min(range(job.shard.count), key=lambda i: (loads[i], i))
        loads[index] += weight
        split[key] = index + 1
    return split


def _seconds(plan: Plan, history: dict[str, Any], aid: str) -> float:
    """How long an action took in its last build, else the mean of its kind there, else
    KIND_SECONDS."""
    kind = plan.actions[aid].kind
    last = history.get(aid, {})
    if isinstance(last.get("seconds"), (int, float)):
        return float(last["seconds"])
    same = [float(e["seconds"]) for e in history.values()
            if e.get("kind") == kind and isinstance(e.get("seconds"), (int, float))]
    return sum(same) / len(same) if same else KIND_SECONDS.get(kind, 1.0)


def _timings_key(plan: Plan) -> str:
    """Where the remote keeps the seconds of a recipe's actions (the gathering shard files
    them): by the recipe's name and its actions' ids, never by their keys (the next pipeline,
    whose keys differ, reads them)."""
    return typed_digest(SCHEMA + "/timings", VERSION, {"recipe": plan.recipe.name,
                                                       "actions": sorted(plan.actions)})


def _publish_timings(job: ShardBuild, states: dict[str, ActionState]) -> None:
    """The seconds each action took where it ran (a cached result keeps its builder's), for
    the next pipeline's split."""
    seconds = {aid: round(s.result.seconds, 3) for aid, s in states.items()
               if s.result is not None and s.result.seconds > 0}
    _publish_doc(job.store, _timings_key(job.plan), f"the seconds of {len(seconds)} actions",
                 {"seconds": dict(sorted(seconds.items()))})


def _publish_doc(store: Store, key: str, what: str, value: dict[str, Any]) -> None:
    """File a document of the shards (the split, the timings) under `key`, here and in the
    remote (not uploaded: one of this shard's unpublished results)."""
    from ..store.ac import ActionResult, Output, now

    ref = store.cas.put(canonical_json({"schema": SCHEMA, "version": VERSION, **value}))
    result = ActionResult(key, "shards", what, {"doc": Output(ref.digest, ref.size, "blob")},
                          created=now())
    store.ac.put(result)
    if store.remote is not None:
        store.remote.publish(result)


def _read_doc(store: Store, key: str, name: str) -> dict[str, Any] | None:
    """The mapping `name` of the document filed under `key`, locally or in the remote (then
    stored here), or None."""
    hit, _ = store.lookup(key)
    if hit is None and store.remote is not None:
        hit = store.remote.fetch(key)
    if hit is None or "doc" not in hit.outputs:
        return None
    try:
        doc = json.loads(store.cas.get(hit.outputs["doc"].digest) or b"")
        found = doc[name]
        if doc["schema"] == SCHEMA and isinstance(found, dict):
            return found
    except (ValueError, KeyError, TypeError):
        pass
    return None


def _read_assignment(store: Store, key: str) -> dict[str, int] | None:
    found = _read_doc(store, key, "split")
    if found is None or not all(isinstance(v, int) for v in found.values()):
        return None
    return {str(k): int(v) for k, v in found.items()}


def _wait_for_assignment(job: ShardBuild, key: str) -> dict[str, int]:
    deadline = time.monotonic() + job.wait
    told = False
    while True:
        time.sleep(SHARD_POLL)
        found = _read_assignment(job.store, key)
        if found is not None:
            return found
        if time.monotonic() >= deadline:
            raise UserError("the first shard's split of the work is not in the remote cache "
                            f"(waited {job.wait:g} s)",
                            hint="run every shard K/N with the same recipe and remote, shard 1 "
                                 "among them (--shard-wait SECONDS)")
        if not told:
            job.events.warning(Problem("waiting for the first shard's split of the work",
                                       file=str(job.plan.recipe.path)))
            told = True


# -- waiting for the other shards' work -------------------------------------------------------

def _wait(job: ShardBuild, part: Plan, own: set[str], what: str) -> None:
    """Wait until the remote holds every action of `part` but `own` (a dry run that peeks at
    the remote: only `own` would run); a UserError naming what is missing after the wait."""
    deadline = time.monotonic() + job.wait
    told = False
    while True:
        peek = job.run(part, replace(job.options, dry_run=True, remote="peek"), True)
        missing = sorted(aid for aid, s in peek.items() if s.would_run and aid not in own)
        if not missing:
            return
        if time.monotonic() >= deadline:
            shown = ", ".join(missing[:3]) + (f" (and {len(missing) - 3} more)"
                                              if len(missing) > 3 else "")
            raise UserError(f"{what} is not in the remote cache: {shown}",
                            hint="run every shard K/N with the same recipe and remote; the "
                                 "first builds the upstream, the last gathers the others' "
                                 "work (--shard-wait SECONDS)")
        if not told:
            job.events.warning(Problem(f"waiting for {what} in the remote cache "
                                       f"({len(missing)} actions)", file=str(part.recipe.path)))
            told = True
        time.sleep(SHARD_POLL)
