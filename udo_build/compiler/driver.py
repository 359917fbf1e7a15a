"""prepare: a bundle and a target (arch, VTCM, level, input dimensions, outputs, precision)
-> the prepared graph, and its cache record.

    compiled = compile_bundle(bundle, CompileTarget("v73", 8, 2, {}, "default", "int8"))
    data = compiled.record()                  # deterministic bytes
    Runner(compiled.graph, compiled.io, "int8").run({"input": x})

Steps: input dimensions (shape inference when they differ from the model's), outputs, lowering
to the HTP form, the level's passes (passes.py), implementation selection (select.py), memory
planning (memory.py), the record (record.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import StepFailed, UserError
from ..ir.graph import DEFAULT_PACKAGE, Model, TensorInfo, bulk_building, needed_nodes
from ..kernels.oppkg import OpPackage
from ..rewrite.engine import RuleLoopError, Trace
from ..rewrite.graph import OpGraph
from ..rewrite.rules import Rule, qualify
from ..soc.target import FLOAT_REFERENCE, PRECISIONS, CompileTarget
from .execute import IO, Runner
from .lower import lower, resolve_outputs
from .memory import MemoryPlan, plan_memory
from .passes import Context, pipeline, run_passes
from .select import Choice, choose
from .shapes import infer

# 2: float records fold batch norms as the runtime and quantization do (one rule definition:
# weights w * float32(m), the folded op keeps the convolution's layer and names its constants)
# 3: records hold constants as the device does (int8 weights, int32 biases, fp16 floats) and
# fp16 records compute with every op's float outputs rounded to float16
# 4: shapes computed by shape subgraphs are the runtime's (values propagated, not zeros), the
# expansion's Reshapes state exact shapes (allowzero), Concat constants are 4-D, outputs folded
# to weights are constants, nodes with run-time shapes run on the CPU (other subnets)
COMPILER_VERSION = "udo-build htp compiler 4"
LEVELS = (1, 2, 3)


@dataclass
class Compiled:
    target: CompileTarget
    graph: OpGraph
    io: IO
    choices: dict[int, Choice]
    memory: MemoryPlan
    ctx: Context
    dims: dict[str, list[int]]
    output_tensors: list[str]
    settings: dict[str, Any]
    notes: list[str]

    def key(self) -> dict[str, Any]:
        t = self.target
        dims = ",".join(f"{k}={'x'.join(map(str, v))}" for k, v in self.dims.items())
        name = "/".join([self.graph.name, t.arch, f"{_mb(t.vtcm_mb)}MB",
                         f"O{t.optimization_level}", dims, ",".join(self.output_tensors),
                         t.precision])
        return {"name": name, "identifier": self.graph.name, "arch": t.arch,
                "vtcm_mb": _mb(t.vtcm_mb), "optimization_level": t.optimization_level,
                "input_dimensions": self.dims, "outputs": {"tensors": self.output_tensors},
                "output_tensors": self.output_tensors, "precision": t.precision,
                "compiler": COMPILER_VERSION}

    def record(self, mapped: bool = False) -> Any:
        """The record's bytes; with `mapped`, in a temporary file, mapped (record.py
        pack_record_mapped: what an online preparation of a large model reads)."""
        with bulk_building():  # many small acyclic objects
            return self._record(mapped)

    def write_record(self, path: Path) -> int:
        """The record's bytes written to the file `path`, never held in memory (a large
        model's record: hundreds of MB); their count."""
        from .record import write_record_to

        with bulk_building(), open(path, "wb") as out:
            return write_record_to(out, *self._parts())

    def _record(self, mapped: bool) -> Any:
        from .record import write_record

        return write_record(*self._parts(), mapped)

    def _parts(self) -> tuple[dict[str, Any], OpGraph, dict[str, Any], dict[str, Any]]:
        """The record's key, graph, payload body and sizes (record.write_record's)."""
        body = {"ops": {i: c.to_json() for i, c in self.choices.items()},
                "tensors": {v: vars(p) for v, p in self.memory.tensors.items()},
                "memory": self.memory.summary(), "notes": self.notes,
                "io": {"inputs": self.io.inputs, "outputs": self.io.outputs,
                       "dtypes": self.io.dtypes},
                "quantization": self.settings,
                "log": {"passes": self.ctx.log, "rules": self.ctx.trace.counts()}}
        sizes = {"ops": len(self.graph.ops), "constants": len(self.graph.consts),
                 "peak_vtcm_bytes": self.memory.peak}
        return self.key(), self.graph, body, sizes


