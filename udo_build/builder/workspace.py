"""Several recipes as one build graph (a workspace; see udo_build.recipe.workspace).

Each recipe is planned as it would be alone; its action ids get its name in front
(`<name>/convert`) and the plans are merged into one. The engine runs an action key once per
build, so actions with equal keys in several recipes (two recipes over the same model and ops:
opdef, packages, convert, quantize) run once, and the others are cached with the reason naming
the one that ran. `--shard K/N` splits the merged plan (the union of every recipe's actions).
Afterwards each recipe gets its own part back under its own ids: its output folder, its
history (what `explain` compares against), its report; the workspace's report adds the totals.

A recipe alone (one file, no workspace file) has no prefix: its plan, ids and report are
exactly those of a build of that recipe.
"""

from __future__ import annotations

import fnmatch
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from ..errors import UserError, display_path
from .plan import Dep, Plan

if TYPE_CHECKING:
    from ..recipe import Recipe
    from ..recipe.workspace import Listing
    from ..store import Store
    from .engine import ActionState

SEPARATOR = "/"  # between a recipe's name and its action ids (a name holds no '/')


class Member(NamedTuple):
    """One recipe of a build."""

    recipe: Recipe
    prefix: str  # "" for a recipe alone, else "<name>/"
    out: Path  # its output folder

    def own(self, aid: str) -> bool:
        return aid.startswith(self.prefix)

    def local(self, aid: str) -> str:
        """An action id of the merged plan as the recipe's own."""
        return aid[len(self.prefix):]

    def states(self, states: dict[str, ActionState]) -> dict[str, ActionState]:
        """Its actions' states, by the merged plan's ids."""
        return {aid: s for aid, s in states.items() if self.own(aid)}


def members(recipes: list[Recipe], out: str | None, combined: bool) -> list[Member]:
    """The recipes with their prefixes and output folders: alone, `out` (default
    ./out/<name>); in a workspace, each its <name> under `out` (default ./out). Two recipes
    with one name (so one output folder and one set of ids) are a user error naming both."""
    if not combined:
        (recipe,) = recipes
        return [Member(recipe, "", Path(out) if out else Path("out") / recipe.name)]
    root = Path(out) if out else Path("out")
    found = [Member(r, r.name + SEPARATOR, root / r.name) for r in recipes]
    by_out: dict[Path, Member] = {}
    for member in found:
        other = by_out.setdefault(member.out.absolute(), member)
        if other is not member:
            raise UserError(
                f"the recipes {display_path(other.recipe.path)} and "
                f"{display_path(member.recipe.path)} are both named '{member.recipe.name}': "
                f"both would publish to {display_path(member.out)}",
                file=str(member.recipe.path), line=_name_line(member.recipe), field="name",
                hint="give each recipe of a workspace its own name")
    return found


def _name_line(recipe: Recipe) -> int | None:
    return None if recipe.positions is None else recipe.positions.of(("name",))[0]


def merged_plan(members: list[Member], targets: tuple[str, ...]) -> tuple[Plan, Plan]:
    """(the whole merged plan, the part `targets` select: all of it without targets). In a
    workspace a pattern matches an action's id in the workspace (`a/convert`) or in its
    recipe (`convert`: in every recipe)."""
    from .plan import plan_recipe

    if len(members) == 1 and not members[0].prefix:
        full = plan_recipe(members[0].recipe)
        return full, full.select(list(targets)) if targets else full
    full = Plan(members[0].recipe)  # shards name its file in messages
    for member in members:
        for aid, action in plan_recipe(member.recipe).actions.items():
            inputs = {name: Dep(member.prefix + i.action, i.output) if isinstance(i, Dep) else i
                      for name, i in action.inputs.items()}
            full.add(replace(action, id=member.prefix + aid, inputs=inputs))
    if not targets:
        return full, full
    chosen: set[str] = set()
    for pattern in targets:
        hits = [aid for aid in full.actions if fnmatch.fnmatchcase(aid, pattern)
                or fnmatch.fnmatchcase(aid.partition(SEPARATOR)[2], pattern)]
        if not hits:
            raise UserError(f"no action matches '{pattern}'",
                            hint="a pattern matches ids in the workspace (recipe/action) or "
                                 "in each recipe (action), e.g. 'convert' or "
                                 f"'{members[0].prefix}prepare:*'")
        chosen.update(hits)
    return full, full.closure(chosen)


