"""JSON Schema errors as readable problems: one per mistake, with file, line, field and a fix.

jsonschema's own messages are Python reprs ("Additional properties are not allowed ('x' was
unexpected)"). Here each validator keyword has its own wording; a subschema may carry a `title`
(names what an enum holds: "'FLOAT_33' is not a known datatype") and an `errorMessage` (the hint:
what the field should hold); unknown fields get a did-you-mean; `anyOf` errors descend into the
branch that fits the value; a wrong type hides the other errors of the same value.

`Check` is the hand-written counterpart for files udo-build writes and reads back (bundles,
records): each check of a field's type or range fails with a UserError naming file and field.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from .errors import Problem, UserError
from .source import FieldPath, Positions, format_path

YAML_WORDS = {"object": "a mapping", "object_example": "write a mapping: {key: value}"}
JSON_WORDS = {"object": "an object", "object_example": "write a JSON object: {...}"}

MAX_LISTED = 12  # a titled enum longer than this is named, and its values go in the hint

_TYPE_NAMES = {
    "array": "a list", "string": "a string", "integer": "a whole number", "number": "a number",
    "boolean": "true or false", "null": "null",
}
_TYPE_HINTS = {
    "array": "write a list: [...]", "string": 'write a quoted string: "..."',
    "boolean": "write true or false, without quotes", "number": "write a number, without quotes",
    "integer": "write a whole number, without quotes",
}


def describe(value: Any, words: Mapping[str, str] = YAML_WORDS) -> str:
    """A short rendering of a value for messages: 'sm9999', 3, a list, ..."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, dict):
        return words["object"]
    if isinstance(value, list):
        return "a list"
    text = f"'{value}'" if isinstance(value, str) else json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def schema_problems(
    errors: Iterable[Any], positions: Positions, *, unknown_is_warning: bool = False,
    words: Mapping[str, str] = YAML_WORDS, hints: Mapping[str, str] | None = None,
) -> tuple[list[Problem], list[Problem]]:
    """(errors, warnings) for jsonschema ValidationErrors; unknown fields may be warnings.

    `hints` adds fixes by keyword and field name, e.g. {"required:type": "add \"type\": ..."}.
    """
    explainer = _Explainer(words, hints or {})
    found = [(e, x) for e in errors for x in explainer.explain(e)]
    typed = {path for e, (path, *_rest) in found if e.validator == "type"}
    problems: list[Problem] = []
    warnings: list[Problem] = []
    for error, (path, message, hint, at_key) in found:
        if path in typed and error.validator != "type":
            continue  # a wrong type explains everything else wrong with that value
        unknown = error.validator in ("additionalProperties", "unevaluatedProperties")
        if unknown and unknown_is_warning:
            message += " ignored"
        line, column = positions.of(path, key=at_key)
        problem = Problem(message, positions.file, line, column, format_path(path) or None, hint)
        (warnings if unknown and unknown_is_warning else problems).append(problem)
    return _ordered(problems), _ordered(warnings)


def _ordered(problems: list[Problem]) -> list[Problem]:
    return sorted(dict.fromkeys(problems), key=lambda p: (p.line or 0, p.column or 0))


Explained = tuple[FieldPath, str, "str | None", bool]


class _Explainer:
    def __init__(self, words: Mapping[str, str], hints: Mapping[str, str]) -> None:
        self.words = words
        self.hints = hints

    def explain(self, error: Any) -> list[Explained]:
        path: FieldPath = tuple(error.absolute_path)
        kind = error.validator
        schema = error.schema if isinstance(error.schema, dict) else {}
        custom = schema.get("errorMessage")
        if kind in ("anyOf", "oneOf"):
            branch = _matching_branch(error)
            if branch:
                return [x for sub in branch for x in self.explain(sub)]
            return [(path, f"{describe(error.instance, self.words)} is not valid here", custom,
                     False)]
        if kind in ("additionalProperties", "unevaluatedProperties"):
            fallback = self.hints.get(f"{kind}:{path[-1] if path else ''}")
            return _unknown_fields(error, path, fallback)
        if kind == "required":
            return [((*path, name), f"missing required field '{name}'",
                     self.hints.get(f"required:{name}"), True)
                    for name in error.validator_value
                    if isinstance(error.instance, dict) and name not in error.instance]
        at_key = "propertyNames" in error.absolute_schema_path
        if at_key:  # a bad key: point at the key itself
            path = (*path, error.instance)
        message, hint = self.message(error, schema)
        name = str(path[-1]) if path else ""
        return [(path, message, custom or self.hints.get(f"{kind}:{name}") or hint, at_key)]

    def message(self, error: Any, schema: dict[str, Any]) -> tuple[str, str | None]:
        kind, wanted, value = error.validator, error.validator_value, error.instance
        shown = describe(value, self.words)
        if kind == "enum":
            if "title" in schema and len(wanted) > MAX_LISTED:
                return f"{shown} is not a known {schema['title']}", None
            return f"{shown} is not one of {_listing(wanted)}", None
        if kind == "type":
            names = [wanted] if isinstance(wanted, str) else list(wanted)
            nouns = [self.words["object"] if n == "object" else _TYPE_NAMES.get(n, n)
                     for n in names]
            hint = (self.words["object_example"] if names == ["object"]
                    else _TYPE_HINTS.get(names[0]) if len(names) == 1 else None)
            either = nouns[0] if len(nouns) == 1 else f"{', '.join(nouns[:-1])} or {nouns[-1]}"
            return f"expected {either}, got {shown}", hint
        if kind == "minItems":
            plural = "" if wanted == 1 else "s"
            return f"expected at least {wanted} item{plural}, got {len(value) or 'none'}", None
        text = _SIMPLE.get(kind)
        if text is None:
            return str(error.message), None
        return text.format(shown=shown, wanted=wanted, duplicate=_duplicate(value, self.words),
                           count=len(value) if isinstance(value, (list, dict, str)) else 0), None


