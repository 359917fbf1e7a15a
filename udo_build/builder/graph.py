"""The action graph of recipes with what a build would do to each action: `udo-build graph`.

For each recipe: every planned action (id, kind, key, status: cached, would run (with why, as
`explain` says it), shared (another action of the graph has its key and would run: the recipes
are planned as one graph, as a workspace builds them) or not available yet), the actions it
reads outputs of (with the output's name) and the project files it reads. A dry run computes
it: nothing runs, nothing is written but the store's lock while it reads. Two renderings:

- `to_json`: {"recipes": [{"name", "path", "actions": [{"id", "kind", "key", "status",
  "reasons", "deps": [{"action", "output", "input"}], "sources": [{"input", "path"}]}]}]}, in
  the plan's dependency order (each action after everything it needs), files relative to the
  project folder;
- `to_dot`: a Graphviz digraph, one cluster per recipe, actions coloured by status, project files
  as notes, edges labelled with the output they carry, a dashed "same key" edge from the action
  that would run a key to each one sharing it (`dot -Tsvg graph.dot > graph.svg`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import display_path
from .plan import Dep, Source

if TYPE_CHECKING:
    from ..recipe.workspace import Listing

LISTED = re.compile(r"^(?P<list>.+)\.files\[\d+\]$")  # the files an input list names
STATUS_STYLE = {  # dot node attributes per status
    "cached": 'style=filled, fillcolor="#c8e6c9", color="#2e7d32"',
    "would run": 'style=filled, fillcolor="#ffe0b2", color="#e65100"',
    "not available": 'style="filled,dashed", fillcolor="#eeeeee", color="#757575"',
    "shared": 'style="filled,dashed", fillcolor="#e1bee7", color="#6a1b9a"',
}


@dataclass(frozen=True)
class GraphAction:
    id: str
    kind: str
    key: str | None
    status: str  # cached | would run | not available
    reasons: tuple[str, ...]
    deps: tuple[tuple[str, str, str], ...]  # (action, output, the input it feeds)
    sources: tuple[tuple[str, str], ...]  # (input, the file as shown to the user)

    def to_json(self) -> dict[str, Any]:
        return {"id": self.id, "kind": self.kind, "key": self.key, "status": self.status,
                "reasons": list(self.reasons),
                "deps": [{"action": a, "output": o, "input": i} for a, o, i in self.deps],
                "sources": [{"input": i, "path": p} for i, p in self.sources]}


@dataclass(frozen=True)
class RecipeGraph:
    name: str
    path: str
    actions: tuple[GraphAction, ...]


def recipe_graph(recipe: str, targets: Sequence[str], store: str | None,
                 events: Any) -> RecipeGraph:
    """The graph of one recipe (or of the actions matching `targets` and what they need)."""
    from ..recipe.workspace import Listing

    return workspace_graphs(Listing((Path(recipe),)), targets, store, events)[0]


def workspace_graphs(listing: Listing, targets: Sequence[str], store: str | None,
                     events: Any) -> list[RecipeGraph]:
    """The graphs of several recipes planned as one (a workspace: an action whose key an
    action of another recipe would run is `shared`), one per recipe, by its own ids."""
    from .session import BuildRequest, explained_workspace

    members, selected, explanations = explained_workspace(
        listing, BuildRequest(str(listing.recipes[0]), tuple(targets), store=store), events)
    found = {e.id: e for e in explanations}
    graphs = []
    for member in members:
        actions = []
        for aid, action in selected.actions.items():
            if not member.own(aid):
                continue
            why = found[aid]
            deps = tuple(sorted((member.local(i.action), i.output, name)
                                for name, i in action.inputs.items() if isinstance(i, Dep)))
            sources = tuple(sorted((name, _within(i.path, member.recipe.root))
                                   for name, i in action.inputs.items()
                                   if isinstance(i, Source)))
            actions.append(GraphAction(member.local(aid), action.kind, why.key, why.status,
                                       tuple(why.reasons), deps, sources))
        graphs.append(RecipeGraph(member.recipe.name, display_path(member.recipe.path),
                                  tuple(actions)))
    return graphs


def _within(path: Path, root: Path) -> str:
    """A project file as a path relative to the project folder (the same on every machine)."""
    try:
        return path.resolve().relative_to(root.resolve()).as_posix()
    except ValueError:
        return display_path(path)


def to_json(graphs: Sequence[RecipeGraph]) -> dict[str, Any]:
    return {"recipes": [{"name": g.name, "path": g.path,
                         "actions": [a.to_json() for a in g.actions]} for g in graphs]}


def to_dot(graphs: Sequence[RecipeGraph]) -> str:
    lines = ["digraph udo_build {", "  rankdir=LR;", '  node [shape=box, fontname="Helvetica"];',
             '  edge [fontname="Helvetica", fontsize=9];']
    for n, graph in enumerate(graphs):
        lines += [f"  subgraph cluster_{n} {{", f"    label={_q(f'{graph.name} ({graph.path})')};"]
        files: dict[str, str] = {}  # node id -> label
        for action in graph.actions:
            node = _q(f"{n}/{action.id}")
            label = action.id if action.kind == action.id else f"{action.id}\n{action.kind}"
            label += f"\n{action.key[:12]}" if action.key else ""
            lines.append(f"    {node} [label={_q(label)}, tooltip={_q('; '.join(action.reasons))}"
                         f", {STATUS_STYLE.get(action.status, '')}];")
            for file, name in _file_nodes(n, action, files):
                lines.append(f"    {_q(file)} -> {node} [label={_q(name)}, style=dotted];")
            for dep, output, name in action.deps:
                carried = output if output == name else f"{output} → {name}"
                lines.append(f"    {_q(f'{n}/{dep}')} -> {node} [label={_q(carried)}];")
        lines += [f"    {_q(node)} [label={_q(label)}, shape=note];"
                  for node, label in sorted(files.items())]
        lines.append("  }")
    lines += _same_keys(graphs)
    lines.append("}")
    return "\n".join(lines) + "\n"


def _same_keys(graphs: Sequence[RecipeGraph]) -> list[str]:
    """A dashed edge from the action that runs a key to each action sharing it."""
    runs: dict[str, str] = {}
    for n, graph in enumerate(graphs):
        for action in graph.actions:
            if action.key and action.status != "shared":
                runs.setdefault(action.key, f"{n}/{action.id}")
    return [f"  {_q(runs[a.key])} -> {_q(f'{n}/{a.id}')} [label=\"same key\", style=dashed, "
            "constraint=false];" for n, graph in enumerate(graphs) for a in graph.actions
            if a.status == "shared" and a.key in runs]


def _file_nodes(n: int, action: GraphAction, files: dict[str, str]) -> list[tuple[str, str]]:
    """(file node, input name) per project file an action reads; the files an input list names
    are one node (a calibration list names hundreds)."""
    edges: dict[str, str] = {}
    listed: dict[str, int] = {}
    for name, path in action.sources:
        match = LISTED.match(name)
        if match:
            listed[match["list"]] = listed.get(match["list"], 0) + 1
            continue
        files.setdefault(f"{n}:file:{path}", path)
        edges[f"{n}:file:{path}"] = name
    lists = {name: path for name, path in action.sources}
    for name, count in listed.items():
        node = f"{n}:listed:{lists.get(name, name)}"
        files.setdefault(node, f"{count} files named by {lists.get(name, name)}")
        edges[node] = f"{name}.files"
    return sorted(edges.items())


def _q(text: str) -> str:
    """A dot string: a JSON string is one (quotes and backslashes escaped; \\n a new line)."""
    return json.dumps(text, ensure_ascii=False)
