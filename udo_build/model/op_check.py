"""The standard nodes of a bundle someone hands us, checked against ONNX's own op schemas.

A bundle that udo-build converted holds only nodes `onnx.checker` passed; a bundle from a file
may hold anything that parses. Before such a bundle runs, is prepared or exported, every node of
the default package must be an op of the ONNX opset the bundle's graph records (the model's own,
17 for models converted up to it and for bundles written before graphs recorded it), with an
input and output count and attributes of their type as the schema in force at that opset says:
otherwise a kernel would fail on it as if udo-build had a bug. The schemas are data (onnx.defs);
nothing here is written per op.

    bundle = load_checked_bundle(path)     # a UserError names the node and what is wrong
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import UserError
from ..ir.bundle import Bundle, load_bundle
from ..ir.graph import DEFAULT_PACKAGE, Node


def load_checked_bundle(path: str | Path) -> Bundle:
    """The bundle at `path`, read and verified, its standard nodes checked (see above)."""
    bundle = load_bundle(path)
    check_standard_ops(bundle, str(path))
    return bundle


def check_standard_ops(bundle: Bundle, file: str) -> None:
    from onnx import defs

    opset = bundle.model.graph.opset
    newest = defs.onnx_opset_version()
    if opset > newest:
        raise UserError(f"the bundle's graph is at ONNX opset {opset}; the installed onnx knows "
                        f"opsets 1 to {newest}", file=file, field="graph.json.opset",
                        hint="install the onnx the bundle was converted with, or convert the "
                             "model again")
    for i, node in enumerate(bundle.model.graph.nodes):
        if node.package == DEFAULT_PACKAGE:
            why = _problem(node, opset)
            if why:
                raise UserError(f"node {node.name!r} ({node.op}): {why}", file=file,
                                field=f"graph.json.nodes[{i}]",
                                hint="the bundle is damaged or was not written by udo-build; "
                                     "convert the model again")


@functools.cache
def _schema(op: str, opset: int) -> Any:
    """The op's schema in force at the opset; for an op new since, its latest (a bundle written
    before graphs recorded their opset reads as 17, and held the ops of later models too).
    None: not an ONNX op."""
    from onnx import defs

    for version in (opset, defs.onnx_opset_version()):
        try:
            return defs.get_schema(op, version, "")
        except defs.SchemaError:
            continue
    return None


def _problem(node: Node, opset: int) -> str:
    schema = _schema(node.op, opset)
    if schema is None:
        return f"{node.op} is not an op of ONNX opset {opset} or later"
    inputs = len(node.inputs)
    while inputs and not node.inputs[inputs - 1]:
        inputs -= 1  # omitted trailing optional inputs
    if not schema.min_input <= inputs <= schema.max_input:
        return (f"{inputs} inputs, where {node.op} takes {schema.min_input} to "
                f"{schema.max_input} at opset {opset}")
    if not schema.min_output <= len(node.outputs) <= schema.max_output:
        return (f"{len(node.outputs)} outputs, where {node.op} makes {schema.min_output} to "
                f"{schema.max_output} at opset {opset}")
    for name, value in node.kwargs.items():
        attribute = schema.attributes.get(name)
        if attribute is None:
            return f"{node.op} has no attribute {name!r} at opset {opset}"
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
