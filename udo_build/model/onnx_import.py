"""ONNX -> the graph IR: checked, shape-inferred, at one opset, custom nodes validated.

1. `onnx.checker`, then the version converter to opset 17 for models below it (every standard
   node then has opset-17 semantics; a model above keeps its opset and each node is taken at its
   version, see interface.py), input dimension overrides, and shape inference. The graph records
   the opset its nodes are at; an opset newer than the installed onnx knows is refused.
2. Constants become weights: initializers, `Constant` nodes, `ConstantOfShape` of a constant
   shape and `Shape` of a tensor whose shape is known. `auto_pad` is resolved into explicit pads.
3. Every standard node must be an op of the emulator's default package. Every custom node
   (a domain other than the ONNX ones, or an op whose definition says UseDefaultTranslation) is
   matched to its op definition and validated (`custom.py`): counts, Repeated, mandatory
   parameters, enumeration names, defaults filled in, datatypes. A mismatch is a UserError
   naming the node, the op and what differs.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from ..errors import Problem, UserError, raise_if_any
from ..ir import Graph, Model, Node, TensorInfo
from ..ir.graph import DEFAULT_PACKAGE, bulk_building
from .custom import CustomOps
from .external_data import (
    EXTERNAL,
    ExternalTensor,
    LazyWeights,
    checkable,
    external_of,
    external_tensors,
    remember,
    small_inline,
)
from .interface import adapt_node, kernel_interface, value_problems
from .shape_fill import complete_shapes

if TYPE_CHECKING:
    import onnx

    from ..kernels.oppkg import OpPackage
    from ..opdef.model import OpPackageDef

TARGET_OPSET = 17
ONNX_DOMAINS = ("", "ai.onnx")
MAX_MODEL_BYTES = 2 << 30  # protobuf's own limit
KEPT_FILL_TYPES = (1, 7, 9)  # float32, int64, bool
POOLS = ("Conv", "MaxPool", "AveragePool", "LpPool")  # ConvTranspose's kernel pads itself


def load_onnx(path: str | Path) -> onnx.ModelProto:
    """Parse an ONNX file, with clear errors. Weights in external data files stay there: their
    references are validated (external_data.py) and remembered for `import_onnx`, which maps
    each when it needs it; the model file itself must be under protobuf's 2 GB."""
    import onnx
    from google.protobuf.message import DecodeError

    from ..source import read_limited

    data = read_limited(path, MAX_MODEL_BYTES, "ONNX model")
    try:
        model = onnx.load_model_from_string(data)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise UserError(f"not an ONNX model: {exc}", file=path,
                        hint="export the model with torch.onnx.export or similar") from None
    del data
    if any(i.data_location == onnx.TensorProto.EXTERNAL for i in model.graph.initializer):
        remember(model, external_tensors(model, Path(path).parent, str(path)))
    return model


def import_onnx(model: onnx.ModelProto, *, file: str = "model.onnx",
                opdefs: OpPackageDef | None = None,
                input_dims: Mapping[str, Sequence[int]] | None = None,
                packages: Mapping[str, OpPackage] | None = None) -> Model:
    """The IR model of an ONNX model (see the module docstring). `packages`: the custom ops'
    kernels, when known: the shapes after a custom op are then its kernel's (shape_fill.py)."""
    external = external_of(model, file)
    if external:
        model, external = small_inline(model, external)
    with bulk_building():
        checked = _checked(model, file)
        _refuse_unknown_ops(checked, CustomOps(opdefs, file), file)
        dims = input_dims or {}
        imported = _import(_inferred(checked, file, dims), file, opdefs, external)
        native = (lambda: _infos(_inferred(checked, file, {}))) if dims else (lambda: None)
        return complete_shapes(imported, native, packages)


