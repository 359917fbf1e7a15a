"""The standard nodes of a bundle someone hands us, checked against ONNX's own op schemas.

A bundle that udo-build converted holds only nodes `onnx.checker` passed; a bundle from a file
may hold anything that parses. Before such a bundle runs, is prepared or exported, every node of
the default package must be an op of the ONNX opset the bundle is at (TARGET_OPSET; an op new
since, at its latest version), with an input and output count its schema allows and attributes
its schema (or its latest version's) names, of their type:
otherwise a kernel would fail on it as if udo-build had a bug. The schemas are data (onnx.defs);
nothing here is written per op.

    bundle = load_checked_bundle(path)     # a UserError names the node and what is wrong
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..ir.bundle import Bundle, load_bundle
from ..ir.graph import DEFAULT_PACKAGE, Node
from .onnx_import import TARGET_OPSET


def load_checked_bundle(path: str | Path) -> Bundle:
    """The bundle at `path`, read and verified, its standard nodes checked (see above)."""
    bundle = load_bundle(path)
    check_standard_ops(bundle, str(path))
    return bundle


def check_standard_ops(bundle: Bundle, file: str) -> None:
    for i, node in enumerate(bundle.model.graph.nodes):
        if node.package == DEFAULT_PACKAGE:
            why = _problem(node)
            if why:
                raise UserError(f"node {node.name!r} ({node.op}): {why}", file=file,
                                field=f"graph.json.nodes[{i}]",
                                hint="the bundle is damaged or was not written by udo-build; "
                                     "convert the model again")


def _problem(node: Node) -> str:
    from onnx import defs

    try:  # an op new after TARGET_OPSET: its latest version; an attribute of a later version
        latest = defs.get_schema(node.op, "")  # is one its kernel takes (interface.py)
    except defs.SchemaError:
        return f"{node.op} is not an op of ONNX opset {TARGET_OPSET} or later"
    try:
        schema = defs.get_schema(node.op, TARGET_OPSET, "")
    except defs.SchemaError:
        schema = latest
    inputs = len(node.inputs)
    while inputs and not node.inputs[inputs - 1]:
        inputs -= 1  # omitted trailing optional inputs
    if not schema.min_input <= inputs <= schema.max_input:
        return (f"{inputs} inputs, where {node.op} takes {schema.min_input} to "
                f"{schema.max_input}")
    if not schema.min_output <= len(node.outputs) <= schema.max_output:
        return (f"{len(node.outputs)} outputs, where {node.op} makes {schema.min_output} to "
                f"{schema.max_output}")
    for name, value in node.kwargs.items():
        attribute = schema.attributes.get(name) or latest.attributes.get(name)
        if attribute is None:
            return f"{node.op} has no attribute {name!r}"
        check = _TYPES.get(attribute.type.name)
        if check is not None and not check[0](value):
            return f"attribute {name!r} must be {check[1]}, not {value!r:.60}"
    return ""


def _number(v: Any) -> bool:
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _integer(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _list_of(item: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda v: isinstance(v, (list, tuple)) and all(item(x) for x in v)


_TYPES: dict[str, tuple[Callable[[Any], bool], str]] = {
    "FLOAT": (_number, "a number"),
    "INT": (_integer, "an integer"),
    "STRING": (lambda v: isinstance(v, str), "a string"),
    "FLOATS": (_list_of(_number), "a list of numbers"),
    "INTS": (_list_of(_integer), "a list of integers"),
    "STRINGS": (_list_of(lambda v: isinstance(v, str)), "a list of strings"),
}
