"""Shape inference over the model graph, for input dimension overrides and for the tensors the
importer left without a shape.

The importer inferred every shape it could at the model's own input dimensions; a prepare for
other dimensions (or for a graph with gaps) infers them again, node by node, in the ONNX
vocabulary of the bundle, as the float runtime computes them:

- values first: the weights, an empty input (its value is its shape), a Shape or Size of any
  tensor, and every default-package op whose inputs are all known values run their kernels now
  (as the float runtime folds them at load), so a shape computed by a subgraph (Shape, Gather,
  Concat, Range... feeding a Reshape or Expand) is the shape the runtime will use;
- explicit shape functions for the ops whose kernels would be costly to run (convolutions,
  pools, products, normalizations, elementwise broadcasting, moves);
- every other default-package op runs its kernel on zeros of its input shapes (the known values
  of its inputs where there are some) and keeps the shapes of what it returns;
- an op whose output shape depends on the value of an input that is known only at run time (a
  graph input, or what is computed from one, read as a shape, axes, sizes or counts:
  `VALUE_INPUTS`) has the shapes the model records for its outputs, at the model's own input
  dimensions; otherwise its outputs, and what is computed from them, have no shape
  (`Shapes.dynamic` says why): a record cannot hold them (driver.py refuses);
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

import numpy as np

from ..errors import UserError
from ..ir.graph import DEFAULT_PACKAGE, Model, Node, TensorInfo
from ..kernels.default import DEFAULT
from ..kernels.default._common import spatial, window_pads
from ..kernels.oppkg import Flags, Impl, OpPackage

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


# The inputs whose values (not only shapes) decide a default op's output shapes: shapes, axes,
# sizes, counts, and the data of the ops whose outputs are as long as what they find in it.
VALUE_INPUTS: dict[str, tuple[int, ...]] = {
    "Reshape": (1,), "Expand": (1,), "Tile": (1,), "ConstantOfShape": (0,), "Range": (0, 1, 2),
    "Slice": (1, 2, 3, 4), "Pad": (1, 3), "Split": (1,), "Squeeze": (1,), "Unsqueeze": (1,),
    "Resize": (2, 3), "TopK": (1,), "OneHot": (1,), "CenterCropPad": (1,), "Col2Im": (1, 2),
    "MaxUnpool": (2,), "AffineGrid": (1,), "DFT": (1, 2), "STFT": (1, 3),
    "BlackmanWindow": (0,), "HammingWindow": (0,), "HannWindow": (0,),
    "MelWeightMatrix": (0, 1), "NonZero": (0,), "Unique": (0,), "Compress": (1,),
    "NonMaxSuppression": (0, 1, 2, 3, 4),
    **{f"Reduce{k}": (1,) for k in ("L1", "L2", "LogSum", "LogSumExp", "Max", "Mean", "Min",
                                     "Prod", "Sum", "SumSquare")},
}


@dataclass
class Shapes:
    infos: dict[str, TensorInfo]
    assumed: list[str] = field(default_factory=list)  # custom ops assumed shape-preserving
    # tensors whose shapes depend on values known only at run time -> why (the node, and the
    # input whose value it is)
    dynamic: dict[str, str] = field(default_factory=dict)


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
    old = _backward({**graph.infos(), **(evidence or {})}, graph.nodes)
    result = Shapes({})
    infos = result.infos
    known: dict[str, np.ndarray] = dict(model.weights)  # the values shapes may depend on
    for t in graph.inputs:
        if t.name in model.weights:
            continue
        shape = tuple(int(d) for d in inputs[t.name])
        infos[t.name] = _checked(TensorInfo(t.name, t.dtype, shape), "input")
        if math.prod(shape) == 0:
            known[t.name] = np.zeros(shape, t.dtype)  # nothing in it: its value is its shape
    for name, w in model.weights.items():
        infos[name] = TensorInfo(name, w.dtype.name, tuple(w.shape))
    own = all(infos[t.name].static_shape == t.static_shape for t in graph.inputs
              if t.name not in model.weights)
    for node in graph.nodes:
        outs = _node_outputs(node, known, old, own, packages or {}, result)
        for name, (shape, dtype) in zip(node.outputs, outs, strict=False):
            if name and shape is not None:
                infos[name] = _checked(TensorInfo(name, dtype, tuple(int(d) for d in shape)),
                                       f"output of node {node.name} ({node.op})")
            elif name:
                infos[name] = TensorInfo(name, dtype, None)
    return result


def _node_outputs(node: Node, known: dict[str, np.ndarray], old: dict[str, TensorInfo],
                  own: bool, packages: Mapping[str, OpPackage],
                  result: Shapes) -> list[tuple[Shape | None, str]]:
    """The node's output (shape, dtype)s; a shape None where it depends on run-time values."""
    infos = result.infos
    shapes = [infos[i].static_shape or () if i else () for i in node.inputs]
    values = [known.get(i) if i else None for i in node.inputs]
    why = _run_time(node, values, result.dynamic)
    if why is not None:
        evidenced = _evidenced(node, old, own, result, packages)
        if evidenced is not None:
            return evidenced
        result.dynamic.update((o, why) for o in node.outputs if o)
        first = infos[node.inputs[0]].dtype if node.inputs and node.inputs[0] else "float32"
        return [(None, _dtype(node, k, old, first)) for k in range(len(node.outputs))]
    computed = _values(node, shapes, values, packages)
    if computed is None:
        return _node_shapes(node, shapes, values, old, infos, packages, result)
    known.update((name, a) for name, a in zip(node.outputs, computed, strict=False) if name)
    return [(tuple(a.shape), _dtype(node, k, old, a.dtype.name))
            for k, a in enumerate(computed[:len(node.outputs)])]


