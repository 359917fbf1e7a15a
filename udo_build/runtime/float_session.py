"""The emulator's float runtime: runs a `Model` with the default package and the UDO packages.

    session = Session(model, {"SoftplusPackage": package})
    outputs = session.run({"input": x})                    # the graph outputs
    outputs = session.run({"input": x}, ["logits", "t7"])  # any tensors
    for name, value in session.stream({"input": x}, ["t3", "t7"]):  # each as it is made
        ...

At load, the session checks that every tensor a node reads is produced before it, selects each
node's implementation once (by package, op and input dtypes; the default package is always
there, UDO packages come by name) and builds the execution plan of the graph outputs.

An execution plan, as onnxruntime builds one at session creation, may differ from the graph
without changing its results beyond float32 rounding (`udo_build.runtime.fusion`, rules run by
the one rewrite engine, `udo_build.rewrite`): default-package
nodes on constants run once at load (constant folding); batch norms and per-channel Mul/Add by
constants fold into the convolution that feeds them (or into a batch norm); a residual Add and a
Relu that follow a convolution run in place on its output (one FusedConv step); nodes that no
requested tensor needs are dropped. A tensor a caller requests is never fused away: each
distinct set of requested outputs gets its own plan (cached). The Model is never changed.
Convolutions stay NCHW. One whose weights are a constant has them packed for the compiled
kernel once (`udo_build.kernels.default.conv.ConvWeights`: a second copy of its weights, in the
kernel's order, as onnxruntime keeps one): when a plan is built, where its input shape is
static, else on its first run (and the plan built while loading always on its first run), and
writes its output into a dead tensor of its shape where one waits (`udo_build.runtime.buffers`:
fresh pages cost a tenth of a ResNet-50 run; a session holds at most its own dead tensors
between runs, never one a caller can still see). A model that streams its weights keeps no
packing: each convolution packs its weights as it runs (they are read from their file at every
run anyway).

A plan frees every intermediate tensor right after its last reader (reference counts computed
when the plan is built; requested outputs and weights are kept), so the peak memory is that of
the widest cut of the graph. Weights and feeds reach kernels as read-only views, and a UDO
kernel gets all its inputs read-only: a kernel writing into its inputs fails instead of
corrupting them. The arrays `run` returns are the caller's (copies where they would share
memory with weights, feeds or each other's buffers). `stream` runs the same plan and hands each
requested tensor over (read-only) as its step makes it, then frees it after its last reader as
any intermediate: a caller that takes what it needs of each (calibration's statistics, the
quant report's sums) holds the widest cut, not every requested tensor. A model that streams
its weights (udo_build.ir.weights: memory maps of their files) has the pages each step read
given back after it, so a run holds one weight's pages at a time.

Errors: bad feeds are a `UserError` naming the input (expected vs given dtype or shape). A UDO
kernel that raises is the user's step failing: `StepFailed("run", "<package>::<op> (node <name>)
raised <Type>: <message>")`, and so is a UDO kernel returning too few outputs, or a dtype or
shape the model contradicts. A default-package kernel that raises is a `KernelError` naming the
node, unless it raised NotImplementedError: a variant the package does not emulate, a
`UserError` saying "<package>::<op> (node <name>): not supported: <what>" (a kernel's own
UserError is told the same way, at its node). A node whose
implementation is missing fails the load with the package's `OpPackageError`, listing what
exists.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import Any, Generic, TypeVar

import numpy as np

from ..errors import StepFailed, UserError
from ..ir.graph import DEFAULT_PACKAGE, Model, Node, TensorInfo
from ..ir.weights import release, streams
from ..kernels.default import DEFAULT
from ..kernels.default.conv import ConvWeights, fused_conv, pack_for
from ..kernels.default.pool import lent_max_pool
from ..kernels.oppkg import Flags, Impl, OpPackage, OpPackageError
from ..rewrite.graph import UNKNOWN, TType
from .addend import addend_in_place
from .buffers import Buffers
from .concat import concat_in_place
from .fusion import CONVS, fold_constants, fuse


class KernelError(RuntimeError):
    """A default-package kernel raised (a bug of udo-build, or a model it cannot run)."""


@dataclass(frozen=True)
class Step:
    fn: Callable[..., Any]
    inputs: tuple[str, ...]  # "" for an omitted optional input
    outputs: tuple[str, ...]  # "" for an omitted optional output
    kwargs: dict[str, Any]
    label: str  # package::op (node name)
    user: bool  # a UDO kernel: its failures are the user's
    frees: tuple[str, ...]  # tensors dead after this step


@dataclass(frozen=True)
class Plan:
    steps: tuple[Step, ...]
    constants: dict[str, np.ndarray]
    outputs: tuple[str, ...]
    feeds: frozenset[str]  # the graph inputs this plan reads
    rules: tuple[str, ...]  # the fusion rules applied, in order


PlanT = TypeVar("PlanT")


class LoadedModel(Generic[PlanT]):
    """What both runtimes (float and integer) check and select when they load a model: the op
    packages by name (the default package always), that every tensor a node reads is made
    before it, and each node's implementation by its input dtypes; and their execution plans,
    built once per set of outputs (by `_build`, each runtime its own kind of plan)."""

    def __init__(self, model: Model, packages: Mapping[str, OpPackage] | None) -> None:
        self.graph = model.graph
        self.packages: dict[str, OpPackage] = {DEFAULT_PACKAGE: DEFAULT}
        for name, package in (packages or {}).items():
            if name == DEFAULT_PACKAGE:
                raise OpPackageError("a UDO op package cannot be named 'default'")
            self.packages[name] = package
        self._infos = self.graph.infos()
        self._weights = dict(model.weights)  # a streaming model's: maps (udo_build.ir.weights)
        self._streams = streams(self._weights)
        self._inputs = {t.name: t for t in self.graph.inputs if t.name not in self._weights}
        self._plans: dict[tuple[str, ...], PlanT] = {}
        self._check_wiring()

    def _load_plan(self) -> None:
        """Build the graph outputs' plan as the model loads. It packs its convolutions' weights
        on its first run (a session used only for other plans holds no packing of it); a plan
        built later packs them as it is built (`_pack_now`), where the input shapes are known,
        so that workers forked after it share them."""
        self._pack_now = False
        self.plan(tuple(t.name for t in self.graph.outputs))
        self._pack_now = True

    def plan(self, outputs: Sequence[str]) -> PlanT:
        """The execution plan that yields these tensors (built once per set of outputs)."""
        key = tuple(outputs)
        if key not in self._plans:
            for name in key:
                if name not in self._known:
                    raise UserError(f"the model has no tensor {name!r} to output",
                                    hint="request a graph input, a weight or a node's output")
            self._plans[key] = self._build(key)
        return self._plans[key]

    def _build(self, outputs: tuple[str, ...]) -> PlanT:
        raise NotImplementedError

    def _check_wiring(self) -> None:
        known = set(self._inputs) | set(self._weights)
        names = set()
        for node in self.graph.nodes:
            if node.name in names:
                raise UserError(f"the model has two nodes named {node.name!r}")
            names.add(node.name)
            for name in node.inputs:
                if name and name not in known:
                    raise UserError(f"node {node.name!r} ({node.op}) reads {name!r}, which no "
                                    "earlier node, graph input or weight provides")
            known.update(o for o in node.outputs if o)
        self._known = known

    def _dtype(self, name: str) -> str:
        if name in self._weights:
            return str(self._weights[name].dtype)
        info = self._infos.get(name)
        return info.dtype if info is not None else ""

    def _select(self, node: Node) -> Impl:
        package = self.packages.get(node.package)
        if package is None:
            raise OpPackageError(
                f"node {node.name!r} uses {node.package}::{node.op}, but the session has no op "
                f"package {node.package!r}; it has: {', '.join(sorted(self.packages))}")
        return package.select(node.op, [self._dtype(i) for i in node.inputs if i])


class Session(LoadedModel[Plan]):
    def __init__(self, model: Model, packages: Mapping[str, OpPackage] | None = None) -> None:
        super().__init__(model, packages)
        self.model = model
        self._impls = {node.name: self._select(node) for node in self.graph.nodes}
        self._buffers = Buffers()
        self._load_plan()

    def _build(self, outputs: tuple[str, ...]) -> Plan:
        nodes, folded = fold_constants(self.graph.nodes, self._weights, self._evaluate)
        constants = {**self._weights, **folded}
        nodes, used, rules = fuse(nodes, constants, outputs, tensor_types(self._infos))
        constants.update(used)
        needed = _needed(nodes, outputs)
        nodes = [n for n in nodes if any(o in needed for o in n.outputs)]
        last: dict[str, int] = {}
        for i, node in enumerate(nodes):
            for name in node.inputs:
                last[name] = i
        keep = set(outputs) | set(constants)
        steps = []
        for i, node in enumerate(nodes):
            dead = [n for n in dict.fromkeys(node.inputs) if n and last.get(n) == i]
            dead += [o for o in node.outputs if o and o not in last]
            steps.append(self._step(node, tuple(n for n in dead if n not in keep)))
        feeds = frozenset(name for name in self._inputs if name in needed)
        constants = {name: _read_only(value) for name, value in constants.items()}
        if not self._streams:
            steps = [_with_packed(step, node, constants, self._buffers, self._infos,
                                  self._pack_now)
                     for step, node in zip(steps, nodes, strict=True)]
            steps = concat_in_place(steps, nodes, outputs, self._infos, self._buffers)
            steps = addend_in_place(steps, outputs)
        return Plan(tuple(steps), constants, outputs, feeds, tuple(rules))

    def _evaluate(self, node: Node, inputs: list[np.ndarray | None]) -> tuple | None:
        """A node's outputs on constant inputs, at load (None: INHIBIT_CONST_PROP says no)."""
        if self._impls[node.name].flags & Flags.INHIBIT_CONST_PROP:
            return None
        step = self._step(node, ())
        try:
            result = step.fn(*inputs, **step.kwargs)
        except Exception as error:
            raise _failure(step, error) from error
        return result if isinstance(result, tuple) else (result,)

    def _step(self, node: Node, frees: tuple[str, ...]) -> Step:
        impl = self._impls.get(node.name)
        if impl is None or impl.op != node.op:  # a node the plan made
            impl = self.packages[node.package].select(
                node.op, [self._dtype(i) for i in node.inputs if i])
        kwargs = node.kwargs
        if "num_outputs" not in kwargs and _takes_num_outputs(impl.fn):
            kwargs["num_outputs"] = len(node.outputs)
        return Step(impl.fn, node.inputs, node.outputs, kwargs,
                    f"{node.package}::{node.op} (node {node.name})",
                    node.package != DEFAULT_PACKAGE, frees)

    # -- run -------------------------------------------------------------------------------------

    def run(self, feeds: Mapping[str, np.ndarray],
            outputs: Sequence[str] | None = None) -> dict[str, np.ndarray]:
        """The requested tensors (default: the graph outputs) for these inputs."""
        plan = self.plan(tuple(outputs) if outputs is not None
                         else tuple(t.name for t in self.graph.outputs))
        env = self._start(plan, feeds)
        buffers = self._buffers
        for step in plan.steps:
            self._run_step(plan, step, env)
            for name in step.frees:
                buffers.give(env.pop(name))
        return {name: _detached(env[name]) for name in plan.outputs}

    def stream(self, feeds: Mapping[str, np.ndarray],
               outputs: Sequence[str]) -> Iterator[tuple[str, np.ndarray]]:
        """(name, value) of each requested tensor as it is made (those there before the first
        step, feeds and constants, first), the values `run` gives for the same outputs (the
        same plan), read-only. Each is freed once no later step reads it: the caller takes
        what it needs before asking for the next, and memory stays that of the widest cut."""
        plan = self.plan(tuple(outputs))
        env = self._start(plan, feeds)
        wanted = set(plan.outputs)
        for name in dict.fromkeys(plan.outputs):
            if name in env:
                yield name, _read_only(env[name])
        for step, dead in zip(plan.steps, streamed_frees(plan.steps, plan.outputs,
                                                          plan.constants), strict=True):
            self._run_step(plan, step, env)
            for name in step.outputs:
                if name in wanted:
                    yield name, _read_only(env[name])
            for name in dead:
                self._buffers.give(env.pop(name))

    def _start(self, plan: Plan, feeds: Mapping[str, np.ndarray]) -> dict[str, Any]:
        env: dict[str, Any] = dict(plan.constants)
        env.update(self._check_feeds(feeds, plan.feeds))
        return env

    def _run_step(self, plan: Plan, step: Step, env: dict[str, Any]) -> None:
        """One step: its outputs into `env` (nothing freed)."""
        args = [env[name] if name else None for name in step.inputs]
        if step.user:  # the user's kernel sees read-only inputs: it cannot corrupt them
            args = [_read_only(a) if isinstance(a, np.ndarray) else a for a in args]
        try:
            result = step.fn(*args, **step.kwargs)
        except Exception as error:
            raise _failure(step, error) from error
        if len(step.outputs) == 1 and not step.user and not isinstance(result, tuple):
            env[step.outputs[0]] = result
        else:
            self._store(step, result, env)
        result = args = None  # type: ignore[assignment]  (hold nothing past its last use)
        if self._streams:  # the weights it read: no longer resident
            release(*(plan.constants[n] for n in step.inputs if n in plan.constants))

    def _check_feeds(self, feeds: Mapping[str, np.ndarray],
                     needed: frozenset[str]) -> dict[str, np.ndarray]:
        """The feeds, checked against the graph inputs (only those the plan reads are due)."""
        unknown = [name for name in feeds if name not in self._inputs]
        if unknown:
            raise UserError(f"unknown input {unknown[0]!r}; the model's inputs are: "
                            + ", ".join(_describe(t) for t in self._inputs.values()))
        missing = [t for name, t in self._inputs.items() if name in needed and name not in feeds]
        if missing:
            raise UserError(f"missing input {_describe(missing[0])}")
        checked = {}
        for name, value in feeds.items():
            info = self._inputs[name]
            array = np.asarray(value)
            if info.dtype and array.dtype != np.dtype(info.dtype):
                raise UserError(f"input {name!r}: expected {info.dtype}, given {array.dtype}",
                                hint=f"convert it, e.g. x.astype(np.{info.dtype})")
            if info.shape is not None and not _fits(array.shape, info.shape):
                raise UserError(f"input {name!r}: expected shape {_shape_text(info.shape)}, "
                                f"given {list(array.shape)}")
            checked[name] = _read_only(array)
        return checked

    def _store(self, step: Step, result: Any, env: dict[str, Any]) -> None:
        values = result if isinstance(result, tuple) else (result,)
        named = [(i, o) for i, o in enumerate(step.outputs) if o]
        if named and named[-1][0] >= len(values):
            raise _failure(step, ValueError(
                f"returned {len(values)} output(s), the node has {len(step.outputs)}"))
        for i, name in named:
            env[name] = self._check_user_output(step, name, values[i]) if step.user \
                else values[i]

    def _check_user_output(self, step: Step, name: str, value: Any) -> np.ndarray:
        return check_user_output(step, name, value, self._infos)


