"""quick_schema says a document passes only when jsonschema finds no error in it (the recipe and
workspace schemas, valid recipes and every mutation of them hypothesis tries); and it does say
so for the project's own recipes, so that a build of one does not import jsonschema."""

from __future__ import annotations

import copy
import math
import subprocess
import sys
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from udo_build.recipe import load, workspace
from udo_build.recipe.quick_schema import passes

ROOT = Path(__file__).resolve().parents[2]
RECIPES = {p.name: yaml.safe_load(p.read_text()) for p in sorted((ROOT / "recipes").glob("*.yaml"))}
SCHEMA = load._schema()
VALIDATOR = jsonschema.Draft202012Validator(SCHEMA)


def _errors(doc: Any, validator: Any = VALIDATOR) -> list[str]:
    return [e.message for e in validator.iter_errors(doc)]


@pytest.mark.parametrize("name", RECIPES)
def test_the_projects_recipes_pass(name: str) -> None:
    assert _errors(RECIPES[name]) == []
    assert passes(SCHEMA, RECIPES[name])


scalars = st.one_of(st.none(), st.booleans(), st.integers(-3, 40), st.floats(-2.5, 1e3),
                    st.sampled_from(["", "x", "sm8550", "int8", "HTP", "CPU", "tf", "1.0", "v73",
                                     "data/calib.txt", "logits"]),
                    st.lists(st.integers(0, 4), max_size=3))


def _paths(doc: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [at]
    if isinstance(doc, dict):
        for k, v in doc.items():
            found += _paths(v, (*at, k))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            found += _paths(v, (*at, i))
    return found


def _mutate(doc: Any, path: tuple[Any, ...], how: str, value: Any) -> Any:
    doc = copy.deepcopy(doc)
    if not path:
        return value
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if how == "delete":
        del parent[last]
    elif how == "replace":
        parent[last] = value
    elif how == "duplicate" and isinstance(parent, list):
        parent.append(copy.deepcopy(parent[last]))
    elif how == "add" and isinstance(parent[last], dict):
        parent[last]["x" if value is None else str(value)] = value
    elif how == "wrap":
        parent[last] = [parent[last]]
    return doc


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_a_mutated_recipe_passes_only_when_jsonschema_agrees(data: st.DataObject) -> None:
    doc = RECIPES[data.draw(st.sampled_from(sorted(RECIPES)))]
    for _ in range(data.draw(st.integers(1, 3))):
        path = data.draw(st.sampled_from(_paths(doc)))
        how = data.draw(st.sampled_from(["delete", "replace", "duplicate", "add", "wrap"]))
        doc = _mutate(doc, path, how, data.draw(scalars))
    if passes(SCHEMA, doc):
        assert _errors(doc) == [], doc


def test_a_workspace_passes_only_when_jsonschema_agrees() -> None:
    schema = workspace._schema()
    validator = jsonschema.Draft202012Validator(schema)
    for doc in ({"workspace": 1, "recipes": ["a.yaml"]}, {"workspace": 1, "recipes": []},
                {"workspace": 1, "name": "ci", "recipes": ["a.yaml", "b/*.yaml"]},
                {"workspace": 2, "recipes": ["a.yaml"]}, {"workspace": 1, "extra": 1},
                {"workspace": True, "recipes": ["a.yaml"]}):
        assert not passes(schema, doc) or _errors(doc, validator) == [], doc
    assert passes(schema, {"workspace": 1, "recipes": ["a.yaml"]})


def test_equality_is_jsonschemas() -> None:
    nan = math.nan
    cases: list[tuple[dict[str, Any], Any]] = [
        ({"enum": [1]}, True), ({"enum": [True]}, 1), ({"const": 1}, 1.0),
        ({"const": [1, {"a": 2}]}, [1.0, {"a": 2}]), ({"uniqueItems": True}, [1, True]),
        ({"uniqueItems": True}, [nan, nan]), ({"uniqueItems": True}, [[1], [1.0]]),
        ({"type": "integer"}, 2.0), ({"type": "integer"}, True), ({"minimum": 1}, True),
        ({"type": "number"}, False), ({"minLength": 2}, "é"), ({"pattern": "^a"}, "ba"),
    ]
    for schema, value in cases:
        valid = _errors(value, jsonschema.Draft202012Validator(schema)) == []
        assert passes(schema, value) == valid, (schema, value)
    same = [nan]
    assert not passes({"uniqueItems": True}, same * 2)  # one object twice: equal


def test_an_unknown_keyword_leaves_it_to_jsonschema() -> None:
    assert not passes({"type": "string", "format": "email"}, "a@b")
    assert not passes({"$ref": "#/$defs/x"}, 1)
    assert not passes({"oneOf": [{"type": "string"}]}, "a")


def test_a_valid_recipe_loads_without_jsonschema(tmp_path: Path) -> None:
    code = ("import sys; from udo_build.recipe import load_recipe; "
            f"load_recipe({str(ROOT / 'recipes' / 'squeezenet.yaml')!r}); "
            "print('jsonschema' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=tmp_path, check=True, env={"PYTHONPATH": str(ROOT)})
    assert out.stdout.strip() == "False"
