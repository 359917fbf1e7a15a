"""`udo-build graph RECIPE [RECIPE ...] [--format dot|json] [--action PATTERN] [--out FILE]`:
the action graph of recipes planned as one (a workspace file works too) with each action's
kind, key and status (cached, would run and why, shared, not available yet), for people
(Graphviz dot) and CI dashboards (JSON). Nothing is built.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from .common import RawFormatter, add_store_arguments
from .reporter import Reporter

FORMATS = ("dot", "json")


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.formatter_class = RawFormatter
    parser.description = (
        "Print the action graph of one or more recipes (or a workspace file's): each action's\n"
        "kind, key and status (cached, would run and why, shared: the recipes are one graph,\n"
        "and another action with its key would run; not available yet), the outputs it reads\n"
        "from other actions and the project files it reads. A dry run: nothing is built.")
    parser.epilog = ("examples:\n"
                     "  udo-build graph recipes/softplus.yaml | dot -Tsvg > graph.svg\n"
                     "  udo-build graph recipes/softplus.yaml --format json --action 'run:*'")
    parser.add_argument("recipes", metavar="RECIPE", nargs="+",
                        help="recipe files (YAML), or a workspace file")
    parser.add_argument("--format", choices=FORMATS, default="dot",
                        help="dot (Graphviz, default) or json")
    parser.add_argument("--action", dest="actions", metavar="PATTERN", action="append",
                        default=[], help="only the actions matching this id pattern (shell "
                        "patterns, repeatable) and what they need")
    parser.add_argument("--out", metavar="FILE", type=Path,
                        help="write the graph to FILE (default: standard output)")
    add_store_arguments(parser)


def run(args: argparse.Namespace, rep: Reporter) -> int:
    import json

    from ..atomic import write_atomic
    from ..builder.graph import to_dot, to_json, workspace_graphs
    from ..recipe.workspace import checked_memo, list_recipes

    graphs = workspace_graphs(list_recipes(args.recipes, checked_memo(args.store)),
                              args.actions, args.store, rep)
    if rep.mode == "json" and args.out is None:
        rep.emit({"ok": True, **to_json(graphs)})
        return 0
    text = (to_dot(graphs) if args.format == "dot"
            else json.dumps(to_json(graphs), indent=1, ensure_ascii=False) + "\n")
    if args.out is None:
        rep.out.write(text)
        rep.out.flush()
        return 0
    write_atomic(args.out, text.encode(), readonly=False)
    counts = {}
    for graph in graphs:
        for action in graph.actions:
            counts[action.status] = counts.get(action.status, 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items()))
    if rep.mode == "json":
        rep.emit({"ok": True, "out": str(args.out), "statuses": counts})
    else:
        rep.line(f"wrote {args.out}: {sum(counts.values())} actions ({summary})")
    return 0