def _mb(value: float) -> float | int:
    number = float(value)
    return int(number) if number.is_integer() else number


def user_rules(packages: Mapping[str, OpPackage]) -> list[Rule]:
    """The rules the op packages registered, their op names qualified."""
    out = []
    for name, package in sorted(packages.items()):
        for rule in package.rules():
            out.append(qualify(rule, name, package.ops()))
    return out


def compile_bundle(bundle: Any, target: CompileTarget,
                   packages: Mapping[str, OpPackage] | None = None,
                   trace: Trace | None = None,
                   progress: Callable[[int, int], None] | None = None) -> Compiled:
    """The record of `bundle` for `target`; `progress` hears (passes done, passes) as the
    rule passes run (the long part on a large graph)."""
    with bulk_building():  # many small acyclic objects
        return _compile(bundle, target, packages, trace, progress)


def _compile(bundle: Any, target: CompileTarget, packages: Mapping[str, OpPackage] | None,
             trace: Trace | None, progress: Callable[[int, int], None] | None) -> Compiled:
    _check(target)
    packages = dict(packages or {})
    qmodel = None
    if target.precision == "int8":
        from ..ir.qmodel import from_bundle

        qmodel = from_bundle(bundle)
    model: Model = bundle.model
    dims, infos, notes, dynamic = input_shapes(model, target.input_dimensions, packages)
    requested = resolve_outputs(model, target.outputs)
    _check_static(model, requested, dynamic)
    lowered = lower(model, infos, requested, qmodel)
    ctx = Context(target.optimization_level, target.precision, target.vtcm_bytes,
                  target.budget, packages, trace or Trace())
    try:
        graph = run_passes(lowered.graph, pipeline(user_rules(packages),
                                                   target.optimization_level), ctx,
                           progress)
    except RuleLoopError as exc:
        if any(p != DEFAULT_PACKAGE for p in exc.packages):
            raise StepFailed("prepare", f"{exc} (rules of {', '.join(exc.packages)})") from None
        raise
    io = IO(lowered.inputs, lowered.outputs, _float_types(model, infos, lowered.outputs))
    settings = dict(qmodel.settings) if qmodel is not None else {}
    qplan = _integer_plan(graph, io, packages, settings) if qmodel is not None else None
    return Compiled(target, graph, io, choose(graph, packages, qplan),
                    plan_memory(graph, target.vtcm_bytes), ctx, dims,
                    requested, settings, notes + lowered.notes)


def _float_types(model: Model, infos: Mapping[str, TensorInfo],
                 outputs: Mapping[str, Any]) -> dict[str, str]:
    """The outputs the model declares float16 or float64: the runner returns them so."""
    found = {}
    for name in outputs:
        info = infos.get(name)
        dtype = str(model.weights[name].dtype) if name in model.weights else (
            info.dtype if info is not None else "")
        if dtype in ("float16", "float64"):
            found[name] = dtype
    return found


def _check(target: CompileTarget) -> None:
    if target.optimization_level not in LEVELS:
        raise UserError(f"optimization level {target.optimization_level} is not one of 1, 2, 3",
                        field="optimization_level")
    if target.precision not in (*PRECISIONS, FLOAT_REFERENCE):
        raise UserError(f"precision {target.precision!r} is not int8 or fp16",
                        field="precision")
    if not target.vtcm_mb or float(target.vtcm_mb) <= 0:
        raise UserError(f"VTCM size {target.vtcm_mb!r} is not a positive number of MB",
                        field="vtcm_mb")


