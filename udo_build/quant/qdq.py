"""A QuantizedModel as a standard ONNX QDQ model (opset 17, IR version 8, or the model's own
opset when later, with the IR version it needs), so onnxruntime and
other tools run it:

- every encoded activation T: its producer writes `T_float`, then QuantizeLinear -> `T_quantized`
  -> DequantizeLinear -> `T` (an encoded graph input: `T` -> Q -> DQ -> `T_dequantized`, which
  its readers read); zero_point = -offset (uint8; uint16 through the com.microsoft Q/DQ, since
  ONNX has 16-bit Q/DQ only from opset 21);
- encoded weights as int8 (int16) initializers `W_quantized` with a DequantizeLinear -> `W`, per
  output channel (`axis`) when they have one encoding per channel; biases as int32
  initializers with scale s_x x s_w[c];
- an absorbed tensor (a Conv output read only by a Relu whose output is encoded) stays float,
  the Relu between the Conv and its Q: onnxruntime fuses the three (its ReluQuantFusion and
  QDQ Conv fusion make a QLinearConv clamped at the zero point, as the integer path does);
- float-fallback tensors and unencoded weights stay float, without QDQ;
- a Sum of two tensors is written as the equivalent Add (onnxruntime fuses a QDQ Add into a
  QLinearAdd, not a Sum);
- custom ops stay nodes of their domain (onnxruntime cannot run those without a custom-op
  library; other tools can read the model);
- a one-element constant read where ONNX defines a scalar (Dropout's ratio, Clip's bounds, ...)
  is written as a scalar: a bundle may hold it as a vector of one element, which onnxruntime
  refuses there ("Ratio of Dropout must be a scalar").
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from ..ir.encodings import Encoding
from ..ir.graph import DEFAULT_PACKAGE, Graph, Node, TensorInfo
from ..ir.qmodel import QuantizedModel
from ..runtime.integer.fixed import dequantize_along, lpbq_integers, qtype, quantize_along
from ..runtime.integer.registry import channel_axis

if TYPE_CHECKING:
    import onnx

OPSET = 17
IR_VERSION = 8
MS_DOMAIN = "com.microsoft"  # onnxruntime's Q/DQ with 16-bit types
SCALAR_INPUTS = {"Dropout": (1, 2), "Clip": (1, 2), "Range": (0, 1, 2), "Pad": (2,)}


class _Builder:
    def __init__(self, qmodel: QuantizedModel, domains: Mapping[str, str]) -> None:
        from onnx import helper

        self.helper = helper
        self.qmodel = qmodel
        self.graph: Graph = qmodel.model.graph
        self.domains = dict(domains)
        self.nodes: list[Any] = []
        self.initializers: list[Any] = []
        self.reads: dict[str, str] = {}  # tensor -> the name its readers read
        self.taken = {t for n in self.graph.nodes for t in (*n.inputs, *n.outputs)}
        self.taken |= {t.name for t in self.graph.inputs} | set(qmodel.model.weights)
        self.microsoft = False

    def fresh(self, base: str) -> str:
        name, n = base, 1
        while name in self.taken:
            n, name = n + 1, f"{base}_{n}"
        self.taken.add(name)
        return name

    def build(self) -> onnx.ModelProto:
        consumers = self.graph.consumers()
        for name, value in self.qmodel.model.iter_weights():
            readers = consumers.get(name, [])
            if value.size == 1 and any(_reads_scalar(r, name) for r in readers):
                value = value.reshape(())
            self._weight(name, value, readers[0] if readers else None)
        for t in self.graph.inputs:
            enc = self.qmodel.activations.get(t.name)
            if enc is not None and t.name not in self.qmodel.model.weights:
                self.reads[t.name] = self._qdq(t.name, self.fresh(f"{t.name}_dequantized"),
                                               enc)
        for node in self.graph.nodes:
            self._node(node)
        return self._model()

    def _node(self, node: Node) -> None:
        if node.package == DEFAULT_PACKAGE and node.op not in _onnx_ops():
            raise ValueError(f"node {node.name}: {node.op} is not an ONNX op (a fused step of "
                             "the emulator's plan); export the quantized model, not a plan")
        outputs, after = [], []
        for out in node.outputs:
            enc = self.qmodel.activations.get(out) if out else None
            if enc is None:
                outputs.append(out)
                continue
            outputs.append(self.fresh(f"{out}_float"))
            after.append((outputs[-1], out, enc))
        inputs = [self.reads.get(i, i) if i else "" for i in node.inputs]
        domain = "" if node.package == DEFAULT_PACKAGE else self.domains.get(node.package,
                                                                             node.package)
        op = "Add" if node.op == "Sum" and len(inputs) == 2 and not domain else node.op
        proto = self.helper.make_node(op, inputs, outputs, name=node.name, domain=domain)
        proto.attribute.extend(_attribute(k, v) for k, v in sorted(node.kwargs.items()))
        self.nodes.append(proto)
        for src, dst, enc in after:
            self._qdq(src, dst, enc)

    def _qdq(self, src: str, dst: str, enc: Encoding) -> str:
        """src -> QuantizeLinear -> DequantizeLinear -> dst."""
        scale, zp = self._encoding_tensors(dst, [enc])
        quantized = self.fresh(f"{dst}_quantized")
        domain = self._domain(enc)
        self.nodes.append(self.helper.make_node("QuantizeLinear", [src, scale, zp], [quantized],
                                                name=f"{dst}_QuantizeLinear", domain=domain))
        self.nodes.append(self.helper.make_node("DequantizeLinear", [quantized, scale, zp],
                                                [dst], name=f"{dst}_DequantizeLinear",
                                                domain=domain))
        return dst

    def _weight(self, name: str, value: np.ndarray, reader: Node | None) -> None:
        from onnx import numpy_helper

        encs = self.qmodel.params.get(name)
        if not encs or value.dtype.kind != "f":
            self.initializers.append(numpy_helper.from_array(np.asarray(value), name))
            return
        index = reader.inputs.index(name) if reader is not None else 0
        axis = channel_axis(reader, index, value.ndim, len(encs), value.shape) \
            if reader is not None else 0
        q = quantize_along(value, encs, axis)
        if encs[0].blocked and not encs[0].lpbq_bitwidth:  # PER_BLOCK: its dequantized values
            self.initializers.append(numpy_helper.from_array(
                dequantize_along(q, encs, axis), name))
            return
        if encs[0].blocked:  # LPBQ: the integers q x block scale, one scale per channel
            q, plain = lpbq_integers(q, encs)
            encs = list(plain)
        quantized = self.fresh(f"{name}_quantized")
        self.initializers.append(numpy_helper.from_array(q, quantized))
        scale, zp = self._encoding_tensors(name, encs)
        attrs = {"axis": axis} if len(encs) > 1 else {}
        self.nodes.append(self.helper.make_node(
            "DequantizeLinear", [quantized, scale, zp], [name], name=f"{name}_DequantizeLinear",
            domain=self._domain(encs[0]), **attrs))

    def _encoding_tensors(self, base: str, encs: list[Encoding]) -> tuple[str, str]:
        from onnx import numpy_helper

        scale = np.array([e.scale for e in encs], np.float32)
        zp = np.array([-e.offset for e in encs]).astype(qtype(encs[0]))
        if len(encs) == 1:
            scale, zp = scale.reshape(()), zp.reshape(())
        names = self.fresh(f"{base}_scale"), self.fresh(f"{base}_zero_point")
        self.initializers.append(numpy_helper.from_array(scale, names[0]))
        self.initializers.append(numpy_helper.from_array(zp, names[1]))
        return names

    def _domain(self, enc: Encoding) -> str:
        if 8 < enc.bitwidth <= 16:
            self.microsoft = True
            return MS_DOMAIN
        return ""

    def _model(self) -> onnx.ModelProto:
        h = self.helper
        g = self.graph
        graph = h.make_graph(self.nodes, g.name, [_value_info(t) for t in g.inputs
                                                  if t.name not in self.qmodel.model.weights],
                             [_value_info(t) for t in g.outputs], self.initializers,
                             value_info=[_value_info(t) for t in g.values])
        domains = {d for d in self.domains.values() if d}
        domains |= {n.package for n in g.nodes if n.package != DEFAULT_PACKAGE
                    and n.package not in self.domains}
        if self.microsoft:
            domains.add(MS_DOMAIN)
        # the graph's own opset when later (an opset 18 ReduceMean takes its axes as an input)
        opsets = {"": max(OPSET, g.opset), **{d: 1 for d in sorted(domains)}}  # sorted: the
        imports = [h.make_opsetid(d, v) for d, v in opsets.items()]          # same bytes always
        model = h.make_model(graph, producer_name="udo-build", opset_imports=imports)
        model.ir_version = max(IR_VERSION, h.find_min_ir_version_for(imports[:1]))
        return model


def to_qdq(qmodel: QuantizedModel, domains: Mapping[str, str] | None = None) -> onnx.ModelProto:
    """The QDQ ONNX model of `qmodel`; `domains` maps UDO package names to ONNX domains."""
    return _Builder(qmodel, domains or {}).build()


def _reads_scalar(node: Node, name: str) -> bool:
    """Whether `node` reads the tensor `name` as an input that ONNX defines as a scalar."""
    if node.package != DEFAULT_PACKAGE:
        return False
    return any(node.inputs[i] == name for i in SCALAR_INPUTS.get(node.op, ())
               if i < len(node.inputs))


def _attribute(key: str, value: Any) -> Any:
    from onnx import AttributeProto, helper

    if isinstance(value, list) and not value:
        return helper.make_attribute(key, [], attr_type=AttributeProto.INTS)
    if isinstance(value, list) and any(isinstance(v, float) for v in value):
        value = [float(v) for v in value]
    return helper.make_attribute(key, value)


def _value_info(t: TensorInfo) -> Any:
    from onnx import helper

    elem = helper.np_dtype_to_tensor_dtype(np.dtype(t.dtype or "float32"))
    return helper.make_tensor_value_info(t.name, elem, None if t.shape is None
                                         else list(t.shape))


def _onnx_ops() -> set[str]:
    from onnx import defs

    return {s.name for s in defs.get_all_schemas() if s.domain in ("", "ai.onnx")}
