"""`udo-build explain RECIPE [RECIPE ...] [ACTION-ID ...]`: why each action would run (or is up to
date). Several recipes (or a workspace file) are explained as the one graph a build of them runs:
an action whose key another would run is `shared`."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import TYPE_CHECKING

from .common import add_store_arguments
from .reporter import Reporter

if TYPE_CHECKING:
    from ..builder.explain import Explanation
    from ..recipe.workspace import Listing


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("recipe", metavar="RECIPE", help="a recipe file (YAML), or a workspace "
                        "file; more may follow (words ending .yaml or .yml, or naming a file)")
    parser.add_argument("targets", metavar="RECIPE|ACTION-ID", nargs="*",
                        help="more recipe files (explained with the first as one graph), and "
                             "action ids: explain only these actions (patterns work)")
    add_store_arguments(parser)
    parser.add_argument("--all", action="store_true",
                        help="also list the actions that are up to date")


def run(args: argparse.Namespace, rep: Reporter) -> int:
    from ..builder.session import BuildRequest, explain_build
    from ..recipe.workspace import checked_memo, list_recipes, recipe_words

    files, targets = recipe_words(args.recipe, args.targets)
    listing = list_recipes(files, checked_memo(args.store))
    if listing.combined:
        return _workspace(args, rep, listing, tuple(targets))
    report = explain_build(BuildRequest(args.recipe, tuple(targets), store=args.store), rep)
    found = report.explanations
    if rep.mode == "json":
        rep.emit({"ok": True, "recipe": report.recipe, "actions": [e.to_json() for e in found]})
        return 0
    _print(rep, found, args.all or bool(targets))
    rep.line(f"{report.recipe}: {_counts(found)}")
    return 0


def _workspace(args: argparse.Namespace, rep: Reporter, listing: Listing,
               targets: tuple[str, ...]) -> int:
    """Several recipes as one graph: the explanations by the workspace's ids, counts per
    recipe and in total; JSON: {"recipes": [{"recipe", "file", "actions"}], "totals"}."""
    from ..builder.session import BuildRequest, explained_workspace
    from ..errors import display_path

    members, _, found = explained_workspace(
        listing, BuildRequest(args.recipe, targets, store=args.store), rep)
    parts = [(m, [e for e in found if m.own(e.id)]) for m in members]
    if rep.mode == "json":
        rep.emit({"ok": True, "workspace": listing.name, "recipes": [
            {"recipe": m.recipe.name, "file": display_path(m.recipe.path),
             "actions": [{**e.to_json(), "id": m.local(e.id)} for e in mine]}
            for m, mine in parts], "totals": _tally(found)})
        return 0
    _print(rep, found, args.all or bool(targets))
    for member, mine in parts:
        rep.line(f"{member.recipe.name}: {_counts(mine)}")
    rep.line(f"{listing.name} ({len(members)} recipes): {_counts(found)}")
    return 0


def _print(rep: Reporter, found: Sequence[Explanation], every: bool) -> None:
    for e in found:
        if every or e.status == "would run":
            rep.heading(f"{e.id}: {e.status}")
            for reason in e.reasons:
                rep.line(f"  - {reason}")


def _tally(found: Sequence[Explanation]) -> dict[str, int]:
    return {s: sum(1 for e in found if e.status == s)
            for s in ("would run", "cached", "shared", "not available")}


def _counts(found: Sequence[Explanation]) -> str:
    counts = _tally(found)
    shared = (f", {counts['shared']} sharing the key of one that would run"
              if counts["shared"] else "")
    return (f"{counts['would run']} would run, {counts['cached']} up to date{shared}, "
            f"{counts['not available']} not available yet")
