"""The last build of each recipe on a store: what every action id was keyed on and produced.

`explain` compares an action with its last build (which input digest, parameter or kind version
differs); `store gc` keeps everything a last build still references. One JSON file per recipe,
named by the recipe's absolute path, replaced atomically after each build.
"""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..atomic import write_atomic
from ..canonical import sha256_hex
from ..store import Store
from ..store.history import SCHEMA, VERSION, history_files, read_history
from .actions import get_kind
from .engine import ActionState


def history_path(store: Store, recipe_path: Path) -> Path:
    ident = sha256_hex(str(recipe_path.resolve()).encode())[:32]
    return store.history_dir() / f"{ident}.json"


def load_history(store: Store, recipe_path: Path) -> dict[str, Any]:
    """The actions of the recipe's last build by id ({} when there is none or it is unreadable)."""
    return _read(history_path(store, recipe_path)).get("actions", {})


def _read(path: Path) -> dict[str, Any]:
    return read_history(path)[0] or {}


def entry(state: ActionState) -> dict[str, Any]:
    kind = get_kind(state.action.kind)
    assert kind is not None and state.result is not None
    return {
        "kind": kind.name, "kind_version": kind.version, "key": state.key,
        "params": kind.key_params(state.action.params), "inputs": dict(state.inputs),
        "outputs": {n: o.to_json() for n, o in state.result.outputs.items()},
        "seconds": round(state.result.seconds, 3),  # how long it ran (shards balance by it)
        "built": time.time(),
    }


def save_history(store: Store, recipe_path: Path, name: str,
                 states: dict[str, ActionState], planned: list[str]) -> None:
    """Record this build: built and cached actions replace their entries; actions the recipe no
    longer plans are dropped; failed or skipped ones keep their last good entry."""
    path = history_path(store, recipe_path)
    old = _read(path).get("actions", {})
    actions = {aid: old[aid] for aid in planned if aid in old}
    for aid, state in states.items():
        if state.status in ("built", "cached") and state.result is not None:
            fresh = entry(state)
            last = actions.get(aid)
            if last is not None and {**last, "built": 0} == {**fresh, "built": 0}:
                continue  # unchanged since it was recorded
            actions[aid] = fresh
    if old == actions:  # a no-op build: nothing to record
        return
    doc = {"schema": SCHEMA, "version": VERSION, "recipe": str(recipe_path.resolve()),
           "name": name, "updated": time.time(), "actions": actions}
    write_atomic(path, json.dumps(doc, indent=1, sort_keys=True).encode(), readonly=False,
                 durable=False)


def all_histories(store: Store) -> Iterator[tuple[Path, dict[str, Any]]]:
    for path in history_files(store.root):
        doc = _read(path)
        if doc:
            yield path, doc