def input_shapes(model: Model, given: Mapping[str, Sequence[int]],
                 packages: Mapping[str, OpPackage]
                 ) -> tuple[dict[str, list[int]], dict[str, TensorInfo], list[str],
                            dict[str, str]]:
    """(the effective input dimensions, every tensor's info, notes, the tensors whose shapes
    depend on values known only at run time -> why: their infos have no shape)."""
    graph = model.graph
    inputs = {t.name: t for t in graph.inputs if t.name not in model.weights}
    for name, dims in given.items():
        if name not in inputs:
            raise UserError(f"input_dimensions names {name!r}, which is not an input of the "
                            "model", field="input_dimensions",
                            hint="its inputs: " + ", ".join(inputs))
        if inputs[name].shape is not None and len(dims) != len(inputs[name].shape):
            raise UserError(f"input {name!r} has rank {len(inputs[name].shape)}, "
                            f"input_dimensions gives {list(dims)}", field="input_dimensions")
    shapes = {}
    for name, info in inputs.items():
        dims = given.get(name, info.static_shape)
        if dims is None:
            raise UserError(f"input {name!r} has no fixed shape ({info.shape})",
                            field="input_dimensions", hint="give its dimensions")
        shapes[name] = [int(d) for d in dims]
    own = all(tuple(shapes[n]) == i.static_shape for n, i in inputs.items())
    infos = graph.infos()
    known = all(o in infos and infos[o].static_shape is not None
                for n in graph.nodes for o in n.outputs if o)
    if own and known:
        return shapes, infos, [], {}
    result = infer(model, shapes, packages)
    notes = [f"custom op {op} assumed shape-preserving at the new input dimensions"
             for op in dict.fromkeys(result.assumed)]
    return shapes, result.infos, notes, result.dynamic


def _check_static(model: Model, requested: Sequence[str], dynamic: Mapping[str, str]) -> None:
    """A UserError when a tensor the record computes has a shape known only at run time: a
    record fixes every shape when it is prepared."""
    for node in needed_nodes(model.graph.nodes, requested):
        for name in node.outputs:
            if name in dynamic:
                raise UserError(
                    f"tensor {name!r} (output of node {node.name}, {node.op}) has a shape "
                    f"known only at run time: {dynamic[name]}; an HTP record with shapes that "
                    "depend on run-time values is not supported",
                    field=name, hint="make the tensors that decide shapes constants of the "
                    "model (initializers), or run this part on the CPU runtime")


def _integer_plan(graph: OpGraph, io: IO, packages: Mapping[str, OpPackage],
                  settings: Mapping[str, Any]) -> Any:
    """The integer path's plan of the prepared graph (which kernel runs each op)."""
    stand_ins = {op.package: _stand_in(op.package, graph) for op in graph.ops.values()
                 if op.package != DEFAULT_PACKAGE and op.package not in packages}
    from ..runtime.integer.session import release_freed_memory

    runner = Runner(graph, io, "int8", {**packages, **stand_ins}, settings)
    plan = runner.session.plan(tuple(dict.fromkeys(runner.values.values())))
    kernels = _kernels_only(plan)
    del runner, plan  # its quantized weights: what the record is written beside needs none
    release_freed_memory()
    return kernels


@dataclass(frozen=True)
class _StepKind:
    label: str  # as the integer plan's step has it: "<kernel> (node op<id>)"
    integer: bool  # an integer kernel (else a float kernel between dequantize and quantize)


@dataclass(frozen=True)
class _Kernels:
    """What `choose` reads of an integer plan: each step's label and kind, without the
    constants the plan holds (every weight quantized, some dequantized)."""

    steps: tuple[_StepKind, ...]


def _kernels_only(plan: Any) -> _Kernels:
    return _Kernels(tuple(_StepKind(step.label, step.integer) for step in plan.steps))


def _stand_in(name: str, graph: OpGraph) -> OpPackage:
    """A package whose kernels say they are not available (prepare never runs them)."""
    package = OpPackage(name)
    for op in sorted({o.op for o in graph.ops.values() if o.package == name}):
        def missing(*args: Any, _op: str = op, **kwargs: Any) -> Any:
            raise RuntimeError(f"the kernels of {name}::{_op} are not available at prepare")
        package.op(op)(missing)
    return package