def _import(proto: onnx.ModelProto, file: str, opdefs: OpPackageDef | None,
            external: dict[str, ExternalTensor]) -> Model:
    weights = _weights(proto, external, file)
    infos = _infos(proto)
    for info in infos.values():
        _check_size(info.name, info.static_shape, np.dtype(info.dtype).itemsize, file)
    customs = CustomOps(opdefs, file)
    problems = value_problems(proto, file)
    opset = model_opset(proto) or TARGET_OPSET
    nodes: list[Node] = []
    names: set[str] = set()
    for index, proto_node in enumerate(proto.graph.node):
        name = _unique(proto_node.name or f"{proto_node.op_type}_{index}", names)
        folded = _fold(proto_node, weights, infos, file)
        if folded:
            continue
        if customs.claims(proto_node) and not _onnx_family(proto_node, customs):
            node = customs.node(proto_node, name, infos, problems)
        else:
            node = _standard(proto_node, name, (opset, infos, weights), problems, file)
        if node is not None:
            nodes.extend(_typed_fill(node, proto_node))
    raise_if_any(problems)
    constant = set(weights)
    used = {i for n in nodes for i in n.inputs} | {o.name for o in proto.graph.output}
    weights = weights.only(used) if isinstance(weights, LazyWeights) else \
        {k: v for k, v in weights.items() if k in used}
    inputs = tuple(infos[i.name] for i in proto.graph.input if i.name not in constant)
    outputs = tuple(infos.get(o.name, TensorInfo(o.name, "float32")) for o in proto.graph.output)
    produced = {o for n in nodes for o in n.outputs} - {o.name for o in outputs}
    values = tuple(t for name, t in sorted(infos.items()) if name in produced)
    graph = Graph(proto.graph.name or Path(file).stem, inputs, outputs, tuple(nodes), values,
                  opset)
    return Model(graph, weights)


# -- normalization --------------------------------------------------------------------------------


def _checked(model: onnx.ModelProto, file: str) -> onnx.ModelProto:
    """The model, checked and at the target opset (or above it)."""
    import onnx
    from onnx import version_converter

    from . import converter_gaps

    opset = _known_opset(model, file)
    try:
        onnx.checker.check_model(checkable(model))
    except onnx.checker.ValidationError as exc:
        raise UserError(f"the ONNX checker refuses the model: {_first_line(exc)}",
                        file=file) from None
    if opset < TARGET_OPSET:  # above it, each node's kernel decides (interface.py)
        gapped = converter_gaps.gapped_outputs(model, opset)
        try:
            model = version_converter.convert_version(model, TARGET_OPSET)
        except Exception as exc:  # the converter raises bare RuntimeErrors
            raise UserError(f"cannot convert the model from opset {opset} to {TARGET_OPSET}: "
                            f"{_first_line(exc)}", file=file) from None
        converter_gaps.mend(model, gapped)
    return _function_defaults(model)


def _known_opset(model: onnx.ModelProto, file: str) -> int:
    """The model's ONNX opset, one the installed onnx knows."""
    from onnx import defs

    opset = model_opset(model)
    if opset is None:
        domains = sorted({n.domain for n in model.graph.node}) or ["none"]
        raise UserError("the model imports no ONNX opset: ops of domain "
                        f"{', '.join(repr(d) for d in domains)} only, not supported",
                        file=file, hint="the emulator's default package has the ONNX ops")
    newest = defs.onnx_opset_version()
    if not 1 <= opset <= newest:
        raise UserError(f"ONNX opset {opset} not supported: the installed onnx knows opsets 1 "
                        f"to {newest}", file=file, hint=f"export the model at an opset from 1 "
                        f"to {newest} (below {TARGET_OPSET}, it is converted to {TARGET_OPSET})")
    return opset


def _function_defaults(model: onnx.ModelProto) -> onnx.ModelProto:
    """The model with the default attributes of function ops written out: onnx's strict shape
    inference of a function body fails on an attribute it references but the node omits
    (MeanVarianceNormalization without `axes`). A copy when anything is added."""
    from onnx import defs

    missing = []
    opset = model_opset(model) or TARGET_OPSET
    for index, node in enumerate(model.graph.node):
        if node.domain not in ONNX_DOMAINS or not defs.has(node.op_type, ""):
            continue
        schema = defs.get_schema(node.op_type, opset, "")
        if not schema.has_function:
            continue
        given = {a.name for a in node.attribute}
        missing += [(index, a.default_value) for name, a in sorted(schema.attributes.items())
                    if name not in given and a.default_value.name]
    if not missing:
        return model
    import onnx

    model = onnx.ModelProto.FromString(model.SerializeToString())
    for index, default in missing:
        model.graph.node[index].attribute.append(default)
    return model


