"""A workspace: several recipes built as one graph (`udo-build build ws.yaml`, or
`udo-build build A.yaml B.yaml`).

    workspace: 1
    name: ci                    # optional: names the report page (default: the file's stem)
    recipes:                    # relative to this file; shell patterns work
      - recipes/resnet50.yaml
      - recipes/variants/*.yaml

A workspace file is told from a recipe by its top-level `workspace:` field (a recipe has
`recipe:`). It is checked like a recipe: safe YAML with positions, the JSON Schema beside this
module, then the entries themselves (each a recipe file inside the project, none twice), every
problem at once with file, line and field. Nothing here reads the recipes: the session loads
them (see udo_build.builder.workspace).
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, NamedTuple

from ..errors import Problem, UserError, raise_if_any
from ..source import MAX_YAML_BYTES, Positions, decode_text, find_root, load_yaml, read_limited

WORKSPACE_VERSIONS = (1,)
SCHEMA_PATH = Path(__file__).with_name("workspace-1.schema.json")
HEAD = re.compile(rb"^(?:\{\s*)?[\"']?workspace[\"']?\s*:", re.M)  # a top-level field
PATTERN = re.compile(r"[*?\[]")  # an entry with these is a shell pattern


class Workspace(NamedTuple):
    """A loaded workspace file: its name and recipes."""

    path: Path  # the workspace file
    name: str  # its `name:`, else the file's stem
    recipes: tuple[Path, ...]  # in the order listed (a pattern's matches sorted)


class Listing(NamedTuple):
    """The recipes a command line names: recipe files, or a workspace file's (at most one
    workspace file, which may be given recipes besides)."""

    recipes: tuple[Path, ...]
    workspace: Workspace | None = None

    @property
    def combined(self) -> bool:
        """Built as a workspace (reports per recipe plus totals): a workspace file, or more
        than one recipe. One recipe alone builds and reports as it always has."""
        return self.workspace is not None or len(self.recipes) > 1

    @property
    def name(self) -> str:
        """The workspace's name (recipes given on the command line: 'workspace')."""
        return self.workspace.name if self.workspace is not None else "workspace"

    @property
    def folder(self) -> Path:
        """Where the build's settings are looked up (config files): the workspace file's
        folder, else the first recipe's."""
        first = self.workspace.path if self.workspace is not None else self.recipes[0]
        return first.absolute().parent


def checked_memo(store: str | None) -> Path | None:
    """The memo of checked files in the store at `store` (as the build opens it), when that
    store has one (a fresh store gets it from its first build)."""
    from ..store import default_store_path

    memo = default_store_path(store) / "checked"
    return memo if memo.is_dir() else None


def recipe_words(first: str, words: Sequence[str]) -> tuple[list[str], list[str]]:
    """(the recipe or workspace files, the action-id patterns) among a command's positional
    words after its first (a file): a file is a word ending .yaml or .yml, or naming a file
    (an action id never does)."""
    files = [first, *(w for w in words if _is_file(w))]
    return files, [w for w in words if not _is_file(w)]


def _is_file(word: str) -> bool:
    return Path(word).suffix.lower() in (".yaml", ".yml") or Path(word).is_file()


def is_workspace(path: str | Path) -> bool:
    """Whether the file is a workspace file (a top-level `workspace:` field) rather than a
    recipe; False for a file that cannot be read (loading it says why)."""
    try:
        raw = read_limited(path, MAX_YAML_BYTES, "recipe")
    except UserError:
        return False
    return HEAD.search(raw) is not None


def list_recipes(files: Sequence[str | Path], checked: Path | None = None) -> Listing:
    """The recipes `files` name (recipe or workspace files), in order; a recipe named twice is
    a user error. `checked`: the store's memo of files that passed their schema (see
    load.load_recipe), when it exists."""
    recipes: list[Path] = []
    workspace: Workspace | None = None
    seen: dict[Path, str] = {}
    for file in files:
        if is_workspace(file):
            if workspace is not None:
                raise UserError("more than one workspace file", file=str(file),
                                hint=f"build one workspace at a time ({workspace.path} is "
                                     "the first), or list these recipes in one")
            workspace = load_workspace(file, checked)
            found, where = list(workspace.recipes), f"listed by {file}"
        else:
            found, where = [Path(file)], "named on the command line"
        for path in found:
            resolved = path.resolve()
            if resolved in seen:
                both = f"{where} twice" if where == seen[resolved] \
                    else f"{where} and {seen[resolved]}"
                raise UserError(f"the recipe {path} is {both}", file=str(path),
                                hint="name each recipe once")
            seen[resolved] = where
            recipes.append(path)
    return Listing(tuple(recipes), workspace)