def merged_history(store: Store, members: list[Member]) -> dict[str, Any]:
    """The recipes' last builds on this store, by the merged plan's ids."""
    from .history import load_history

    return {m.prefix + aid: entry for m in members
            for aid, entry in load_history(store, m.recipe.path).items()}


def save_histories(store: Store, members: list[Member], states: dict[str, ActionState],
                   full: Plan) -> None:
    """Each recipe's part of the build as its own history, by its own ids (so `explain` of
    the recipe alone compares against this build)."""
    from .history import save_history

    for m in members:
        mine = {m.local(aid): s for aid, s in m.states(states).items()}
        save_history(store, m.recipe.path, m.recipe.name, mine,
                     [m.local(aid) for aid in full.actions if m.own(aid)])


class BuildReport(Protocol):
    """What a workspace's report reads of a build's (session.BuildReport, whose module
    imports this one)."""

    @property
    def dry_run(self) -> bool: ...
    @property
    def stale(self) -> int: ...
    @property
    def unpublished(self) -> int: ...
    @property
    def exit_code(self) -> int: ...
    @property
    def out(self) -> Path | None: ...
    @property
    def actions(self) -> tuple[Any, ...]: ...
    def to_json(self) -> dict[str, Any]: ...
    def _replace(self, **changes: Any) -> Any: ...


class WorkspaceReport(NamedTuple):
    """A finished build of several recipes: the whole (every action, by the workspace's ids)
    and each recipe's part (by its own ids)."""

    name: str
    file: Path | None  # the workspace file (None: recipes named on the command line)
    total: BuildReport
    recipes: tuple[BuildReport, ...]

    @property
    def dry_run(self) -> bool:
        return self.total.dry_run

    @property
    def stale(self) -> int:
        return self.total.stale

    @property
    def unpublished(self) -> int:
        return self.total.unpublished

    @property
    def exit_code(self) -> int:
        return self.total.exit_code

    def to_json(self) -> dict[str, Any]:
        whole = self.total.to_json()
        totals = {k: whole[k] for k in ("executed", "cached", "failed", "skipped", "shared",
                                        "would_run", "hit_rate") if k in whole}
        return {"ok": whole["ok"], "workspace": self.name,
                "file": None if self.file is None else display_path(self.file),
                "store": whole["store"], "out": whole["out"], "dry_run": whole["dry_run"],
                "recipes": [r.to_json() for r in self.recipes],
                "totals": {"actions": len(self.total.actions), **totals},
                **{k: whole[k] for k in ("seconds", "remote", "shard", "where", "unpublished",
                                         "page")}}


def workspace_report(listing: Listing, members: list[Member], total: BuildReport,
                     root: Path) -> WorkspaceReport:
    """The report of a workspace build from its whole (`total`: every action), split by
    recipe; the output folders' root `root` is the whole's `out`."""
    parts = []
    for m in members:
        outcomes = tuple(a._replace(id=m.local(a.id)) for a in total.actions if m.own(a.id))
        parts.append(total._replace(recipe=m.recipe.name, file=m.recipe.path, actions=outcomes,
                                    out=None if total.out is None else m.out, remote=None,
                                    unpublished=0))
    whole = total._replace(recipe=listing.name, out=None if total.out is None else root,
                           file=listing.workspace.path if listing.workspace else
                           members[0].recipe.path)
    return WorkspaceReport(listing.name, listing.workspace.path if listing.workspace else None,
                           whole, tuple(parts))
