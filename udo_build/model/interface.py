"""What a standard node may use: the element types the kernels compute in, and the inputs and
attributes its default-package kernel takes.

A kernel's signature is its contract (`udo_build.kernels.default`): inputs positionally in ONNX
order, attributes as keyword arguments. A parameter may be both (positional-or-keyword): the
reductions' `axes` is an input from opset 18 and an attribute before, and binds either way. A
node of any opset version is accepted when every input it gives is a positional parameter of the
kernel and every attribute it sets is a keyword of the kernel (keyword-only, or
positional-or-keyword at a position the node leaves empty), with two adaptations:

- an attribute the kernel does not take, set to its ONNX default, is dropped (it changes
  nothing: `noop_with_empty_axes=0` of the opset 18 reductions, `saturate=1` of Cast);
- an input the kernel takes as a keyword-only attribute of the same name becomes that
  attribute when it is a constant.

Anything else is refused: "node n: Pad: input 3 'axes' not supported". Tensors of types numpy
does not compute in (bfloat16, float8, 4-bit integers, strings, complex) and values that are not
tensors (sequences, optionals, maps) are refused too.
"""

from __future__ import annotations

import functools
import inspect
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import Problem

# ONNX element types the kernels compute in (TensorProto values)
COMPUTED_TYPES = {1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32",
                  7: "int64", 9: "bool", 10: "float16", 11: "float64", 12: "uint32",
                  13: "uint64"}


@dataclass(frozen=True)
class KernelInterface:
    """The inputs (positional parameters) and attributes (keywords) of an op's kernel;
    `attributes` holds the keyword-only ones and the positional-or-keyword ones, which bind
    either way."""

    inputs: tuple[str, ...]
    variadic: bool  # takes any number of inputs (*args)
    attributes: frozenset[str]

    def takes_input(self, index: int) -> bool:
        return self.variadic or index < len(self.inputs)

    def position(self, name: str) -> int | None:
        """The input position of a positional-or-keyword parameter (None: keyword-only)."""
        return self.inputs.index(name) if name in self.inputs else None


@functools.cache
def kernel_interface(op: str) -> KernelInterface | None:
    """The interface of the default package's generic kernel of `op` (None: not inspectable)."""
    from ..kernels.default import DEFAULT

    impls = DEFAULT.impls(op)
    if not impls:
        return None
    impl = next((i for i in impls if i.generic), impls[0])
    try:
        params = list(inspect.signature(impl.fn).parameters.values())
    except (TypeError, ValueError):
        return None
    kind = inspect.Parameter
    positional = (kind.POSITIONAL_ONLY, kind.POSITIONAL_OR_KEYWORD)
    keywords = (kind.KEYWORD_ONLY, kind.POSITIONAL_OR_KEYWORD)
    return KernelInterface(
        tuple(p.name for p in params if p.kind in positional),
        any(p.kind == kind.VAR_POSITIONAL for p in params),
        frozenset(p.name for p in params if p.kind in keywords))


def type_problem(elem_type: int) -> str:
    """'' when the kernels compute in this ONNX element type, else what is not supported."""
    if elem_type in COMPUTED_TYPES:
        return ""
    from onnx import TensorProto

    return f"element type {TensorProto.DataType.Name(elem_type).lower()} not supported"


def value_problem(value_info: Any) -> str:
    """'' when a graph value is a tensor of a computed type, else what is not supported."""
    kind = value_info.type.WhichOneof("value")
    if kind is None:
        return ""
    if kind != "tensor_type":
        return f"a value of kind {kind.replace('_type', '')} not supported (only tensors)"
    return type_problem(value_info.type.tensor_type.elem_type)


def value_problems(proto: Any, file: str) -> list[Problem]:
    """The graph's values of a type the kernels do not compute in."""
    problems = []
    graph = proto.graph
    for vi in [*graph.input, *graph.value_info, *graph.output]:
        why = value_problem(vi)
        if why:
            problems.append(Problem(f"tensor {vi.name}: {why}", file, field=vi.name))
    for init in graph.initializer:
        why = type_problem(init.data_type)
        if why:
            problems.append(Problem(f"initializer {init.name}: {why}", file, field=init.name))
    return problems


def adapt_node(node: Any, opset: int, attrs: dict[str, Any], weights: dict[str, np.ndarray]
               ) -> tuple[list[str], dict[str, Any], list[str]]:
    """(inputs, attributes, what is not supported) of a standard node for its kernel."""
    interface = kernel_interface(node.op_type)
    inputs = list(node.input)
    if interface is None:
        return inputs, attrs, []
    schema = _schema(node.op_type, opset)
    refused: list[str] = []
    for index, name in enumerate(node.input):
        if not name or interface.takes_input(index):
            continue
        formal = _formal_input(schema, index)
        if (formal in interface.attributes and interface.position(formal) is None
                and name in weights):
            attrs[formal] = weights[name].tolist()
            inputs[index] = ""
        else:
            refused.append(f"input {index} '{formal}'")
    while inputs and not inputs[-1]:
        inputs.pop()
    kept = {}
    for key, value in attrs.items():
        position = interface.position(key)
        if position is not None and position < len(inputs):
            refused.append(f"attribute {key} beside input {position}")  # binds one way only
        elif key in interface.attributes:
            kept[key] = value
        elif not _is_default(schema, key, value):
            refused.append(f"attribute {key}={value!r:.40}")
    return inputs, kept, refused


@functools.cache
def _schema(op: str, opset: int) -> Any:
    from onnx import defs

    try:
        return defs.get_schema(op, opset, "")
    except defs.SchemaError:
        return None


def _formal_input(schema: Any, index: int) -> str:
    if schema is None or not schema.inputs:
        return "?"
    return schema.inputs[min(index, len(schema.inputs) - 1)].name


def _is_default(schema: Any, key: str, value: Any) -> bool:
    from onnx import helper

    attribute = None if schema is None else schema.attributes.get(key)
    if attribute is None or not attribute.default_value.name:
        return False
    default = helper.get_attribute_value(attribute.default_value)
    if isinstance(default, bytes):
        default = default.decode("utf-8", "replace")
    return bool(default == value)
