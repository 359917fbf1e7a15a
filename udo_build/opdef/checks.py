"""Validation shared by both op config formats: the rules of the vendor documents.

- an op has at least one input and one output; its name is a C identifier (package sources
  are named after it);
- outputs cannot have a default;
- names are unique among an op's inputs, outputs and parameters (each list on its own);
- defaults parse as tensor, scalar, boolean or string, and fit the datatype and rank;
- enumeration values are numbered in order; the default may name a value or give its number.

Repeated inputs/outputs on DSP/HTP and BACKEND_SPECIFIC resolution are per backend: see
`model.resolve_backend`.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from typing import Any

from ..errors import Problem
from .model import Default, OpDef, Origin
from .vocab import BACKEND_SPECIFIC, FIXED_TYPES, FLOAT_TYPES, INTEGER_TYPES, rank_dims

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_INT = re.compile(r"[+-]?\d+\Z")
MAX_INT_DIGITS = 40
_FLOAT = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\Z")


class DefaultError(ValueError):
    """A default that does not parse or does not fit; the message is user-facing."""


def check_op(op: OpDef) -> list[Problem]:
    """Every vendor rule that holds for an op on its own, as problems (empty when valid)."""
    out: list[Problem] = []
    if not IDENTIFIER.match(op.name):
        out.append(op.origin.problem(
            f"op name '{op.name}' is not a valid identifier",
            hint="use letters, digits and _, not starting with a digit "
                 "(package sources are named after the op)",
        ))
    if not op.inputs:
        out.append(op.origin.problem(f"op {op.name} has no input",
                                     hint="an op needs at least one input"))
    if not op.outputs:
        out.append(op.origin.problem(f"op {op.name} has no output",
                                     hint="an op needs at least one output"))
    for t in op.outputs:
        if t.default is not None:
            out.append(t.origin.problem(
                f"op {op.name}, output '{t.name}': outputs cannot have a default",
                hint="remove the default", suffix=".Default",
            ))
    for kind, items in (("input", op.inputs), ("output", op.outputs), ("parameter", op.params)):
        seen: set[str] = set()
        for item in items:
            if item.name in seen:
                out.append(item.origin.problem(
                    f"op {op.name}: {kind} name '{item.name}' is given twice",
                    hint=f"each {kind} needs its own name",
                ))
            seen.add(item.name)
    return out


def check_enumeration(values: Sequence[str], datatypes: Sequence[str], rank: str,
                      origin: Origin, op: str, name: str) -> list[Problem]:
    out: list[Problem] = []
    concrete = [d for d in datatypes if d != BACKEND_SPECIFIC]
    if any(d not in INTEGER_TYPES for d in concrete):
        out.append(origin.problem(
            f"op {op}, parameter '{name}': an enumeration needs an integer datatype, "
            f"not {', '.join(concrete)}",
            hint="enumeration values are numbered 0, 1, 2, ... in order: use UINT_32",
        ))
    if rank != "SCALAR":
        out.append(origin.problem(
            f"op {op}, parameter '{name}': an enumeration must be a SCALAR, not {rank}"))
    seen: set[str] = set()
    for value in values:
        if not value:
            out.append(origin.problem(f"op {op}, parameter '{name}': an enumeration value "
                                      "is empty"))
        elif value in seen:
            out.append(origin.problem(
                f"op {op}, parameter '{name}': enumeration value '{value}' is given twice"))
        seen.add(value)
    return out


def parse_default(raw: Any, datatypes: Sequence[str], rank: str,
                  enumeration: Sequence[str] = (), *, real: bool | None = None) -> Default:
    """A Default from config text (XML) or a JSON value, checked against datatype and rank.

    Numbers are normalized to the datatype: floats where the default is a real value (`real`;
    by default, for float types: 1 and 1.0 are one default), else whole numbers within the
    range of an integer type. Which defaults are real is `rules.default_is_real`.
    """
    concrete = [d for d in datatypes if d != BACKEND_SPECIFIC]
    if real is None:
        real = bool(concrete) and all(d in FLOAT_TYPES for d in concrete)
    if enumeration:
        return _enum_default(raw, enumeration)
    if isinstance(raw, str):
        value = _from_text(raw.strip(), concrete)
    else:
        value = _from_json(raw)
    _fit(value, concrete, rank, real)
    if real and value.kind in ("scalar", "tensor"):
        value = Default(value.kind, _map(value.value, float))
    return value


def _map(value: Any, fn: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_map(v, fn) for v in value)
    return value if isinstance(value, bool) else fn(value)


def _enum_default(raw: Any, enumeration: Sequence[str]) -> Default:
    text = raw.strip() if isinstance(raw, str) else raw
    if isinstance(text, str) and text in enumeration:
        return Default("scalar", list(enumeration).index(text))
    if isinstance(text, str) and _INT.match(text):
        text = int(text)
    if isinstance(text, int) and not isinstance(text, bool) and 0 <= text < len(enumeration):
        return Default("scalar", text)
    raise DefaultError(
        f"default {raw!r} is not a value of the enumeration; allowed: "
        + ", ".join(f"{v} ({i})" for i, v in enumerate(enumeration))
    )


def _from_text(text: str, concrete: Sequence[str]) -> Default:
    if concrete and all(d == "STRING" for d in concrete):
        return Default("string", _unquote(text))
    if text.startswith("["):
        try:
            parsed = json.loads(text)
        except (ValueError, RecursionError):
            raise DefaultError(
                f"default '{text}' is not a valid tensor: write a bracketed list of numbers, "
                "like [1, 2, 3] or [[1, 2], [3, 4]]"
            ) from None
        return _from_json(parsed)
    lowered = text.lower()
    if lowered in ("true", "false"):
        return Default("boolean", lowered == "true")
    if concrete and all(d == "BOOL_8" for d in concrete) and text in ("0", "1"):
        return Default("boolean", text == "1")
    if _INT.match(text):
        if len(text.lstrip("+-")) > MAX_INT_DIGITS:
            raise DefaultError(f"default '{text[:20]}...' has more than {MAX_INT_DIGITS} digits")
        return Default("scalar", int(text))
    if _FLOAT.match(text):
        return _from_json(float(text))
    if lowered.lstrip("+-") in ("inf", "infinity", "nan"):
        raise DefaultError(f"default '{text}' is not finite; give a finite number")
    return Default("string", _unquote(text))


def _unquote(text: str) -> str:
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    return text


def _from_json(value: Any) -> Default:
    if isinstance(value, bool):
        return Default("boolean", value)
    if isinstance(value, (int, float)):
        if isinstance(value, float) and not math.isfinite(value):
            raise DefaultError(f"default {value} is not finite; give a finite number")
        return Default("scalar", value)
    if isinstance(value, str):
        return Default("string", value)
    if isinstance(value, list):
        return Default("tensor", _tensor(value))
    raise DefaultError(f"default {value!r} is not a tensor, number, boolean or string")


def _tensor(value: list[Any]) -> tuple[Any, ...]:
    """A rectangular nested tuple of finite numbers or booleans."""
    def shape_of(v: Any, depth: int) -> tuple[int, ...]:
        if depth > 8:
            raise DefaultError("a tensor default nests deeper than 8 levels")
        if isinstance(v, list):
            shapes = {shape_of(x, depth + 1) for x in v}
            if len(shapes) > 1:
                raise DefaultError("a tensor default must be rectangular: its rows differ "
                                   "in length")
            return (len(v), *(shapes.pop() if shapes else ()))
        if isinstance(v, bool) or (isinstance(v, (int, float)) and math.isfinite(v)):
            return ()
        raise DefaultError(f"a tensor default holds numbers or booleans, not {v!r}")

    shape_of(value, 0)

    def freeze(v: Any) -> Any:
        return tuple(freeze(x) for x in v) if isinstance(v, list) else v

    return freeze(value)


def _depth(value: Any) -> int:
    depth = 0
    while isinstance(value, tuple):
        depth += 1
        value = value[0] if value else None
    return depth


def _fit(default: Default, concrete: Sequence[str], rank: str, real: bool) -> None:
    dims = rank_dims(rank)
    if default.kind == "tensor":
        if dims == 0:
            raise DefaultError("a SCALAR takes a single value as default, not a tensor")
        if dims is not None and _depth(default.value) != dims:
            raise DefaultError(
                f"a {rank} default needs {dims} level(s) of brackets, this one has "
                f"{_depth(default.value)}"
            )
    if not concrete:
        return
    numeric = all(d in INTEGER_TYPES or d in FLOAT_TYPES or d in FIXED_TYPES for d in concrete)
    if default.kind == "string" and "STRING" not in concrete:
        raise DefaultError(f"default '{default.value}' is not a value of type "
                           f"{' or '.join(concrete)}")
    if default.kind == "boolean" and "BOOL_8" not in concrete and not numeric:
        raise DefaultError(f"a boolean default does not fit type {' or '.join(concrete)}")
    if not real and all(d in INTEGER_TYPES for d in concrete):
        for x in _flat(default.value):
            if isinstance(x, float):
                raise DefaultError(
                    f"default {x} is not a whole number, as type {' or '.join(concrete)} "
                    "needs")
            if isinstance(x, int) and not isinstance(x, bool) and not any(
                    _int_range(d)[0] <= x <= _int_range(d)[1] for d in concrete):
                low, high = _int_range(concrete[-1])
                raise DefaultError(f"default {x} is out of the range of type "
                                   f"{' or '.join(concrete)} ({low} to {high})")


def _flat(value: Any) -> list[Any]:
    if isinstance(value, tuple):
        return [x for v in value for x in _flat(v)]
    return [value]


def _int_range(datatype: str) -> tuple[int, int]:
    bits = int(datatype.rsplit("_", 1)[1])
    if datatype.startswith("UINT"):
        return 0, (1 << bits) - 1
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