_SIMPLE = {
    "const": "{shown} is not allowed here",
    "maxItems": "has {count} items, at most {wanted} are allowed",
    "uniqueItems": "{duplicate} is listed twice",
    "minimum": "{shown} must be at least {wanted}",
    "maximum": "{shown} must be at most {wanted}",
    "exclusiveMinimum": "{shown} must be greater than {wanted}",
    "exclusiveMaximum": "{shown} must be less than {wanted}",
    "pattern": "{shown} is not valid here",
    "minLength": "must not be empty",
    "minProperties": "must not be empty",
}


def _listing(values: Iterable[Any]) -> str:
    return ", ".join(v if isinstance(v, str) else json.dumps(v) for v in values)


def _duplicate(value: Any, words: Mapping[str, str]) -> str:
    seen: list[Any] = []
    for item in value if isinstance(value, list) else []:
        if item in seen:
            return describe(item, words)
        seen.append(item)
    return "an item"


def _matching_branch(error: Any) -> list[Any]:
    """The sub-errors of the anyOf branch whose type fits the value, when there is one."""
    by_branch: dict[int, list[Any]] = {}
    for sub in error.context or ():
        by_branch.setdefault(sub.relative_schema_path[0], []).append(sub)
    fitting = [subs for subs in by_branch.values()
               if not any(s.validator in ("type", "const") and not s.relative_path
                          for s in subs)]
    return fitting[0] if len(fitting) == 1 else []


def _unknown_fields(error: Any, path: FieldPath, fallback: str | None) -> list[Explained]:
    known = list((error.schema.get("properties") or {}).keys())
    patterns = [re.compile(p) for p in (error.schema.get("patternProperties") or {})]
    instance = error.instance if isinstance(error.instance, dict) else {}
    out: list[Explained] = []
    for name in instance:
        if name in known or any(p.search(name) for p in patterns):
            continue
        close = difflib.get_close_matches(str(name), known, n=1, cutoff=0.6)
        if close:
            hint: str | None = f"did you mean '{close[0]}'?"
        else:
            hint = fallback or (f"allowed: {', '.join(known)}" if known else None)
        shown = name if len(name) <= 60 else name[:57] + "..."
        out.append(((*path, name), f"unknown field '{shown}'", hint, True))
    return out


class Check:
    """Type checks of a JSON document whose failures name the file and the field."""

    def __init__(self, file: str, what: str) -> None:
        self.file, self.what = file, what

    def fail(self, field: str, message: str) -> UserError:
        return UserError(f"{self.what}: {message}", file=self.file, field=field,
                         hint="the file is damaged or was not written by udo-build")

    def obj(self, value: Any, field: str) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.fail(field, f"expected an object, found {_kind(value)}")
        return value

    def seq(self, value: Any, field: str) -> list[Any]:
        if not isinstance(value, list):
            raise self.fail(field, f"expected a list, found {_kind(value)}")
        return value

    def text(self, value: Any, field: str) -> str:
        if not isinstance(value, str):
            raise self.fail(field, f"expected a string, found {_kind(value)}")
        return value

    def whole(self, value: Any, field: str, lo: int | None = None, hi: int | None = None) -> int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.fail(field, f"expected a whole number, found {_kind(value)}")
        if (lo is not None and value < lo) or (hi is not None and value > hi):
            bounds = [f"at least {lo}"] * (lo is not None) + [f"at most {hi}"] * (hi is not None)
            raise self.fail(field, f"{value} is out of range (expected {' and '.join(bounds)})")
        return value

    def wholes(self, value: Any, field: str, lo: int | None = None,
               hi: int | None = None) -> list[int]:
        return [self.whole(v, f"{field}[{i}]", lo, hi)
                for i, v in enumerate(self.seq(value, field))]

    def dtype(self, value: Any, field: str) -> Any:
        """A numeric numpy dtype (booleans, integers, floats, complex), by its name."""
        import numpy as np

        try:
            dtype = np.dtype(self.text(value, field))
        except TypeError:
            raise self.fail(field, f"{value!r} is not a numpy dtype") from None
        if dtype.kind not in "biufc":
            raise self.fail(field, f"{value!r} is not a dtype of tensors")
        return dtype


def _kind(value: Any) -> str:
    return {dict: "an object", list: "a list", str: "a string", bool: "a boolean",
            type(None): "null"}.get(type(value), type(value).__name__)
