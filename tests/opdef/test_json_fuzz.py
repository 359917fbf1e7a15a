"""Fuzzing the JSON UDO config loader: whatever the bytes, it returns packages or a UserError."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from udo_build.errors import Diagnostics, UserError
from udo_build.opdef.json_config import load_json_config

DATA = Path(__file__).parent / "data" / "json"
VALID = [json.loads((DATA / name).read_text()) for name in ("softmax.json", "conv.json")]
FUZZ = settings(max_examples=150, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

scalars = (st.none() | st.booleans() | st.integers() | st.floats()
           | st.text(max_size=12) | st.sampled_from(["FLOAT_32", "DSP", "v73", "NHWC", "A"]))
json_values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4)
    | st.dictionaries(st.text(max_size=10) | st.sampled_from(["type", "name", "inputs"]),
                      inner, max_size=4),
    max_leaves=20,
)


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("fuzz") / "ops.json"


def check(path: Path, data: bytes) -> None:
    """The property: packages that serialize, or a UserError whose problems name the file."""
    path.write_bytes(data)
    diag = Diagnostics()
    try:
        packages = load_json_config(path, diag)
    except UserError as exc:
        assert exc.problems
        assert all(p.message and p.file == str(path) for p in exc.problems)
        return
    for package in packages:
        assert package.source_format == "json"
        package.canonical_bytes()
    assert all(w.message and w.file == str(path) for w in diag.warnings)


def paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out += paths(item, (*prefix, key))
    elif isinstance(value, list):
        for i, item in enumerate(value):
            out += paths(item, (*prefix, i))
    return out


def mutate(doc: Any, path: tuple[Any, ...], action: str, new: Any) -> Any:
    """`doc` with the value at `path` dropped, replaced, or its key renamed."""
    if not path:
        return new
    parent = doc
    for part in path[:-1]:
        parent = parent[part]
    last = path[-1]
    if action == "drop":
        del parent[last]
    elif action == "rename" and isinstance(parent, dict):
        parent[str(new)] = parent.pop(last)
    elif action == "duplicate" and isinstance(parent, list):
        parent.append(copy.deepcopy(parent[last]))
    else:
        parent[last] = new
    return doc


@FUZZ
@given(json_values)
def test_random_json_values(target: Path, value: Any) -> None:
    check(target, json.dumps(value).encode())
    check(target, json.dumps({"UdoPackage_0": value}).encode())


@FUZZ
@given(st.data())
def test_mutations_of_a_valid_config(target: Path, data: st.DataObject) -> None:
    doc = copy.deepcopy(data.draw(st.sampled_from(VALID)))
    for _ in range(data.draw(st.integers(1, 4))):
        path = data.draw(st.sampled_from(paths(doc)))
        action = data.draw(st.sampled_from(["drop", "replace", "rename", "duplicate"]))
        new = data.draw(json_values | st.text(max_size=30))
        if action == "drop" and not path:
            continue
        doc = mutate(doc, path, action, new)
    check(target, json.dumps(doc, indent=data.draw(st.sampled_from([None, 1, 4]))).encode())


@FUZZ
@given(st.binary(max_size=300))
def test_random_bytes(target: Path, data: bytes) -> None:
    check(target, data)


@FUZZ
@given(st.sampled_from(VALID), st.integers(min_value=0), st.binary(min_size=1, max_size=8))
def test_spliced_bytes(target: Path, doc: Any, at: int, junk: bytes) -> None:
    text = json.dumps(doc, indent=2).encode()
    at %= len(text)
    check(target, text[:at] + junk + text[at:])
    check(target, text[:at] + text[at + len(junk):])
