"""The workspace file (`workspace: 1`, `recipes: [...]`): checked like a recipe, every problem
at once with file, line and field; told from a recipe by its `workspace:` field; what a command
line names (recipes and at most one workspace file) listed in order, none twice."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from udo_build.cli import main
from udo_build.errors import UserError
from udo_build.recipe.workspace import list_recipes, load_workspace, recipe_words

RECIPE = "recipe: 1\nname: {name}\n"


@pytest.fixture
def root(tmp_path: Path) -> Path:
    (tmp_path / ".udo-build-root").write_text("")
    (tmp_path / "recipes" / "more").mkdir(parents=True)
    for name in ("a", "b", "more/c"):
        (tmp_path / "recipes" / f"{name}.yaml").write_text(RECIPE.format(name=name[-1]))
    return tmp_path


def problems(path: Path) -> list[tuple[int | None, str | None, str]]:
    with pytest.raises(UserError) as caught:
        load_workspace(path)
    return [(p.line, p.field, p.message) for p in caught.value.problems]


def test_entries_are_relative_to_the_file_and_patterns_are_sorted(root: Path) -> None:
    ws = root / "ws.yaml"
    ws.write_text("workspace: 1\nrecipes:\n  - recipes/more/c.yaml\n  - recipes/*.yaml\n"
                  "  - 'recipes/**/*.yaml'\n")
    found = load_workspace(ws)
    assert found.name == "ws"  # no name: the file's stem
    assert [p.relative_to(root).as_posix() for p in found.recipes] == [
        "recipes/more/c.yaml", "recipes/a.yaml", "recipes/b.yaml"]  # a pattern's repeats: once


def test_schema_problems_name_line_and_field(root: Path) -> None:
    ws = root / "ws.yaml"
    ws.write_text("workspace: 1\nname: 'no spaces'\nrecipe: [a.yaml]\n")
    found = problems(ws)
    assert (3, "recipe", "unknown field 'recipe'") in [(line, f, m.split(" (")[0].split(";")[0])
                                                        for line, f, m in found]
    assert any(line == 2 and f == "name" for line, f, _ in found)
    assert any(f == "recipes" and "missing required field 'recipes'" in m for _, f, m in found)


def test_bad_entries_are_all_told_at_once(root: Path) -> None:
    (root / "other.yaml").write_text("workspace: 1\nrecipes: [recipes/a.yaml]\n")
    ws = root / "ws.yaml"
    ws.write_text("workspace: 1\nrecipes:\n  - recipes/a.yaml\n  - /abs/x.yaml\n"
                  "  - recipes/nope.yaml\n  - recipes/a.yaml\n  - other.yaml\n  - '*.yml'\n"
                  "  - ../outside.yaml\n")
    found = problems(ws)
    assert [(line, f) for line, f, _ in found] == [(n, f"recipes[{n - 3}]") for n in range(4, 10)]
    messages = [m for _, _, m in found]
    assert "absolute path" in messages[0] and "recipe not found" in messages[1]
    assert "listed twice" in messages[2] and "workspace file" in messages[3]
    assert "matches no recipe" in messages[4] and "outside the project" in messages[5]


def test_an_unknown_version_and_a_recipe_mistaken_for_a_workspace(root: Path) -> None:
    ws = root / "ws.yaml"
    ws.write_text("workspace: 2\nrecipes: [recipes/a.yaml]\n")
    assert problems(ws) == [(1, "workspace", "unsupported workspace format version 2")]
    err = io.StringIO()
    assert main(["validate", str(ws)], stdout=io.StringIO(), stderr=err, env={}) == 2
    assert "this is a workspace file, not a recipe" in err.getvalue()


def test_the_command_line_lists_recipes_once_and_one_workspace(root: Path) -> None:
    ws = root / "ws.yaml"
    ws.write_text("workspace: 1\nname: ci\nrecipes: [recipes/a.yaml]\n")
    files, patterns = recipe_words(str(ws), [str(root / "recipes/b.yaml"), "convert",
                                             "prepare:sm8550/*", "x.YML"])
    assert (files, patterns) == ([str(ws), str(root / "recipes/b.yaml"), "x.YML"],
                                 ["convert", "prepare:sm8550/*"])
    listing = list_recipes(files[:2])
    assert listing.combined and listing.name == "ci" and len(listing.recipes) == 2
    alone = list_recipes([str(root / "recipes/a.yaml")])
    assert not alone.combined and alone.name == "workspace"
    with pytest.raises(UserError, match="is named on the command line and listed by .*ws.yaml"):
        list_recipes([str(ws), str(root / "recipes" / ".." / "recipes" / "a.yaml")])
    with pytest.raises(UserError, match="a.yaml is named on the command line twice"):
        list_recipes([str(root / "recipes/a.yaml"), str(root / "recipes/./a.yaml")])
    with pytest.raises(UserError, match="more than one workspace file"):
        list_recipes([str(ws), str(ws)])


def test_a_workspace_file_that_passed_its_schema_is_read_from_the_store_s_memo(
        root: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    ws = root / "ws.yaml"
    ws.write_text("workspace: 1\nrecipes: [recipes/a.yaml]\n")
    checked = root / "store" / "checked"
    first = load_workspace(ws, checked)
    assert len(list(checked.iterdir())) == 1

    def no_yaml(*_: object) -> None:
        raise AssertionError("parsed again")
    monkeypatch.setattr("udo_build.recipe.workspace.load_yaml", no_yaml)
    assert load_workspace(ws, checked) == first  # no YAML parsing, no schema: the memo
    (root / "recipes" / "a.yaml").unlink()  # its entries are checked every time
    assert [m for _, _, m in problems_in(ws, checked)] == [
        f"recipe not found: 'recipes/a.yaml' (looked for {root.resolve()}/recipes/a.yaml)"]


def problems_in(path: Path, checked: Path) -> list[tuple[int | None, str | None, str]]:
    with pytest.raises(UserError) as caught:
        load_workspace(path, checked)
    return [(p.line, p.field, p.message) for p in caught.value.problems]
