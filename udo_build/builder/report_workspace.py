"""The report page of a workspace's build (several recipes as one graph, see
builder.workspace): one self-contained HTML file, `<out root>/<workspace name>.report.html`,
beside the recipes' output folders: the totals, a table of the recipes, then each recipe's
sections as a build of that recipe alone shows them (report_page.py) under its name, with
headings one level down and table ids of its own.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from .report_chart import escape
from .report_mixed import read_mixed
from .report_native import read_native
from .report_page import (
    SUFFIX,
    BuildReport,
    _summary,
    _table,
    document,
    facts_table,
    read_layers,
    read_runs,
    sections,
)
from .report_stages import read_stages


class WorkspaceReport(Protocol):
    """What the page reads of a workspace's build (builder.workspace.WorkspaceReport)."""

    @property
    def name(self) -> str: ...
    @property
    def total(self) -> BuildReport: ...
    @property
    def recipes(self) -> Sequence[BuildReport]: ...


def write_workspace_page(report: WorkspaceReport, root: Path) -> Path:
    """Write the page of a workspace's build in `root` (the folder of its recipes' output
    folders, beside them) as <workspace name>.report.html, atomically; its path."""
    from ..atomic import write_atomic

    path = root / f"{report.name}{SUFFIX}"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_atomic(path, render_workspace(report).encode("utf-8", "replace"), readonly=False,
                 durable=False)
    return path


def render_workspace(report: WorkspaceReport) -> str:
    """The whole page of a workspace's build: its summary, a table of the recipes, then each
    recipe's sections (as a build of that recipe alone shows them) under its name."""
    parts = []
    for n, part in enumerate(report.recipes):
        runs = read_runs(part, part.out)
        layers = read_layers(part.out)
        inner = sections(part, runs, layers, read_native(part.actions, part.out),
                          read_stages(part.out), read_mixed(part.out))
        parts.append(f"<section class=\"recipe\" id=\"recipe-{n}\"><h2>Recipe "
                     f"{escape(part.recipe)}</h2>" + facts_table(_partfacts_table(part))
                     + _scoped("".join(inner), n) + "</section>")
    return document(f"{report.name}: build report",
                     [_summary(report.total), _recipes(report.recipes), *parts])


def _recipes(parts: Sequence[BuildReport]) -> str:
    rows = []
    for n, part in enumerate(parts):
        c = part.counts
        rows.append([f"<a href=\"#recipe-{n}\">{escape(part.recipe)}</a>",
                     escape(str(part.file)), str(c["built"]), str(c["cached"]),
                     str(c["shared"]), str(c["failed"]), str(c["skipped"]),
                     escape("-" if part.out is None else str(part.out))])
    return "<section><h2>Recipes</h2>" + _table(
        f"{len(parts)} recipes in one build graph (an action key runs once: 'shared' counts "
        "the actions whose key an action of another recipe, or the same, ran)",
        ["recipe", "file", "built", "cached", "shared", "failed", "skipped", "outputs"],
        rows, "recipes") + "</section>"


def _partfacts_table(part: BuildReport) -> list[tuple[str, str]]:
    c = part.counts
    return [("recipe file", str(part.file)),
            ("outputs", "-" if part.out is None else str(part.out)),
            ("actions", f"{c['built']} built, {c['cached']} cached ({c['shared']} sharing a "
                        f"key built now), {c['failed']} failed, {c['skipped']} skipped")]


SCOPED = re.compile(r"<(/?)h2>| id=\"| href=\"#|url\(#")


def _scoped(html: str, n: int) -> str:
    """A recipe's sections inside a workspace's page: headings one level down, and the ids
    they declare and refer to made the recipe's own (`r<n>-...`). Only markup this module
    and its siblings write matches: every user string is escaped (no raw quote or '<')."""
    def scope(match: re.Match[str]) -> str:
        found = match.group(0)
        if found.startswith("<"):
            return f"<{match.group(1)}h3>"
        return f"{found}r{n}-"
    return SCOPED.sub(scope, html)