def _with_packed(step: Step, node: Node, constants: Mapping[str, np.ndarray],
                 buffers: Buffers, infos: Mapping[str, TensorInfo], now: bool) -> Step:
    """A default-package MaxPool of a static float32 shape takes its output from the session's
    dead tensors where one of its shape waits. A default-package convolution whose weights are
    a constant keeps their packings for the compiled kernel (`ConvWeights`) from one run to the
    next, and takes its output from the session's dead tensors where one of its shape waits (a
    static shape): its step calls FusedConv's kernel (a Conv is one without addend or
    activation) with them. The packing is made on the first run, or `now` where the input's
    shape is static: a plan built for forked workers (calibration, quant reports) is packed
    once, in the process that forks them, and its pages are shared."""
    if node.package == DEFAULT_PACKAGE and node.op == "MaxPool" and len(node.outputs) == 1:
        info = infos.get(node.outputs[0])
        if info is None or info.static_shape is None or info.dtype != "float32":
            return step
        buffers.want(info.static_shape, info.dtype)
        return dataclasses.replace(step, fn=functools.partial(lent_max_pool, buffers=buffers))
    if (node.package != DEFAULT_PACKAGE or node.op not in CONVS or len(node.inputs) < 2
            or node.inputs[1] not in constants):
        return step
    packed = ConvWeights(constants[node.inputs[1]], buffers)
    info = infos.get(node.outputs[0])
    shape = info.static_shape if info is not None else None
    if shape is not None and info.dtype:
        buffers.want(shape, info.dtype)
    source = infos.get(node.inputs[0])
    image = source.static_shape if source is not None else None
    if now and image is not None:
        pack_for(packed, image[1:], **node.kwargs)
    return dataclasses.replace(step, fn=fused_conv, kwargs={**step.kwargs, "packed": packed})