def model_opset(model: onnx.ModelProto) -> int | None:
    """The model's ONNX opset (None when it imports none)."""
    return next((o.version for o in model.opset_import if o.domain in ONNX_DOMAINS), None)


def _refuse_unknown_ops(model: onnx.ModelProto, customs: CustomOps, file: str) -> None:
    """Standard ops the default package lacks, refused before shape inference runs on them."""
    problems = []
    for index, node in enumerate(model.graph.node):
        if (node.domain in ONNX_DOMAINS and node.op_type not in _supported_ops()
                and node.op_type != "Constant" and not customs.claims(node)):
            problems.append(Problem(
                f"node {node.name or f'{node.op_type}_{index}'}: op {node.op_type} not "
                "supported by the emulator's default package", file,
                hint="supported: " + ", ".join(sorted(_supported_ops()))))
    raise_if_any(problems)


def _inferred(model: onnx.ModelProto, file: str,
              input_dims: Mapping[str, Sequence[int]]) -> onnx.ModelProto:
    """The model at these input dimensions, its shapes inferred."""
    from onnx import shape_inference

    if input_dims:
        model = _override_dims(model, input_dims, file)
    try:
        return shape_inference.infer_shapes(model, strict_mode=True, data_prop=True)
    except Exception as exc:  # onnx raises InferenceError or RuntimeError
        raise UserError(f"shape inference fails: {_first_line(exc)}", file=file) from None


def _override_dims(model: onnx.ModelProto, dims: Mapping[str, Sequence[int]],
                   file: str) -> onnx.ModelProto:
    import onnx

    model = onnx.ModelProto.FromString(model.SerializeToString())
    inputs = {i.name: i for i in model.graph.input}
    for name, shape in dims.items():
        if name not in inputs:
            raise UserError(f"input_dimensions names '{name}', which is not a model input",
                            file=file, hint="model inputs: " + ", ".join(inputs))
        tensor = inputs[name].type.tensor_type
        if len(tensor.shape.dim) != len(shape):
            raise UserError(f"input '{name}' has rank {len(tensor.shape.dim)}, but "
                            f"input_dimensions gives {len(shape)} dimensions {list(shape)}",
                            file=file)
        for dim, size in zip(tensor.shape.dim, shape, strict=True):
            dim.Clear()
            dim.dim_value = int(size)
    del model.graph.value_info[:]  # inferred again for the new dimensions
    for output in model.graph.output:  # their declared dims may hold the old batch size
        output.type.tensor_type.ClearField("shape")
    return model


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:300] if text else type(exc).__name__


def _infos(model: onnx.ModelProto) -> dict[str, TensorInfo]:
    out: dict[str, TensorInfo] = {}
    for vi in [*model.graph.input, *model.graph.value_info, *model.graph.output]:
        info = _info(vi)
        if info is not None:
            out[vi.name] = info
    for init in model.graph.initializer:
        out[init.name] = TensorInfo(init.name, _np_dtype(init.data_type), tuple(init.dims))
    return out


def _info(vi: Any) -> TensorInfo | None:
    t = vi.type.tensor_type
    if not t.elem_type:
        return None
    shape = None
    if t.HasField("shape"):
        shape = tuple(d.dim_value if d.HasField("dim_value") else (d.dim_param or "?")
                      for d in t.shape.dim)
    return TensorInfo(vi.name, _np_dtype(t.elem_type), shape)


@functools.cache
def _np_dtype(elem_type: int) -> str:
    from onnx import helper

    return np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)).name


def _array(tensor: Any) -> np.ndarray:
    from onnx import numpy_helper

    return np.asarray(numpy_helper.to_array(tensor), order="C")  # 0-d stays 0-d


