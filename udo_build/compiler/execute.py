"""Runs a prepared graph, to check it against the unprepared model.

    runner = Runner(compiled.graph, compiled.io, "int8", packages)
    outputs = runner.run({"input": x})          # model shapes, dequantized floats
    raw = runner.run({"input": x}, raw=True)    # int8: the quantized integers themselves

The graph is expanded into the kernel calls that implement its ops (`expand.py`) and run by the
float runtime or, for int8, by the integer path (`QuantizedSession`) with the encodings the
record carries (its quantized constants as the integers it stores). Feeds come in the model's
shapes and are backfilled to 4-D; outputs are reshaped back to the model's shapes.

fp16 computes as the device's float16 units do, to within their arithmetic: float constants are
rounded to float16, every op's kernels compute in float32, and each float output of an op is
rounded to float16 when the op ends (`expand.py`). Rounding after each op, rather than numpy
float16 arithmetic throughout, keeps the emulator's float32 kernels (numpy has no fast float16
BLAS or im2col, and float16 accumulation would be a different, worse error than the device's,
which accumulates wider); the error it adds is the device's kind, of order 1e-3 relative.
The internal precision fp32 (soc.target.FLOAT_REFERENCE) runs in float32 throughout.

`evaluate(graph, op, packages)` runs one op on constants (constant propagation).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ir.graph import DEFAULT_PACKAGE
from ..kernels.default import DEFAULT
from ..kernels.oppkg import OpPackage
from ..rewrite.graph import NONE, Op, OpGraph
from .expand import Expander, expand


@dataclass(frozen=True)
class IO:
    """The model-level view of a prepared graph's inputs and outputs."""

    inputs: dict[str, tuple[int, ...]]  # input name -> model shape
    outputs: dict[str, tuple[int, ...]]  # output name -> model shape
    dtypes: dict[str, str] = field(default_factory=dict)  # output -> the model's float type


class Runner:
    def __init__(self, graph: OpGraph, io: IO, precision: str,
                 packages: Mapping[str, OpPackage] | None = None,
                 settings: Mapping[str, Any] | None = None) -> None:
        self.graph = graph
        self.io = io
        self.precision = precision
        self.values = {name: graph.names[vid] for name, vid in graph.outputs}
        model, ex = expand(graph, list(dict.fromkeys(self.values.values())),
                           fp16=precision == "fp16")
        self.model = model
        if precision == "int8":
            from ..ir.qmodel import QuantizedModel
            from ..runtime.integer import QuantizedSession

            qmodel = QuantizedModel(model, ex.activations, ex.params, dict(settings or {}))
            self.session: Any = QuantizedSession(qmodel, packages)
        else:
            from ..runtime.float_session import Session

            self.session = Session(model, packages)
        self.shapes = {graph.names[v]: graph.types[v].shape for v in graph.inputs}

    def run(self, feeds: Mapping[str, np.ndarray], raw: bool = False) -> dict[str, np.ndarray]:
        shaped = {name: np.asarray(x).reshape(self.shapes[name]) for name, x in feeds.items()}
        names = list(dict.fromkeys(self.values.values()))
        run = self.session.run_quantized if raw else self.session.run
        result = run(shaped, names)
        out = {name: result[value].reshape(self.io.outputs[name])
               for name, value in self.values.items()}
        if raw:
            return out
        # a float16 or float64 output of the model comes back in its type, as the model says
        # (the prepared graph computes float tensors in float32 and dequantizes to float32)
        return {name: x.astype(self.io.dtypes[name], copy=False)
                if name in self.io.dtypes and x.dtype.kind == "f" else x
                for name, x in out.items()}


def evaluate(graph: OpGraph, op: Op, packages: Mapping[str, OpPackage]
             ) -> Sequence[np.ndarray] | None:
    """The op's outputs on its constant inputs (None: a kernel that is not available)."""
    ex = Expander(graph)
    ex.emit(op)
    env: dict[str, Any] = dict(ex.out.weights)
    for node in ex.out.nodes:
        package = DEFAULT if node.package == DEFAULT_PACKAGE else packages.get(node.package)
        if package is None:
            return None
        args = [env[i] if i else None for i in node.inputs]
        impl = package.select(node.op, [a.dtype.name for a in args if a is not None])
        kwargs = node.kwargs
        if node.op == "Split":
            kwargs.setdefault("num_outputs", len(node.outputs))
        result = impl.fn(*args, **kwargs)
        values = result if isinstance(result, tuple) else (result,)
        env.update({name: np.asarray(v) for name, v in zip(node.outputs, values, strict=False)
                    if name})
    return [env[ex.name(v)] if v != NONE else None for v in op.outputs]  # type: ignore
