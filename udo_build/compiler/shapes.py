"""Shape inference over the model graph, for input dimension overrides.

The importer inferred every shape at the model's own input dimensions; a prepare for other
dimensions infers them again, node by node, in the ONNX vocabulary of the bundle:

- explicit shape functions for the ops whose kernels would be costly to run (convolutions,
  pools, products, normalizations, elementwise broadcasting, moves);
- every other default-package op runs its kernel on zeros of its input shapes (constant inputs,
  such as a Reshape's shape, with their real values) and keeps the shapes of what it returns;
- a custom op runs its kernel on zeros when its package is given. Without its kernels (a recipe
  does not make them an input of prepare today), its output shapes are the bundle's when its
  input shapes are the bundle's; otherwise the op must have shown itself shape-preserving at
  the model's own dimensions (every output had the shape and type of the first input there),
  and its outputs take the first input's new shape. Anything else is a UserError asking for
  the kernels. Which custom ops were assumed shape-preserving is reported (`Shapes.assumed`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import UserError
from ..ir.graph import DEFAULT_PACKAGE, Model, Node, TensorInfo
from ..kernels.default import DEFAULT
from ..kernels.default._common import spatial, window_pads
from ..kernels.oppkg import OpPackage

Shape = tuple[int, ...]
ShapeFn = Callable[[Node, list[Shape], list[np.ndarray | None]], list[Shape]]

SAME_AS_INPUT = (
    "Relu", "LeakyRelu", "PRelu", "Sigmoid", "Tanh", "Exp", "Log", "Abs", "Neg", "Sqrt",
    "Softplus", "Softsign", "Elu", "Selu", "Celu", "HardSigmoid", "HardSwish", "Erf", "Floor",
    "Ceil", "Round", "Sign", "Sin", "Cos", "Clip", "Identity", "Dropout", "Cast",
    "BatchNormalization", "InstanceNormalization", "LRN", "Softmax", "LogSoftmax", "Hardmax",
    "LpNormalization", "ThresholdedRelu", "Reciprocal", "Not", "IsNaN",
)
BROADCAST = ("Add", "Sub", "Mul", "Div", "Pow", "Mod", "Equal", "Less", "LessOrEqual",
             "Greater", "GreaterOrEqual", "And", "Or", "Xor", "Sum", "Max", "Min", "Mean",
             "Where", "BitShift")


@dataclass
class Shapes:
    infos: dict[str, TensorInfo]
    assumed: list[str] = field(default_factory=list)  # custom ops assumed shape-preserving


def _window(node: Node, shapes: list[Shape], _: list[np.ndarray | None]) -> list[Shape]:
    x = shapes[0]
    rank = len(x) - 2
    if node.op == "Conv":
        if x[1] != shapes[1][1] * int(node.attr("group", 1)):
            raise ValueError("the input's channels do not match the weights")  # the kernel says
        kernel = tuple(shapes[1][2:])
        channels = shapes[1][0]
    else:
        kernel = tuple(int(k) for k in node.attr("kernel_shape"))
        channels = x[1]
    _, _, outs = window_pads(node.attr("auto_pad", "NOTSET"), node.attr("pads"), x[2:], kernel,
                             spatial(node.attr("strides"), rank, 1),
                             spatial(node.attr("dilations"), rank, 1),
                             int(node.attr("ceil_mode", 0)))
    return [(x[0], channels, *outs)]


def _gemm(node: Node, shapes: list[Shape], _: list[np.ndarray | None]) -> list[Shape]:
    a, b = shapes[0], shapes[1]
    n = a[1] if node.attr("transA", 0) else a[0]
    m = b[0] if node.attr("transB", 0) else b[1]
    return [(n, m)]


def _matmul(node: Node, shapes: list[Shape], _: list[np.ndarray | None]) -> list[Shape]:
    a, b = shapes
    if len(a) == 1 or len(b) == 1:
        return [tuple(np.matmul(np.zeros(a, np.int8), np.zeros(b, np.int8)).shape)]
    batch = np.broadcast_shapes(a[:-2], b[:-2])
    return [(*batch, a[-2], b[-1])]


def _global(node: Node, shapes: list[Shape], _: list[np.ndarray | None]) -> list[Shape]:
    return [(*shapes[0][:2], *(1,) * (len(shapes[0]) - 2))]


def _same(node: Node, shapes: list[Shape], _: list[np.ndarray | None]) -> list[Shape]:
    return [shapes[0]] * max(1, len(node.outputs))


def _broadcast(node: Node, shapes: list[Shape], _: list[np.ndarray | None]) -> list[Shape]:
    return [tuple(np.broadcast_shapes(*shapes))]


def _reshape(node: Node, shapes: list[Shape], values: list[np.ndarray | None]) -> list[Shape]:
    if values[1] is None:
        raise ValueError("a Reshape with a computed shape")
    dims = [int(d) for d in values[1].reshape(-1)]
    if not node.attr("allowzero", 0):
        dims = [shapes[0][i] if d == 0 else d for i, d in enumerate(dims)]
    if -1 in dims:
        known = math.prod(d for d in dims if d != -1)
        dims[dims.index(-1)] = math.prod(shapes[0]) // max(known, 1)
    if math.prod(dims) != math.prod(shapes[0]):
        raise ValueError(f"cannot reshape {list(shapes[0])} to {dims}")
    return [tuple(dims)]


def _flatten(node: Node, shapes: list[Shape], _: list[np.ndarray | None]) -> list[Shape]:
    x = shapes[0]
    axis = int(node.attr("axis", 1))
    axis = axis + len(x) if axis < 0 else axis
    return [(math.prod(x[:axis]), math.prod(x[axis:]))]


def _transpose(node: Node, shapes: list[Shape], _: list[np.ndarray | None]) -> list[Shape]:
    perm = node.attr("perm") or list(reversed(range(len(shapes[0]))))
    return [tuple(shapes[0][p] for p in perm)]


def _concat(node: Node, shapes: list[Shape], _: list[np.ndarray | None]) -> list[Shape]:
    axis = int(node.attr("axis")) % len(shapes[0])
    out = list(shapes[0])
    out[axis] = sum(s[axis] for s in shapes)
    return [tuple(out)]


SHAPE_FNS: dict[str, ShapeFn] = {
    "Conv": _window, "MaxPool": _window, "AveragePool": _window, "LpPool": _window,
    "Gemm": _gemm, "MatMul": _matmul, "GlobalAveragePool": _global, "GlobalMaxPool": _global,
    "Reshape": _reshape, "Flatten": _flatten, "Transpose": _transpose, "Concat": _concat,
    **{op: _same for op in SAME_AS_INPUT}, **{op: _broadcast for op in BROADCAST},
}


def infer(model: Model, inputs: Mapping[str, Sequence[int]],
          packages: Mapping[str, OpPackage] | None = None,
          evidence: Mapping[str, TensorInfo] | None = None) -> Shapes:
    """Every tensor's shape and dtype for these input shapes (see the module docstring).
    `evidence`: tensor infos at the model's own dimensions where the graph no longer holds them
    (the importer's, for the custom ops' outputs an exporter recorded)."""
    graph = model.graph
    old = {**graph.infos(), **(evidence or {})}
    infos: dict[str, TensorInfo] = {}
    for t in graph.inputs:
        if t.name in model.weights:
            continue
        infos[t.name] = _checked(TensorInfo(t.name, t.dtype, tuple(int(d) for d in inputs[t.name])),
                                 "input")
    for name, w in model.weights.items():
        infos[name] = TensorInfo(name, w.dtype.name, tuple(w.shape))
    result = Shapes(infos)
    for node in graph.nodes:
        shapes = [infos[i].static_shape or () if i else () for i in node.inputs]
        values = [model.weights.get(i) if i else None for i in node.inputs]
        outs = _node_shapes(node, shapes, values, old, infos, packages or {}, result)
        for name, (shape, dtype) in zip(node.outputs, outs, strict=False):
            if name:
                infos[name] = _checked(TensorInfo(name, dtype, tuple(int(d) for d in shape)),
                                       f"output of node {node.name} ({node.op})")
    return result


def _checked(info: TensorInfo, what: str) -> TensorInfo:
    """`info`, unless its shape implies absurd memory (a UserError naming the tensor)."""
    from ..source import tensor_problem

    problem = tensor_problem(info.static_shape or (), np.dtype(info.dtype).itemsize)
    if problem is not None:
        raise UserError(f"tensor {info.name} ({what}) at these input dimensions: {problem}",
                        field=info.name, hint="choose smaller input dimensions")
    return info


def _node_shapes(node: Node, shapes: list[Shape], values: list[np.ndarray | None],
                 old: dict[str, TensorInfo], infos: dict[str, TensorInfo],
                 packages: Mapping[str, OpPackage], result: Shapes) -> list[tuple[Shape, str]]:
    def dtype(i: int, fallback: str) -> str:
        info = old.get(node.outputs[i]) if node.outputs[i] else None
        return info.dtype if info is not None else fallback

    if node.package != DEFAULT_PACKAGE and node.package not in packages:
        return _custom(node, old, infos, result)
    fn = SHAPE_FNS.get(node.op) if node.package == DEFAULT_PACKAGE else None
    if fn is not None:
        try:
            out = fn(node, shapes, values)
            first = infos[node.inputs[0]].dtype if node.inputs and node.inputs[0] else "float32"
            return [(s, dtype(i, first)) for i, s in enumerate(out[:len(node.outputs)])]
        except (ValueError, TypeError, IndexError):
            pass  # a case the function does not cover: run the kernel
    arrays = _run_on_zeros(node, shapes, values, infos, packages)
    # a kernel returns its optional outputs too (LayerNormalization's Mean, InvStdDev)
    return [(tuple(a.shape), dtype(i, a.dtype.name))
            for i, a in enumerate(arrays[:len(node.outputs)])]


def _run_on_zeros(node: Node, shapes: list[Shape], values: list[np.ndarray | None],
                  infos: dict[str, TensorInfo], packages: Mapping[str, OpPackage]
                  ) -> list[np.ndarray]:
    from ..errors import StepFailed

    args: list[Any] = []
    for name, shape, value in zip(node.inputs, shapes, values, strict=True):
        if not name:
            args.append(None)
        else:
            args.append(value if value is not None
                        else np.zeros(shape, dtype=infos[name].dtype))
    package = DEFAULT if node.package == DEFAULT_PACKAGE else packages[node.package]
    impl = package.select(node.op, [a.dtype.name for a in args if a is not None])
    kwargs = node.kwargs
    if node.op == "Split" and "num_outputs" not in kwargs:
        kwargs["num_outputs"] = len(node.outputs)
    try:
        result = impl.fn(*args, **kwargs)
    except Exception as exc:
        where = f"{node.package}::{node.op} (node {node.name})"
        if node.package != DEFAULT_PACKAGE:
            raise StepFailed("prepare", f"{where} raised {type(exc).__name__} on zeros of its "
                             f"input shapes {shapes}: {exc}") from exc
        raise UserError(f"node {node.name} ({node.op}) cannot run at these input dimensions "
                        f"(input shapes {[list(s) for s in shapes]}): {exc}") from exc
    return [np.asarray(r) for r in (result if isinstance(result, tuple) else (result,))]


def _custom(node: Node, old: dict[str, TensorInfo], infos: dict[str, TensorInfo],
            result: Shapes) -> list[tuple[Shape, str]]:
    """A custom op without its kernels: the bundle's shapes, or shape-preserving by evidence."""
    given = [infos[i].static_shape for i in node.inputs if i]
    before = [old[i].static_shape if i in old else None for i in node.inputs if i]
    outs = [old.get(o) for o in node.outputs]
    if any(o is None or o.static_shape is None for o in outs):
        raise UserError(f"the bundle does not know the output shapes of custom op {node.op} "
                        f"(node {node.name})", hint="give prepare the op's kernels")
    if given == before:
        return [(o.static_shape, o.dtype) for o in outs]  # type: ignore[union-attr,misc]
    first = old.get(node.inputs[0]) if node.inputs and node.inputs[0] else None
    preserving = first is not None and all(
        o.static_shape == first.static_shape and o.dtype == first.dtype
        for o in outs)  # type: ignore[union-attr]
    if not preserving:
        raise UserError(
            f"custom op {node.package}::{node.op} (node {node.name}) changes the shape of its "
            f"input, so its output shape at input shapes {[list(s or ()) for s in given]} is "
            "unknown without its kernels",
            hint="prepare this model at its own input dimensions, or give prepare the kernels")
    result.assumed.append(f"{node.package}::{node.op}")
    return [(given[0] or (), o.dtype) for o in outs]  # type: ignore[union-attr]
