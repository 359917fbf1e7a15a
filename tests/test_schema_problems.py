"""The shared JSON Schema error wording."""

from __future__ import annotations

from jsonschema import Draft202012Validator

from udo_build.schema_problems import JSON_WORDS, schema_problems
from udo_build.source import load_json, load_yaml


def explain(schema: dict, text: str, **kw: object) -> list[tuple[str | None, int | None, str,
                                                                   str | None]]:
    data, positions = load_yaml(text, "f.yaml")
    errors, warnings = schema_problems(Draft202012Validator(schema).iter_errors(data),
                                       positions, **kw)  # type: ignore[arg-type]
    return [(p.field, p.line, p.message, p.hint) for p in errors + warnings]


def test_any_of_reports_the_branch_that_fits_the_value() -> None:
    schema = {"type": "object", "properties": {"x": {"anyOf": [
        {"type": "string"},
        {"type": "object", "properties": {"y": {"enum": ["a", "b"]}}},
    ], "errorMessage": "a name or {y: a|b}"}}}
    data, positions = load_json(b'{"x":\n  {"y": "c"}}', "f.json")
    errors, warnings = schema_problems(Draft202012Validator(schema).iter_errors(data), positions,
                                       words=JSON_WORDS)
    assert [(p.message, p.field, p.line) for p in errors] == [("'c' is not one of a, b", "x.y", 2)]
    assert warnings == []
    assert explain(schema, "x: 3\n") == [("x", 1, "3 is not valid here", "a name or {y: a|b}")]


def test_a_wrong_type_hides_the_other_errors_of_that_value() -> None:
    schema = {"properties": {"n": {"type": "integer", "minimum": 3, "enum": [3, 4]}}}
    assert explain(schema, "n: x\n") == [
        ("n", 1, "expected a whole number, got 'x'", "write a whole number, without quotes")]


def test_unknown_fields_as_errors_or_warnings_with_did_you_mean() -> None:
    schema = {"type": "object", "additionalProperties": False,
              "properties": {"matrix": {}, "other": {}}}
    assert explain(schema, "matrx: 1\nzzz: 2\n") == [
        ("matrx", 1, "unknown field 'matrx'", "did you mean 'matrix'?"),
        ("zzz", 2, "unknown field 'zzz'", "allowed: matrix, other"),
    ]
    assert explain(schema, "zzz: 2\n", unknown_is_warning=True) == [
        ("zzz", 1, "unknown field 'zzz' ignored", "allowed: matrix, other")]


def test_long_titled_enums_are_named_and_short_ones_listed() -> None:
    values = [f"v{i}" for i in range(20)]
    schema = {"properties": {"d": {"enum": values, "title": "datatype",
                                   "errorMessage": "see the list"},
                             "e": {"enum": ["a", "b"], "title": "thing"}}}
    assert explain(schema, "d: x\ne: c\n") == [
        ("d", 1, "'x' is not a known datatype", "see the list"),
        ("e", 2, "'c' is not one of a, b", None),
    ]


def test_required_names_the_missing_field_with_a_hint() -> None:
    schema = {"properties": {"a": {"required": ["type", "name"]}}}
    assert explain(schema, "a:\n  name: x\n", hints={"required:type": "add type"}) == [
        ("a.type", 1, "missing required field 'type'", "add type")]
