"""Custom nodes of an ONNX model, matched to their op definitions and validated.

A node is custom when its domain is not an ONNX one, or when its op has a definition that says
UseDefaultTranslation (the definition then overrides the native op of the same type). Its inputs
and outputs must fit the definition (mandatory ones present, no extra unless the last is
Repeated), its attributes must be parameters of the op with values of the right kind;
enumeration names become their numbers, missing optional parameters get their defaults, and
tensor datatypes must be ones the definition allows.

A custom node names the op package by its name (PackageName, UDO_PACKAGE_NAME, or the recipe's
package.name): the name every backend's generated package keeps and its validateOpConfig accepts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..errors import Problem
from ..ir import Node, TensorInfo

if TYPE_CHECKING:
    from ..opdef.model import OpDef, OpPackageDef, ParamDef

ONNX_DOMAINS = ("", "ai.onnx")
# normalized datatype -> the numpy dtypes a float or integer model may carry for it
_DTYPES = {
    "FLOAT_32": {"float32"}, "FLOAT_16": {"float16", "float32"}, "FLOAT_64": {"float64"},
    "INT_8": {"int8"}, "INT_16": {"int16"}, "INT_32": {"int32"}, "INT_64": {"int64"},
    "UINT_8": {"uint8", "float32"}, "UINT_16": {"uint16", "float32"}, "UINT_32": {"uint32"},
    "UINT_64": {"uint64"}, "BOOL_8": {"bool"}, "STRING": {"object"},
}


def _allowed_dtypes(datatype: str) -> set[str]:
    if "FIXED_POINT" in datatype:  # quantized on the target, float in the model
        return {"float32", "float16"}
    return _DTYPES.get(datatype, set())


class CustomOps:
    def __init__(self, package: OpPackageDef | None, file: str) -> None:
        self.package = package
        self.file = file
        self.ops: dict[str, OpDef] = {op.name: op for op in package.ops} if package else {}

    def claims(self, node: Any) -> bool:
        if node.domain not in ONNX_DOMAINS:
            return True
        op = self.ops.get(node.op_type)
        return op is not None and op.use_default_translation

    def node(self, proto: Any, name: str, infos: dict[str, TensorInfo],
             problems: list[Problem]) -> Node | None:
        op = self.ops.get(proto.op_type)
        where = f"node {name} ({proto.op_type})"
        if op is None or self.package is None:
            known = ", ".join(self.ops) or "none"
            problems.append(Problem(f"{where}: no op definition for custom op {proto.op_type} "
                                    f"(domain '{proto.domain}')", self.file,
                                    hint=f"defined ops: {known}; add the op's config"))
            return None
        owner = self.package.package_of(op)  # a set of packages: the op's own
        domain = owner.domain
        if proto.domain not in ONNX_DOMAINS and domain and proto.domain != domain:
            problems.append(Problem(f"{where}: the node's domain is '{proto.domain}', the op "
                                    f"definitions are for domain '{domain}'", self.file))
            return None
        before = len(problems)
        inputs = _trim(list(proto.input))
        outputs = _trim(list(proto.output))
        _check_count(where, "input", inputs, op.inputs, problems, self.file)
        _check_count(where, "output", outputs, op.outputs, problems, self.file)
        _check_dtypes(where, inputs, op, infos, problems, self.file)
        attrs = _params(where, proto, op, problems, self.file)
        if len(problems) > before:
            return None
        return Node.make(name, op.name, inputs, outputs, attrs, package=owner.name)


def _trim(names: list[str]) -> list[str]:
    while names and not names[-1]:
        names.pop()
    return names


def _check_count(where: str, kind: str, given: list[str], defined: Any,
                 problems: list[Problem], file: str) -> None:
    repeated = bool(defined) and defined[-1].repeated
    listing = ", ".join(t.name for t in defined) or "none"
    if len(given) > len(defined) and not repeated:
        problems.append(Problem(f"{where}: has {len(given)} {kind}s, the op defines "
                                f"{len(defined)} ({listing})", file))
    for i, tensor in enumerate(defined):
        present = i < len(given) and given[i] != ""
        if tensor.mandatory and not present and not (tensor.repeated and i > 0):
            problems.append(Problem(f"{where}: the mandatory {kind} '{tensor.name}' (#{i}) is "
                                    "missing", file, hint=f"the op's {kind}s: {listing}"))


def _check_dtypes(where: str, inputs: list[str], op: OpDef, infos: dict[str, TensorInfo],
                  problems: list[Problem], file: str) -> None:
    for i, name in enumerate(inputs):
        if not name or name not in infos:
            continue
        tensor = op.inputs[min(i, len(op.inputs) - 1)]
        declared = {*tensor.datatypes, *(d for o in tensor.overrides for d in o.datatypes)}
        allowed = set().union(*(_allowed_dtypes(d) for d in declared)) if declared else set()
        if declared - {"BACKEND_SPECIFIC"} and infos[name].dtype not in allowed:
            problems.append(Problem(
                f"{where}: input '{tensor.name}' is {infos[name].dtype}, the op allows "
                + ", ".join(sorted(declared - {"BACKEND_SPECIFIC"})), file))


def _params(where: str, proto: Any, op: OpDef, problems: list[Problem],
            file: str) -> dict[str, Any]:
    from onnx import helper

    given = {a.name: helper.get_attribute_value(a) for a in proto.attribute}
    names = ", ".join(p.name for p in op.params) or "none"
    values: dict[str, Any] = {}
    for key in given:
        if op.param(key) is None:
            problems.append(Problem(f"{where}: attribute '{key}' is not a parameter of op "
                                    f"{op.name}", file, hint=f"its parameters: {names}"))
    for param in op.params:
        if param.name in given:
            value = _param_value(where, param, given[param.name], problems, file)
        elif param.default is not None:
            value = _plain(param.default.value)
        elif param.mandatory:
            problems.append(Problem(f"{where}: the mandatory parameter '{param.name}' is "
                                    "missing", file))
            continue
        else:
            continue
        if value is not None:
            values[param.name] = value
    return values


def _plain(value: Any) -> Any:
    return [_plain(v) for v in value] if isinstance(value, tuple) else value


def _param_value(where: str, param: ParamDef, raw: Any, problems: list[Problem],
                 file: str) -> Any:
    value = _decode(raw)
    if param.enumeration:
        if isinstance(value, str) and value in param.enumeration:
            return param.enumeration.index(value)
        if isinstance(value, int) and 0 <= value < len(param.enumeration):
            return value
        problems.append(Problem(f"{where}: parameter '{param.name}' is {value!r}, not one of "
                                + ", ".join(param.enumeration), file))
        return None
    kinds = set(param.datatypes) - {"BACKEND_SPECIFIC"}
    numeric = kinds and "STRING" not in kinds
    if numeric and any(isinstance(v, str) for v in _leaves(value)):
        problems.append(Problem(f"{where}: parameter '{param.name}' is {value!r}, but "
                                f"{'/'.join(sorted(kinds))} needs a number", file))
        return None
    if kinds and kinds <= {"FLOAT_16", "FLOAT_32", "FLOAT_64"} and isinstance(value, int):
        return float(value)
    if kinds == {"BOOL_8"} and isinstance(value, int):
        return bool(value)
    if kinds and all(k.startswith(("INT", "UINT")) for k in kinds) and isinstance(value, float):
        problems.append(Problem(f"{where}: parameter '{param.name}' is {value}, but "
                                f"{'/'.join(sorted(kinds))} needs a whole number", file))
        return None
    if param.rank == "SCALAR" and isinstance(value, list):
        problems.append(Problem(f"{where}: parameter '{param.name}' is a list, but the op "
                                "defines a SCALAR", file))
        return None
    return value


def _leaves(value: Any) -> list[Any]:
    return [x for v in value for x in _leaves(v)] if isinstance(value, list) else [value]


def _decode(raw: Any) -> Any:
    if isinstance(raw, bytes):
        return raw.decode("utf-8", "replace")
    if isinstance(raw, (list, tuple)):
        return [_decode(v) for v in raw]
    if hasattr(raw, "dims") and hasattr(raw, "data_type"):
        from onnx import numpy_helper

        return numpy_helper.to_array(raw).tolist()
    return raw