def _run_time(node: Node, values: list[np.ndarray | None], dynamic: dict[str, str]) -> str | None:
    """Why the node's output shapes are known only at run time (None: they are known now)."""
    for name in node.inputs:
        if name in dynamic:
            return dynamic[name]
    if node.package != DEFAULT_PACKAGE:
        return None
    for k in VALUE_INPUTS.get(node.op, ()):
        if k < len(node.inputs) and node.inputs[k] and values[k] is None:
            return (f"node {node.name} ({node.op}) reads the value of {node.inputs[k]!r}, "
                    "which is known only at run time, and its output shape depends on it")
    return None


def _evidenced(node: Node, old: dict[str, TensorInfo], own: bool, result: Shapes,
               packages: Mapping[str, OpPackage]) -> list[tuple[Shape | None, str]] | None:
    """The model's own shapes of the node's outputs, where they hold: at the model's own input
    dimensions, every output's shape recorded, and the known input shapes as recorded."""
    if not own:
        return None
    for name in node.inputs:
        before = old[name].static_shape if name in old else None
        if name not in result.dynamic and before is not None and \
                before != result.infos[name].static_shape:
            return None
    outs = [old.get(o) if o else TensorInfo("", "float32", ()) for o in node.outputs]
    if any(o is None or o.static_shape is None for o in outs):
        return None
    return [(o.static_shape, o.dtype or _zeros_dtype(node, k, result.infos, packages))
            for k, o in enumerate(outs)]  # type: ignore[union-attr]


def _backward(old: dict[str, TensorInfo], nodes: Sequence[Node]) -> dict[str, TensorInfo]:
    """`old`, with the shapes that a shape-preserving op's recorded output gives its input
    where the input's is not recorded (an importer's Cast after a ConstantOfShape); such an
    input's dtype is "" (unknown)."""
    for node in reversed(nodes):
        if node.op not in SAME_AS_INPUT or node.package != DEFAULT_PACKAGE or not node.inputs:
            continue
        x, y = node.inputs[0], old.get(node.outputs[0])
        if x and y is not None and y.static_shape is not None and (
                x not in old or old[x].static_shape is None):
            old[x] = TensorInfo(x, old[x].dtype if x in old else "", y.static_shape)
    return old


