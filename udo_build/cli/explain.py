"""`udo-build explain RECIPE [ACTION-ID ...]`: why each action would run (or is up to date)."""

from __future__ import annotations

import argparse

from ..errors import Diagnostics
from .build import add_store_arguments
from .reporter import Reporter


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("recipe", metavar="RECIPE", help="the recipe file (YAML)")
    parser.add_argument("targets", metavar="ACTION-ID", nargs="*",
                        help="explain only these actions (patterns work)")
    add_store_arguments(parser)
    parser.add_argument("--all", action="store_true",
                        help="also list the actions that are up to date")


def run(args: argparse.Namespace, rep: Reporter) -> int:
    from ..builder.engine import Engine, Options
    from ..builder.explain import explain
    from ..builder.history import load_history
    from ..builder.plan import plan_recipe
    from ..recipe import load_recipe
    from ..store import Store, default_store_path

    store = Store(default_store_path(args.store))
    diag = Diagnostics()
    with store.build_lock():  # it reads (and may quarantine) like a build
        recipe = load_recipe(args.recipe, diag, checked=store.root / "checked")
        plan = plan_recipe(recipe)
        if args.targets:
            plan = plan.select(args.targets)
        states = Engine(store, plan, Options(dry_run=True)).run()
        found = explain(states, load_history(store, recipe.path))
    for warning in diag.warnings:
        rep.warning(warning)
    if rep.mode == "json":
        rep.emit({"ok": True, "recipe": recipe.name, "actions": [e.to_json() for e in found]})
        return 0
    shown = [e for e in found if args.all or args.targets or e.status == "would run"]
    for e in shown:
        rep.heading(f"{e.id}: {e.status}")
        for reason in e.reasons:
            rep.line(f"  - {reason}")
    counts = {s: sum(1 for e in found if e.status == s)
              for s in ("would run", "cached", "not available")}
    rep.line(f"{recipe.name}: {counts['would run']} would run, {counts['cached']} up to date, "
             f"{counts['not available']} not available yet")
    return 0
