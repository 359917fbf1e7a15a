"""Moving a recipe's artifacts between the local store and the remote cache, running nothing.

Both directions resolve the recipe's action keys as a build would: push goes through the local
store only and uploads every action built there (blobs first, the signed entry last, filed
under its chain key too, as a build's uploads are: see lookahead); pull looks
each key up locally, then remotely, and stores what the remote has (verified), so that the next
build finds it; an action the remote lacks stops what depends on it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UserError, display_path
from .session import BuildRequest, Events, load, opened_store, plan, run_plan
from .settings import RemoteSummary, open_remote, remote_summary

if TYPE_CHECKING:
    from concurrent.futures import Future

    from ..recipe import Recipe
    from ..store import Store
    from .engine import ActionState


@dataclass(frozen=True)
class Moved:
    """One action's outcome: pushed | failed (push), pulled | local (pull), or missing."""

    id: str
    key: str | None
    status: str
    reason: str | None = None  # why it is missing

    def to_json(self) -> dict[str, Any]:
        row = {"id": self.id, "key": self.key, "status": self.status}
        return row if self.reason is None else {**row, "reason": self.reason}


@dataclass(frozen=True)
class TransferReport:
    push: bool
    recipe: str  # its name
    file: Path
    store: Path
    remote: RemoteSummary
    actions: tuple[Moved, ...]

    @property
    def counts(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for row in self.actions:
            counts[row.status] = counts.get(row.status, 0) + 1
        return counts

    @property
    def ok(self) -> bool:
        """The remote did what was asked (missing actions are listed, not failures)."""
        return not (self.counts.get("failed") or self.remote.disabled or self.remote.errors)

    def to_json(self) -> dict[str, Any]:
        return {"ok": self.ok, "command": f"cache {'push' if self.push else 'pull'}",
                "recipe": self.recipe, "file": display_path(self.file),
                "store": display_path(self.store), "remote": self.remote.to_json(),
                "actions": [row.to_json() for row in self.actions], "counts": self.counts}


def transfer(request: BuildRequest, events: Events, *, push: bool) -> TransferReport:
    """Push the request's actions from the local store to the remote cache, or pull them."""
    with opened_store(request.store, create=not push) as store:
        with store.build_lock():
            recipe, rows = _transfer(store, request, events, push)
            if push:  # its lookups are no build's hits or misses
                store.counters.local_hits = store.counters.local_misses = 0
            store.finish(build=False)
        remote = remote_summary(store)
    assert remote is not None
    return TransferReport(push, recipe.name, recipe.path, store.root, remote, tuple(rows))


def _transfer(store: Store, request: BuildRequest, events: Events,
              push: bool) -> tuple[Recipe, list[Moved]]:
    """Resolve the keys (running nothing), then push or pull; a row per action."""
    from .engine import Options
    from .history import save_history

    recipe = load(store, request.recipe, events)
    remote = open_remote(store, recipe.path.parent, request.remote._replace(upload=push),
                         events.warning, need_upload=push)
    if remote is None:
        raise UserError("the remote cache cannot be read without trusted keys")
    full, selected = plan(recipe, request.targets)
    states = run_plan(store, selected, Options(jobs=1, dry_run=True,
                                               remote="off" if push else "fetch"))
    if push:  # filed under their chain keys too (see lookahead)
        from .lookahead import ChainKeys

        chain = ChainKeys(selected, lambda s: store.files.digest(s.path, kind=s.digest)[0])
        futures = {aid: remote.publish(st.result, chain.index(aid, st.result.key))
                   for aid, st in states.items() if st.result is not None}
        remote.wait()
        return recipe, [_moved(states, st, True, futures.get(aid)) for aid, st in states.items()]
    save_history(store, recipe.path, recipe.name, states, list(full.actions))
    return recipe, [_moved(states, st, False) for st in states.values()]


def _moved(states: dict[str, ActionState], state: ActionState, push: bool,
           upload: Future[bool] | None = None) -> Moved:
    if state.result is not None:
        if push:
            return Moved(state.id, state.key, "pushed" if upload and upload.result() else "failed")
        return Moved(state.id, state.key, "pulled" if state.origin == "remote" else "local")
    missing = [d for d in state.action.deps if states[d].result is None]
    if missing:
        reason = f"needs {missing[0]}, which is missing"
    elif state.would_run:
        reason = "not built in this store" if push else "not in the remote cache"
    else:
        reason = state.reason
    return Moved(state.id, state.key, "missing", reason)