def streamed_frees(steps: Sequence[Any], outputs: Sequence[str],
                   constants: Mapping[str, Any]) -> list[tuple[str, ...]]:
    """Per step (anything with `inputs`, `outputs`, `frees`), what a streaming run frees after
    it: its `frees`, and the requested tensors (not constants) no later step reads, which a
    plain run keeps to return."""
    last: dict[str, int] = {}
    for i, step in enumerate(steps):
        for name in step.inputs:
            last[name] = i
        for name in step.outputs:
            last.setdefault(name, i)
    dropped: list[list[str]] = [[] for _ in steps]
    for name in dict.fromkeys(outputs):
        if name in last and name not in constants:
            dropped[last[name]].append(name)
    return [(*step.frees, *(n for n in more if n not in step.frees))
            for step, more in zip(steps, dropped, strict=True)]


def tensor_types(infos: Mapping[str, TensorInfo]) -> dict[str, TType]:
    """The model's tensors as rewrite types (a shape not known statically is UNKNOWN)."""
    types = {}
    for name, info in infos.items():
        shape = info.static_shape
        types[name] = TType(UNKNOWN if shape is None else shape, info.dtype)
    return types


def check_user_output(step: Any, name: str, value: Any,
                      infos: Mapping[str, TensorInfo]) -> np.ndarray:
    """A UDO kernel's output as an array; a dtype or shape the model contradicts is the user's
    step failing."""
    array = np.asarray(value)
    info = infos.get(name)
    if info is None:
        return array
    if info.dtype and array.dtype != np.dtype(info.dtype):
        raise _failure(step, TypeError(
            f"output {name!r} is {array.dtype}, the model says {info.dtype}"))
    if info.shape is not None and not _fits(array.shape, info.shape):
        raise _failure(step, ValueError(
            f"output {name!r} has shape {list(array.shape)}, the model says "
            f"{_shape_text(info.shape)}"))
    return array