def _zeros_dtype(node: Node, k: int, infos: dict[str, TensorInfo],
                 packages: Mapping[str, OpPackage]) -> str:
    """The dtype of the node's k-th output, from its kernel run on zeros (its first input's
    when the kernel cannot run on zeros)."""
    from ..errors import StepFailed

    fallback = infos[node.inputs[0]].dtype if node.inputs and node.inputs[0] else "float32"
    if node.package != DEFAULT_PACKAGE and node.package not in packages:
        return fallback
    args = [np.zeros(infos[i].static_shape or (), infos[i].dtype) if i else None
            for i in node.inputs]
    try:
        outs = _call(node, _impl(node, args, packages), args,
                     [a.shape for a in args if a is not None])
    except (UserError, StepFailed):
        return fallback
    return outs[k].dtype.name if k < len(outs) else fallback


def _values(node: Node, shapes: list[Shape], values: list[np.ndarray | None],
            packages: Mapping[str, OpPackage]) -> list[np.ndarray] | None:
    """The outputs of a default-package node whose value is known before any input arrives,
    as the float runtime computes it at load (every input a constant; a Shape or Size of any
    tensor: its shape is known): None for the others, and for kernels that may not run early
    (INHIBIT_CONST_PROP)."""
    if node.package != DEFAULT_PACKAGE:
        return None
    if node.op in ("Shape", "Size") and node.inputs and node.inputs[0]:
        values = [np.zeros(shapes[0], np.int8), *values[1:]]  # (only its shape is read)
    if any(name and value is None for name, value in zip(node.inputs, values, strict=True)):
        return None
    impl = _impl(node, values, packages)
    if impl.flags & Flags.INHIBIT_CONST_PROP:
        return None
    return _call(node, impl, values, shapes)


def _dtype(node: Node, i: int, old: dict[str, TensorInfo], fallback: str) -> str:
    info = old.get(node.outputs[i]) if node.outputs[i] else None
    return info.dtype if info is not None and info.dtype else fallback


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
    if node.package != DEFAULT_PACKAGE and node.package not in packages:
        return _custom(node, old, infos, result)
    fn = SHAPE_FNS.get(node.op) if node.package == DEFAULT_PACKAGE else None
    if fn is not None:
        try:
            out = fn(node, shapes, values)
            first = infos[node.inputs[0]].dtype if node.inputs and node.inputs[0] else "float32"
            return [(s, _dtype(node, i, old, first)) for i, s in enumerate(out[:len(node.outputs)])]
        except (ValueError, TypeError, IndexError):
            pass  # a case the function does not cover: run the kernel
    args = [None if not name else value if value is not None
            else np.zeros(shape, dtype=infos[name].dtype)
            for name, shape, value in zip(node.inputs, shapes, values, strict=True)]
    arrays = _call(node, _impl(node, args, packages), args, shapes)
    # a kernel returns its optional outputs too (LayerNormalization's Mean, InvStdDev)
    return [(tuple(a.shape), _dtype(node, i, old, a.dtype.name))
            for i, a in enumerate(arrays[:len(node.outputs)])]


def _impl(node: Node, args: list[np.ndarray | None], packages: Mapping[str, OpPackage]) -> Impl:
    package = DEFAULT if node.package == DEFAULT_PACKAGE else packages[node.package]
    return package.select(node.op, [a.dtype.name for a in args if a is not None])


def _call(node: Node, impl: Impl, args: list[np.ndarray | None],
          shapes: list[Shape]) -> list[np.ndarray]:
    """The node's kernel on these inputs (known values, zeros for the others)."""
    from ..errors import StepFailed

    kwargs = node.kwargs
    if node.op == "Split" and "num_outputs" not in kwargs:
        kwargs["num_outputs"] = len(node.outputs)
    try:
        with np.errstate(all="ignore"):
            result = impl.fn(*args, **kwargs)
    except UserError:
        raise
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
