"""`udo-build explain RECIPE [ACTION-ID ...]`: why each action would run (or is up to date)."""

from __future__ import annotations

import argparse

from .common import add_store_arguments
from .reporter import Reporter


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("recipe", metavar="RECIPE", help="the recipe file (YAML)")
    parser.add_argument("targets", metavar="ACTION-ID", nargs="*",
                        help="explain only these actions (patterns work)")
    add_store_arguments(parser)
    parser.add_argument("--all", action="store_true",
                        help="also list the actions that are up to date")


def run(args: argparse.Namespace, rep: Reporter) -> int:
    from ..builder.session import BuildRequest, explain_build

    report = explain_build(BuildRequest(args.recipe, tuple(args.targets), store=args.store), rep)
    found = report.explanations
    if rep.mode == "json":
        rep.emit({"ok": True, "recipe": report.recipe, "actions": [e.to_json() for e in found]})
        return 0
    shown = [e for e in found if args.all or args.targets or e.status == "would run"]
    for e in shown:
        rep.heading(f"{e.id}: {e.status}")
        for reason in e.reasons:
            rep.line(f"  - {reason}")
    counts = {s: sum(1 for e in found if e.status == s)
              for s in ("would run", "cached", "not available")}
    rep.line(f"{report.recipe}: {counts['would run']} would run, {counts['cached']} up to "
             f"date, {counts['not available']} not available yet")
    return 0