def _weights(proto: onnx.ModelProto, external: dict[str, ExternalTensor],
             file: str) -> dict[str, np.ndarray] | LazyWeights:
    """The initializers: arrays, or (external data) a LazyWeights mapping each when used."""
    if not external:
        return {init.name: _array(init) for init in proto.graph.initializer}
    inline: dict[str, np.ndarray] = {}
    streamed: dict[str, ExternalTensor] = {}
    for init in proto.graph.initializer:
        if init.name in external:
            streamed[init.name] = external[init.name]
        elif init.data_location == EXTERNAL:  # not among those load_onnx validated
            raise UserError(f"initializer {init.name} keeps its data in an external file the "
                            "model did not name when it was read", file=file)
        else:
            inline[init.name] = _array(init)
    return LazyWeights(inline, streamed)


def _unique(name: str, taken: set[str]) -> str:
    candidate, n = name, 1
    while candidate in taken:
        n += 1
        candidate = f"{name}_{n}"
    taken.add(candidate)
    return candidate


# -- constants ----------------------------------------------------------------------------------


def _fold(node: Any, weights: MutableMapping[str, np.ndarray], infos: dict[str, TensorInfo],
          file: str) -> bool:
    """Turn a node into weights when its value is known now; True when it was."""
    from onnx import helper, numpy_helper

    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    value: np.ndarray | None = None
    if node.domain in ONNX_DOMAINS and node.op_type == "Constant":
        value = _constant_value(attrs, numpy_helper)
    elif node.op_type == "ConstantOfShape" and node.input[0] in weights:
        fill = attrs.get("value")
        fill_array = numpy_helper.to_array(fill) if fill is not None else np.zeros(1, "float32")
        shape = tuple(int(d) for d in weights[node.input[0]].reshape(-1))
        _check_size(node.output[0], shape, fill_array.dtype.itemsize, file)
        value = np.full(shape, fill_array.reshape(-1)[0], dtype=fill_array.dtype)
    elif node.op_type == "Shape" and node.input[0] in infos and not attrs:
        shape = infos[node.input[0]].static_shape
        value = None if shape is None else np.array(shape, dtype=np.int64)
    if value is None:
        return False
    weights[node.output[0]] = value
    infos[node.output[0]] = TensorInfo(node.output[0], value.dtype.name, value.shape)
    return True


def _check_size(name: str, shape: tuple[int, ...] | None, itemsize: int, file: str) -> None:
    from ..source import tensor_problem

    problem = None if shape is None else tensor_problem(shape, itemsize)
    if problem is not None:
        raise UserError(f"tensor {name}: {problem}", file=file, field=name,
                        hint="check the model's shapes and the input dimensions")


def _constant_value(attrs: dict[str, Any], numpy_helper: Any) -> np.ndarray | None:
    if "value" in attrs:
        return numpy_helper.to_array(attrs["value"])
    for key, dtype in (("value_float", np.float32), ("value_int", np.int64)):
        if key in attrs:
            return np.array(attrs[key], dtype=dtype)
    for key, dtype in (("value_floats", np.float32), ("value_ints", np.int64)):
        if key in attrs:
            return np.array(list(attrs[key]), dtype=dtype)
    return None


# -- standard nodes -------------------------------------------------------------------------------


def _standard(node: Any, name: str,
              known: tuple[int, dict[str, TensorInfo], Mapping[str, np.ndarray]],
              problems: list[Problem], file: str) -> Node | None:
    from onnx import helper

    opset, infos, weights = known
    if node.domain not in ONNX_DOMAINS:
        problems.append(Problem(
            f"node {name}: op {node.op_type} of domain '{node.domain}' not supported: the "
            "domain is ONNX's, the emulator's default package has only its default domain",
            file, hint="give the op an op config in the recipe's package.ops to run it as a UDO"))
        return None
    if node.op_type not in _supported_ops():
        problems.append(Problem(
            f"node {name}: op {node.op_type} not supported by the emulator's default package",
            file, hint="supported: " + ", ".join(sorted(_supported_ops()))))
        return None
    attrs = {a.name: _attr_value(helper.get_attribute_value(a)) for a in node.attribute}
    if node.op_type in POOLS and attrs.get("auto_pad", "NOTSET") not in ("NOTSET", b"NOTSET"):
        attrs = _explicit_pads(node, name, attrs, infos, problems, file)
    inputs, attrs, refused = adapt_node(node, opset, attrs, weights)
    if refused:
        problems.append(Problem(f"node {name}: {node.op_type}: {', '.join(refused)} not "
                                "supported", file, hint="the emulator's kernel takes: "
                                + _takes(node.op_type)))
        return None
    return Node.make(name, node.op_type, inputs, node.output, attrs)