def load_workspace(path: str | Path, checked: Path | None = None) -> Workspace:
    """Load and check a workspace file; one UserError listing every problem found. With
    `checked` (as load_recipe's), a file that passed the schema before is read from there
    (neither yaml nor jsonschema imported); its entries are checked every time."""
    from .load import _recall, _remember, _schema_digest

    path = Path(path)
    file = str(path)
    raw = read_limited(path, MAX_YAML_BYTES, "workspace")
    memo = checked / f"{_schema_digest(raw, SCHEMA_PATH)}.json" if checked is not None else None
    found = _recall(memo, file) if memo is not None else None
    if found is None:
        data, positions = load_yaml(decode_text(raw, file), file)
        _check_version(data, positions)
        _check_schema(data, positions)
        if memo is not None:
            _remember(memo, data, positions)
    else:
        data, positions = found
    recipes = _Entries(path, positions).resolve(data["recipes"])
    return Workspace(path, data.get("name") or path.stem, tuple(recipes))


def _check_version(data: Any, positions: Positions) -> None:
    if not isinstance(data, dict):
        raise positions.error((), "a workspace is a mapping (workspace: 1, recipes: [...])")
    version = data.get("workspace")
    if version not in WORKSPACE_VERSIONS or isinstance(version, bool):
        raise positions.error(("workspace",), f"unsupported workspace format version "
                              f"{version!r}", "this udo-build reads workspace: "
                              + ", ".join(map(str, WORKSPACE_VERSIONS)))


@lru_cache(maxsize=1)
def _schema() -> Any:
    return json.loads(SCHEMA_PATH.read_text("utf-8"))


@lru_cache(maxsize=1)
def _validator() -> Any:
    import jsonschema

    return jsonschema.Draft202012Validator(_schema())


def _check_schema(data: dict[str, Any], positions: Positions) -> None:
    from .quick_schema import passes

    if passes(_schema(), data):  # nearly always (see quick_schema): no jsonschema
        return
    from ..schema_problems import schema_problems  # only for a file with problems

    problems, _ = schema_problems(_validator().iter_errors(data), positions)
    raise_if_any(problems)


class _Entries:
    """The `recipes:` entries of a workspace file as recipe files."""

    def __init__(self, path: Path, positions: Positions) -> None:
        self.path = path
        self.folder = path.absolute().parent
        self.root = find_root(self.folder.resolve())
        self.positions = positions
        self.problems: list[Problem] = []

    def error(self, i: int, message: str, hint: str | None = None) -> None:
        self.problems.append(self.positions.error(("recipes", i), message, hint).problem)

    def resolve(self, entries: list[str]) -> list[Path]:
        found: dict[Path, int] = {}  # resolved -> the entry that listed it first
        recipes: list[Path] = []
        for i, entry in enumerate(entries):
            for path in self._entry(i, entry):
                first = found.setdefault(path.resolve(), i)
                if first == i:
                    recipes.append(path)
                elif not PATTERN.search(entry):
                    self.error(i, f"'{entry}' is listed twice", f"the first is recipes[{first}]")
        raise_if_any(self.problems)
        return recipes

    def _entry(self, i: int, entry: str) -> list[Path]:
        """The recipe files of one entry (relative to the workspace file's folder)."""
        if Path(entry).is_absolute():
            self.error(i, f"'{entry}' is an absolute path",
                       "write it relative to the workspace file's folder")
            return []
        if not (self.folder / entry).resolve().is_relative_to(self.root) \
                and not PATTERN.search(entry):
            self.error(i, f"'{entry}' leads outside the project folder {self.root}",
                       "a workspace lists the recipes of its own project")
            return []
        if PATTERN.search(entry):
            return self._matches(i, entry)
        path = self.folder / entry
        if not path.is_file():
            self.error(i, f"recipe not found: '{entry}' (looked for {path.resolve()})"
                       if not path.exists() else f"'{entry}' is not a file")
            return []
        if is_workspace(path):
            self.error(i, f"'{entry}' is a workspace file", "a workspace lists recipes, not "
                       "other workspaces: list that workspace's recipes here")
            return []
        return [self.path.parent / entry]

    def _matches(self, i: int, entry: str) -> list[Path]:
        """The recipes a shell pattern matches, sorted (workspace files, such as this one, are
        left out)."""
        base = self.path.parent
        found = [base / p.relative_to(self.folder) for p in sorted(self.folder.glob(entry))
                 if p.is_file() and p.resolve().is_relative_to(self.root)
                 and not is_workspace(p)]
        if not found:
            self.error(i, f"the pattern '{entry}' matches no recipe",
                       f"patterns are relative to {self.folder}")
        return found
