"""Why an action would run: compared with its last build, what changed.

For each action of a recipe that is not cached: no entry for its key, and which input digest,
parameter or kind version differs from the last build of the same action id on this store (or
that it was never built here, or that its entry was removed). Inputs are named as keyed: the
members of a set (see `set_inputs` in builder.actions) by their rank among its digests. An
action whose key another action of the same build would run (two targets spelled alike, or
two recipes of a workspace over one model) is `shared`: it runs once, as the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..errors import display_path
from .actions import get_kind
from .engine import ActionState
from .plan import Source


@dataclass
class Explanation:
    id: str
    kind: str
    status: str  # cached | would run | shared | not available
    key: str | None
    reasons: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "status": self.status, "key": self.key,
                "reasons": self.reasons}


def explain(states: dict[str, ActionState], history: dict[str, Any]) -> list[Explanation]:
    """Explanations for the states of a dry run, against the recipe's last build."""
    return [_explain(state, history.get(aid)) for aid, state in states.items()]


def _explain(state: ActionState, last: dict[str, Any] | None) -> Explanation:
    action = state.action
    kind = get_kind(action.kind)
    if state.status == "cached":
        return Explanation(action.id, action.kind, "cached", state.key,
                           ["up to date: the cache holds its key"])
    if state.sharing and not state.would_run:  # another action of the build has its key
        return Explanation(action.id, action.kind, "shared", state.key,
                           [f"{state.reason}: one run serves both"])
    if kind is None or not state.would_run:
        return Explanation(action.id, action.kind, "not available", None, [state.reason])
    out = Explanation(action.id, action.kind, "would run", state.key)
    if state.key is None:
        out.reasons.append(state.reason)
    else:
        out.reasons.append(f"no cache entry for its key {state.key[:12]}")
    if last is None:
        out.reasons.append("never built from this recipe on this store")
        return out
    changes = _changes(state, kind.version, kind.key_params(action.params), last)
    if changes:
        out.reasons.extend(changes)
    elif state.key is not None and state.key == last.get("key"):
        out.reasons.append("same key as its last build, whose cache entry is gone "
                           "(removed by gc, or its outputs are missing)")
    return out


def _changes(state: ActionState, version: int, params: dict[str, Any],
             last: dict[str, Any]) -> list[str]:
    changes = []
    if last.get("kind_version") != version:
        changes.append(f"kind version {last.get('kind_version')} -> {version}")
    old_params = last.get("params") or {}
    for name in sorted(set(params) | set(old_params)):
        if params.get(name) != old_params.get(name):
            changes.append(f"parameter {name}: {_show(old_params.get(name))} -> "
                           f"{_show(params.get(name))}")
    old_inputs = last.get("inputs") or {}
    planned = state.names or {name: name for name in state.action.inputs}  # as keyed
    for name in sorted(set(planned) | set(old_inputs)):
        source = state.action.inputs.get(planned.get(name, ""))
        where = f" ({display_path(source.path)})" if isinstance(source, Source) else ""
        now = state.inputs.get(name)
        before = old_inputs.get(name)
        if source is None:
            changes.append(f"input {name} is gone")
        elif before is None:
            changes.append(f"input {name}{where} is new")
        elif now is None:
            upstream = source.action if not isinstance(source, Source) else "?"
            changes.append(f"input {name} comes from {upstream}, which would run first")
        elif now != before:
            changes.append(f"input {name}{where} changed: {before[:12]} -> {now[:12]}")
    return changes


def _show(value: Any) -> str:
    import json

    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= 60 else text[:57] + "..."
