"""How the kinds read the inputs the plan gives them by convention: numbered inputs
(`config[i]`, `record[i]`), the recipe's kernels files (`kernels[i]`) and an input list."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..actions import ActionContext

if TYPE_CHECKING:
    from ...model.input_list import InputList


def numbered(ctx: ActionContext, prefix: str) -> list[str]:
    """The names `prefix[0]`, `prefix[1]`, ... of the action's inputs, in index order."""
    start = len(prefix) + 1
    return sorted((n for n in ctx.input_names() if n.startswith(f"{prefix}[")),
                  key=lambda n: int(n[start:-1]))


def kernel_files(ctx: ActionContext) -> list[Path]:
    """The recipe's numpy kernels files (the custom ops' implementations and rules)."""
    return [ctx.input_path(n) for n in ctx.input_names() if n.startswith("kernels[")]


def input_list(ctx: ActionContext) -> InputList:
    """The action's input list (`input_list`), read by the one parser the plan uses too; the
    files it names are its inputs `input_list.files[i]` (in the order of the list's entries),
    never the paths it names on the machine that planned the build. A list made from token
    sequences is the tree input `feeds` instead (udo_build.builder.kinds.sequences)."""
    from ...model.input_list import parse_input_list

    if "feeds" in ctx.input_names():  # made from token sequences (kinds/sequences.py)
        folder = ctx.input_tree("feeds")
        return parse_input_list(folder / "list.txt", root=folder)
    files = [ctx.input_path(n) for n in numbered(ctx, "input_list.files")]
    return parse_input_list(ctx.input_path("input_list"), files=files)