def _read_only(array: np.ndarray) -> np.ndarray:
    """A read-only view: a kernel writing into a weight, a feed or (for UDO kernels) any input
    fails instead of corrupting it."""
    view = np.asarray(array).view()  # a kernel may return a numpy scalar
    view.flags.writeable = False
    return view


def _detached(value: Any) -> np.ndarray:
    """An output the caller owns: writeable, sharing no memory with weights or feeds."""
    array = np.asarray(value)
    return array if array.flags.writeable and array.flags.owndata else array.copy()


def _failure(step: Any, error: BaseException) -> Exception:
    """What a kernel raising is: the user's step failing (a UDO kernel), a variant the default
    package does not emulate (its kernel raised NotImplementedError: a UserError), the model
    asking what its op cannot be (a default kernel's UserError, told at its node), or a bug."""
    message = f"{step.label} raised {type(error).__name__}: {error}"
    if step.user:
        return StepFailed("run", message)
    if isinstance(error, NotImplementedError):
        return UserError(f"{step.label}: not supported: {error}",
                         hint="the emulator's default package does not run this variant")
    if isinstance(error, UserError):
        first = error.problems[0]
        return UserError(f"{step.label}: {first.message}", hint=first.hint)
    return KernelError(message)


def _needed(nodes: Sequence[Node], outputs: Sequence[str]) -> set[str]:
    """Every tensor the outputs depend on (nodes that feed nothing requested are skipped)."""
    needed = set(outputs)
    for node in reversed(nodes):
        if any(o in needed for o in node.outputs):
            needed.update(i for i in node.inputs if i)
    return needed


@cache
def _takes_num_outputs(fn: Callable[..., Any]) -> bool:
    try:
        parameter = inspect.signature(fn).parameters.get("num_outputs")
    except (TypeError, ValueError):
        return False
    return parameter is not None and parameter.kind == inspect.Parameter.KEYWORD_ONLY


def _fits(shape: tuple[int, ...], expected: tuple[int | str, ...]) -> bool:
    return len(shape) == len(expected) and all(
        not isinstance(e, int) or e < 0 or e == s for s, e in zip(shape, expected, strict=True))


def _shape_text(shape: tuple[int | str, ...]) -> str:
    return "[" + ", ".join(str(d) for d in shape) + "]"


def _describe(info: TensorInfo) -> str:
    shape = "?" if info.shape is None else "x".join(str(d) for d in info.shape)
    return f"{info.name!r} ({info.dtype}[{shape}])"
