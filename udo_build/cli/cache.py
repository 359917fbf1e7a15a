"""`udo-build cache push | pull RECIPE [ACTION-ID ...]`: move a recipe's artifacts between the
local store and the remote cache.

Both resolve the recipe's action keys as a build would, running nothing: push goes through the
local store only and uploads every action built there (blobs first, the signed entry last);
pull looks each key up locally, then remotely, and stores what the remote has (verified), so
that the next build finds it; an action the remote lacks stops what depends on it.

Exit codes: 0 when the remote did what was asked (actions not built locally, or not in the
remote cache, are listed, not errors), 1 when uploads or downloads failed, 2 for a user error
(no remote configured; push without a signing key).
"""

from __future__ import annotations

import argparse
from typing import Any

from ..errors import display_path
from .build import add_store_arguments
from .remote import add_remote_arguments, open_remote, remote_summary
from .reporter import Reporter

SUMMARIES = {
    "push": "upload what the local store holds of a recipe's actions to the remote cache",
    "pull": "download a recipe's actions from the remote cache into the local store",
}


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="cache_command", metavar="SUBCOMMAND", required=True)
    for name, summary in SUMMARIES.items():
        cmd = sub.add_parser(name, parents=[common], help=summary, description=summary)
        cmd.add_argument("recipe", metavar="RECIPE", help="the recipe file (YAML)")
        cmd.add_argument("targets", metavar="ACTION-ID", nargs="*",
                         help="only these actions (and what they need); patterns work")
        add_store_arguments(cmd)
        add_remote_arguments(cmd, upload=False)


def run(args: argparse.Namespace, rep: Reporter) -> int:
    from ..store import Store, default_store_path

    push = args.cache_command == "push"
    store = Store(default_store_path(args.store), create=not push)
    try:
        with store.build_lock():
            recipe, rows = _transfer(store, args, rep, push)
            if push:  # its lookups are no build's hits or misses
                store.counters.local_hits = store.counters.local_misses = 0
            store.finish(build=False)
        remote = remote_summary(store)
    finally:
        store.close()
    assert remote is not None
    return _report(rep, args, recipe, store, rows, remote)


def _transfer(store: Any, args: argparse.Namespace, rep: Reporter,
              push: bool) -> tuple[Any, list[dict[str, Any]]]:
    """Resolve the keys (running nothing), then push or pull; a row per action."""
    from ..builder.engine import Engine, Options
    from ..builder.history import save_history
    from ..builder.plan import plan_recipe
    from ..errors import Diagnostics, UserError
    from ..recipe import load_recipe

    diag = Diagnostics()
    recipe = load_recipe(args.recipe, diag, checked=store.root / "checked")
    for warning in diag.warnings:
        rep.warning(warning)
    remote = open_remote(args, store, recipe.path.parent, rep, upload=push, need_upload=push)
    if remote is None:
        raise UserError("the remote cache cannot be read without trusted keys")
    full = plan_recipe(recipe)
    plan = full.select(args.targets) if args.targets else full
    options = Options(jobs=1, dry_run=True, remote="off" if push else "fetch")
    states = Engine(store, plan, options).run()
    if push:
        futures = {aid: remote.publish(st.result) for aid, st in states.items()
                   if st.result is not None}
        remote.wait()
        return recipe, [_row(states, st, True, futures.get(aid)) for aid, st in states.items()]
    save_history(store, recipe.path, recipe.name, states, list(full.actions))
    return recipe, [_row(states, st, False) for st in states.values()]


def _row(states: dict[str, Any], state: Any, push: bool, upload: Any = None
         ) -> dict[str, Any]:
    """An action's outcome: pushed | failed (push), pulled | local (pull), or missing."""
    row = {"id": state.id, "key": state.key}
    if state.result is not None:
        if push:
            return {**row, "status": "pushed" if upload and upload.result() else "failed"}
        return {**row, "status": "pulled" if state.origin == "remote" else "local"}
    missing = [d for d in state.action.deps if states[d].result is None]
    if missing:
        reason = f"needs {missing[0]}, which is missing"
    elif state.reason.startswith("would run"):
        reason = "not built in this store" if push else "not in the remote cache"
    else:
        reason = state.reason
    return {**row, "status": "missing", "reason": reason}


def _report(rep: Reporter, args: argparse.Namespace, recipe: Any, store: Any,
            rows: list[dict[str, Any]], remote: dict[str, Any]) -> int:
    push = args.cache_command == "push"
    counts: dict[str, int] = {}
    for row in rows:
        counts[row["status"]] = counts.get(row["status"], 0) + 1
    failed = counts.get("failed", 0) + (1 if remote["disabled"] or remote["errors"] else 0)
    if rep.mode == "json":
        rep.emit({"ok": not failed, "command": f"cache {args.cache_command}",
                  "recipe": recipe.name, "file": display_path(recipe.path),
                  "store": display_path(store.root), "remote": remote, "actions": rows,
                  "counts": counts})
        return 1 if failed else 0
    from .store import human_size

    if push:
        head = (f"pushed {counts.get('pushed', 0)} actions to {remote['url']} "
                f"({remote['blobs_uploaded']} blobs, {human_size(remote['bytes_uploaded'])} "
                f"uploaded)")
        left = [r for r in rows if r["status"] != "pushed"]  # missing or failed
    else:
        head = (f"pulled {counts.get('pulled', 0)} actions from {remote['url']} "
                f"({human_size(remote['bytes_downloaded'])}); {counts.get('local', 0)} were "
                "already here")
        left = [r for r in rows if r["status"] == "missing"]
    rep.heading(f"{recipe.name}: {head}")
    for row in left:
        rep.line(f"  {row['status']:9}  {row['id']}" + (f": {row['reason']}"
                                                        if row.get("reason") else ""))
    if left and not push:
        rep.line("  build them with 'udo-build RECIPE' (a CI build with --ci shares them)")
    return 1 if failed else 0