def _typed_fill(node: Node, proto: Any) -> tuple[Node, ...]:
    """The node, and a Cast after a ConstantOfShape whose fill value is of a type its attribute
    does not keep (an attribute is JSON: its numbers read back as int64, float32 or bool)."""
    from onnx import helper

    if node.op != "ConstantOfShape" or node.package != DEFAULT_PACKAGE:
        return (node,)
    value = next((a.t for a in proto.attribute if a.name == "value"), None)
    if value is None or value.data_type in KEPT_FILL_TYPES:
        return (node,)
    fill = f"{node.outputs[0]}/fill"
    cast = Node.make(f"{node.name}/cast", "Cast", [fill], node.outputs, {"to": value.data_type})
    kept = helper.tensor_dtype_to_np_dtype(value.data_type)
    filled = node.with_attrs(value=[_python_number(v, kept) for v in node.kwargs["value"]])
    return (replace(filled, outputs=(fill,)), cast)


def _python_number(v: Any, dtype: Any) -> Any:
    kind = np.dtype(dtype).kind
    return float(v) if kind == "f" else bool(v) if kind == "b" else int(v)


def _onnx_family(node: Any, customs: CustomOps) -> bool:
    """A node of ONNX's other domains (ai.onnx.ml, ai.onnx.preview...) no op config defines."""
    return node.domain.startswith("ai.onnx.") and node.op_type not in customs.ops


def _takes(op: str) -> str:
    interface = kernel_interface(op)
    if interface is None:
        return "?"
    inputs = ", ".join(interface.inputs) + (", ..." if interface.variadic else "")
    return f"inputs ({inputs}), attributes ({', '.join(sorted(interface.attributes))})"


@functools.cache
def _supported_ops() -> frozenset[str]:
    from ..kernels.default import DEFAULT

    return frozenset(DEFAULT.ops())


def _attr_value(value: Any) -> Any:
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    if isinstance(value, (list, tuple)):
        return [_attr_value(v) for v in value]
    if hasattr(value, "dims") and hasattr(value, "data_type"):  # a TensorProto attribute
        from onnx import numpy_helper

        return numpy_helper.to_array(value).tolist()
    return value


def _explicit_pads(node: Any, name: str, attrs: dict[str, Any], infos: dict[str, TensorInfo],
                   problems: list[Problem], file: str) -> dict[str, Any]:
    mode = attrs.pop("auto_pad")
    x = infos.get(node.input[0])
    shape = x.static_shape if x is not None else None
    kernel = attrs.get("kernel_shape")
    if kernel is None and len(node.input) > 1 and node.input[1] in infos:
        w = infos[node.input[1]].static_shape
        kernel = list(w[2:]) if w else None
    if shape is None or kernel is None:
        problems.append(Problem(f"node {name}: auto_pad {mode} needs the input's shape",
                                file, hint="give the model static input dimensions"))
        return attrs
    spatial = shape[2:]
    strides = attrs.get("strides") or [1] * len(spatial)
    dilations = attrs.get("dilations") or [1] * len(spatial)
    begins, ends = [], []
    for size, k, s, d in zip(spatial, kernel, strides, dilations, strict=True):
        if mode == "VALID":
            begins.append(0)
            ends.append(0)
            continue
        out = -(-size // s)
        total = max(0, (out - 1) * s + (k - 1) * d + 1 - size)
        small, large = total // 2, total - total // 2
        begins.append(small if mode == "SAME_UPPER" else large)
        ends.append(large if mode == "SAME_UPPER" else small)
    attrs["pads"] = begins + ends
    return attrs
