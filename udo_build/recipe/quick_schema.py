"""Whether a document certainly passes a JSON Schema, decided without jsonschema.

A recipe that passes its schema (nearly always the case) is checked here, in well under a
millisecond and without importing jsonschema (tens of milliseconds: the first build of a fresh
checkout, or after an edit, pays them). The answer is True only when Draft 2020-12, as the
jsonschema package applies it, finds no error; for a document that fails, or a schema keyword
this module does not know, it says False, and jsonschema checks the document and reports every
problem as before. So a problem is never missed here: at worst jsonschema runs.

Known keywords: type, enum, const, properties, additionalProperties, required, minProperties,
maxProperties, items (one schema), minItems, maxItems, uniqueItems, minLength, maxLength,
pattern, minimum, maximum, exclusiveMinimum, exclusiveMaximum, anyOf, allOf, if/then/else, and
the annotations that assert nothing (title, description, $schema, $id, $comment, default,
examples, errorMessage: this project's messages, which jsonschema ignores too). Equality is
jsonschema's: a boolean is no number, 1 equals 1.0, lists and objects compare element-wise.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from functools import lru_cache
from typing import Any

ANNOTATIONS = frozenset({"title", "description", "$schema", "$id", "$comment", "default",
                         "examples", "errorMessage"})
TYPES: dict[str, Callable[[Any], bool]] = {
    "object": lambda v: isinstance(v, dict),
    "array": lambda v: isinstance(v, list),
    "string": lambda v: isinstance(v, str),
    "boolean": lambda v: isinstance(v, bool),
    "null": lambda v: v is None,
    "number": lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
    "integer": lambda v: (isinstance(v, int) and not isinstance(v, bool))
    or (isinstance(v, float) and v.is_integer()),
}


class _Unknown(Exception):
    """A keyword (or a keyword's form) this module does not decide: jsonschema must."""


def passes(schema: Any, instance: Any) -> bool:
    """True when `instance` certainly passes `schema` (Draft 2020-12); False when it fails or
    this module cannot tell (then ask jsonschema)."""
    try:
        return _valid(schema, instance)
    except _Unknown:
        return False


def _valid(schema: Any, value: Any) -> bool:
    if isinstance(schema, bool):
        return schema
    if not isinstance(schema, dict):
        raise _Unknown(schema)
    for keyword, arg in schema.items():
        if keyword in ANNOTATIONS or keyword in ("then", "else"):
            continue
        check = KEYWORDS.get(keyword)
        if check is None:
            raise _Unknown(keyword)
        if not check(arg, value, schema):
            return False
    return True


def _type(arg: Any, value: Any, _: dict[str, Any]) -> bool:
    names = arg if isinstance(arg, list) else [arg]
    if not all(isinstance(n, str) and n in TYPES for n in names):
        raise _Unknown(f"type {arg!r}")
    return any(TYPES[n](value) for n in names)


def equal(a: Any, b: Any) -> bool:
    """jsonschema's equality: booleans apart from numbers, containers element by element."""
    if a is b:
        return True
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if isinstance(a, str) or isinstance(b, str):
        return a == b
    if isinstance(a, list) or isinstance(b, list):
        return isinstance(a, list) and isinstance(b, list) and len(a) == len(b) \
            and all(equal(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, dict) or isinstance(b, dict):
        return isinstance(a, dict) and isinstance(b, dict) and a.keys() == b.keys() \
            and all(equal(a[k], b[k]) for k in a)
    return bool(a == b)


def _enum(arg: Any, value: Any, _: dict[str, Any]) -> bool:
    if not isinstance(arg, list):
        raise _Unknown("enum")
    return any(equal(value, choice) for choice in arg)


def _properties(arg: Any, value: Any, _: dict[str, Any]) -> bool:
    if not isinstance(arg, dict):
        raise _Unknown("properties")
    if not isinstance(value, dict):
        return True
    return all(_valid(arg[k], v) for k, v in value.items() if k in arg)


def _additional(arg: Any, value: Any, schema: dict[str, Any]) -> bool:
    if not isinstance(value, dict):
        return True
    if "patternProperties" in schema:
        raise _Unknown("patternProperties")
    known = schema.get("properties", {})
    extra = [v for k, v in value.items() if k not in known]
    return not extra if arg is False else all(_valid(arg, v) for v in extra)


def _items(arg: Any, value: Any, schema: dict[str, Any]) -> bool:
    if "prefixItems" in schema or not isinstance(arg, (dict, bool)):
        raise _Unknown("items")
    return not isinstance(value, list) or all(_valid(arg, v) for v in value)


def _unique(arg: Any, value: Any, _: dict[str, Any]) -> bool:
    if arg is not True or not isinstance(value, list):
        return True
    return not any(equal(value[i], value[j]) for i in range(len(value))
                   for j in range(i + 1, len(value)))


def _number(test: Callable[[Any, Any], bool]) -> Callable[[Any, Any, dict[str, Any]], bool]:
    def check(arg: Any, value: Any, _: dict[str, Any]) -> bool:
        if isinstance(arg, bool) or not isinstance(arg, (int, float)):
            raise _Unknown("a bound that is not a number")
        return not TYPES["number"](value) or test(value, arg)
    return check


def _size(kind: type, test: Callable[[int, Any], bool]
          ) -> Callable[[Any, Any, dict[str, Any]], bool]:
    def check(arg: Any, value: Any, _: dict[str, Any]) -> bool:
        if isinstance(arg, bool) or not isinstance(arg, int):
            raise _Unknown("a size that is not an integer")
        return not isinstance(value, kind) or test(len(value), arg)
    return check


@lru_cache(maxsize=256)
def _regex(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


def _pattern(arg: Any, value: Any, _: dict[str, Any]) -> bool:
    if not isinstance(arg, str):
        raise _Unknown("pattern")
    return not isinstance(value, str) or _regex(arg).search(value) is not None


def _if(arg: Any, value: Any, schema: dict[str, Any]) -> bool:
    branch = schema.get("then", True) if _valid(arg, value) else schema.get("else", True)
    return _valid(branch, value)


def _required(arg: Any, value: Any, _: dict[str, Any]) -> bool:
    if not isinstance(arg, list):
        raise _Unknown("required")
    return not isinstance(value, dict) or all(k in value for k in arg)


def _any(arg: Any, value: Any, _: dict[str, Any]) -> bool:
    if not isinstance(arg, list):
        raise _Unknown("anyOf")
    return any(_valid(s, value) for s in arg)


def _all(arg: Any, value: Any, _: dict[str, Any]) -> bool:
    if not isinstance(arg, list):
        raise _Unknown("allOf")
    return all(_valid(s, value) for s in arg)


KEYWORDS: dict[str, Callable[[Any, Any, dict[str, Any]], bool]] = {
    "type": _type,
    "enum": _enum,
    "const": lambda arg, value, _: equal(value, arg),
    "properties": _properties,
    "additionalProperties": _additional,
    "required": _required,
    "minProperties": _size(dict, lambda n, m: n >= m),
    "maxProperties": _size(dict, lambda n, m: n <= m),
    "items": _items,
    "minItems": _size(list, lambda n, m: n >= m),
    "maxItems": _size(list, lambda n, m: n <= m),
    "uniqueItems": _unique,
    "minLength": _size(str, lambda n, m: n >= m),
    "maxLength": _size(str, lambda n, m: n <= m),
    "pattern": _pattern,
    "minimum": _number(lambda v, m: v >= m),
    "maximum": _number(lambda v, m: v <= m),
    "exclusiveMinimum": _number(lambda v, m: v > m),
    "exclusiveMaximum": _number(lambda v, m: v < m),
    "anyOf": _any,
    "allOf": _all,
    "if": _if,
}
