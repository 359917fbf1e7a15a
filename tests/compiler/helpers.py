"""Small models for the compiler's tests, and the oracle: a prepared graph's outputs against the
unprepared model's (the float runtime within 1e-5 relative to the output's magnitude; the
integer path bit for bit). Float preparations default to the internal precision fp32, which
tests the compiler's rewrites; fp16's own rounding is tested apart (test_precision.py)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from udo_build.compiler import Compiled, CompileTarget, Runner, Trace, compile_bundle
from udo_build.compiler.shapes import infer
from udo_build.ir import Graph, Model, Node, TensorInfo
from udo_build.ir.bundle import Bundle
from udo_build.kernels.oppkg import OpPackage
from udo_build.runtime.float_session import Session

REPO = Path(__file__).resolve().parents[2]
SOFTPLUS = REPO / "examples" / "softplus"
rng = np.random.default_rng(20261121)


def w(*shape: int, scale: float = 0.5, low: float | None = None) -> np.ndarray:
    if low is not None:
        return rng.uniform(low, low + 1, shape).astype(np.float32)
    return (rng.standard_normal(shape) * scale).astype(np.float32)


@dataclass
class G:
    """A model under construction: nodes named after their outputs."""

    nodes: list[Node] = field(default_factory=list)
    weights: dict[str, np.ndarray] = field(default_factory=dict)

    def const(self, name: str, array: np.ndarray) -> str:
        self.weights[name] = np.asarray(array)
        return name

    def op(self, op: str, *inputs: str, out: str, package: str = "default",
           outputs: Sequence[str] = (), **attrs: Any) -> str:
        self.nodes.append(Node.make(out, op, inputs, [out, *outputs], attrs, package))
        return out

    def conv(self, x: str, cin: int, cout: int, out: str, k: int = 3, bias: bool = True,
             **attrs: Any) -> str:
        cin //= int(attrs.get("group", 1))  # type: ignore[call-overload]
        wname = self.const(f"{out}.w", w(cout, cin, k, k, scale=1 / np.sqrt(cin * k * k)))
        ins = [x, wname] + ([self.const(f"{out}.b", w(cout, scale=0.1))] if bias else [])
        pads = [k // 2] * 4
        return self.op("Conv", *ins, out=out, kernel_shape=[k, k], pads=pads, **attrs)

    def bn(self, x: str, c: int, out: str) -> str:
        names = [self.const(f"{out}.{s}", v) for s, v in (
            ("s", w(c, low=0.5)), ("b", w(c)), ("m", w(c)), ("v", w(c, low=0.5)))]
        return self.op("BatchNormalization", x, *names, out=out, epsilon=1e-3)

    def model(self, inputs: Mapping[str, Sequence[int]], outputs: Sequence[str],
              packages: Mapping[str, OpPackage] | None = None, name: str = "net") -> Model:
        ins = tuple(TensorInfo(n, "float32", tuple(s)) for n, s in inputs.items())
        bare = Model(Graph(name, ins, (), tuple(self.nodes)), dict(self.weights))
        infos = infer(bare, inputs, packages).infos
        values = tuple(i for n, i in sorted(infos.items())
                       if n not in self.weights and n not in inputs and n not in outputs)
        return Model(Graph(name, ins, tuple(infos[o] for o in outputs), tuple(self.nodes),
                           values), dict(self.weights))


def feeds(model: Model, shapes: Mapping[str, Sequence[int]] | None = None,
          seed: int = 0) -> dict[str, np.ndarray]:
    r = np.random.default_rng(seed)
    return {t.name: r.standard_normal(tuple((shapes or {}).get(t.name, t.shape))).astype(
        np.float32) for t in model.graph.inputs if t.name not in model.weights}


def prepare(model_or_bundle: Model | Bundle, level: int = 2, vtcm_mb: float = 8,
            outputs: Any = "default", dims: Mapping[str, Sequence[int]] | None = None,
            precision: str = "fp32", packages: Mapping[str, OpPackage] | None = None,
            why: Sequence[str] = ()) -> Compiled:
    bundle = model_or_bundle if isinstance(model_or_bundle, Bundle) \
        else Bundle(model_or_bundle, None, {})
    target = CompileTarget("v73", vtcm_mb, level, dict(dims or {}), outputs, precision)
    return compile_bundle(bundle, target, packages, Trace(why=frozenset(why)))


def fired(compiled: Compiled, rule: str) -> int:
    return sum(n for (_, r), n in compiled.ctx.trace.fired.items() if r == rule)


def reshaped(model: Model, compiled: Compiled,
             packages: Mapping[str, OpPackage] | None = None) -> Model:
    """The unprepared model at the compiled input dimensions (its shapes inferred again)."""
    infos = infer(model, compiled.dims, packages).infos
    graph = model.graph
    return Model(replace(graph, inputs=tuple(infos.get(t.name, t) for t in graph.inputs),
                         outputs=tuple(infos[t.name] for t in graph.outputs),
                         values=tuple(infos[t.name] for t in graph.values if t.name in infos)),
                 model.weights)


def check_float(model: Model, compiled: Compiled, packages: Mapping[str, OpPackage] | None = None,
                tol: float = 1e-5, seed: int = 0) -> dict[str, np.ndarray]:
    """The prepared graph's outputs equal the unprepared model's within `tol` relative."""
    x = feeds(model, compiled.dims, seed)
    names = list(compiled.io.outputs)
    want = Session(reshaped(model, compiled, packages), packages).run(x, names)
    got = Runner(compiled.graph, compiled.io, compiled.target.precision, packages).run(x)
    for name in names:
        scale = max(float(np.abs(want[name]).max()), 1e-6)
        assert got[name].shape == want[name].shape, name
        assert np.abs(got[name] - want[name]).max() <= tol * scale, name
    return got


def quantized(model: Model, packages: Mapping[str, OpPackage] | None = None,
              opdefs: Any = None) -> Bundle:
    from udo_build.ir.qmodel import to_bundle
    from udo_build.quant.pipeline import quantize_model

    samples = [feeds(model, seed=s) for s in range(3)]
    q = quantize_model(model, packages or {}, samples, {"per_channel": True, "quantizer": "tf"})
    return to_bundle(q, opdefs, {})


def check_int8(bundle: Bundle, compiled: Compiled,
               packages: Mapping[str, OpPackage] | None = None, seed: int = 0) -> None:
    """The prepared int8 graph's integers equal the integer path's on the unprepared model."""
    from udo_build.ir.qmodel import from_bundle
    from udo_build.runtime.integer import QuantizedSession

    qmodel = from_bundle(bundle)
    qmodel = replace(qmodel, model=reshaped(qmodel.model, compiled, packages))
    x = feeds(qmodel.model, seed=seed)
    got = Runner(compiled.graph, compiled.io, "int8", packages, compiled.settings).run(x, raw=True)
    want = QuantizedSession(qmodel, packages).run_quantized(x, list(got))
    for name, value in got.items():
        assert value.dtype == want[name].dtype, name
        assert np.array_equal(value, want[name].reshape(value.shape)), name


def softplus_bundle() -> tuple[Bundle, dict[str, OpPackage]]:
    from udo_build.errors import Diagnostics
    from udo_build.kernels.load import load_kernels
    from udo_build.model.onnx_import import import_onnx, load_onnx
    from udo_build.opdef import recipe_package

    ops = SOFTPLUS / "ops"
    opdefs = recipe_package(None, None, None, [ops / "softplus.xml", ops / "swish.json"],
                            Diagnostics())
    model = import_onnx(load_onnx(SOFTPLUS / "model" / "net.onnx"), opdefs=opdefs)
    packages = {"SoftplusPackage": load_kernels(ops / "kernels.py")[0]}
    return Bundle(model, opdefs.to_json(), {}), packages
