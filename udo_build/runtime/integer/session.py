"""`QuantizedSession`: runs a QuantizedModel with integer semantics.

    session = QuantizedSession(qmodel, {"SoftplusPackage": package})
    outputs = session.run({"input": x})                  # float in, dequantized floats out
    raw = session.run_quantized({"input": x}, ["t7"])    # the integer tensors themselves
    for name, value in session.stream({"input": x}, ["t3", "t7"]):  # as `run`, each as made
        ...

Feeds of an encoded input are real values of any float type (float16, float32, float64: quantized
at entry from their values with the input's encoding, as QuantizeLinear does), or already
quantized values of the encoding's type; a float input without an encoding takes any float type
too (converted to its own). `run_quantized` returns
quantized tensors as they are held (uint8/uint16) and float-fallback tensors as float;
`run` dequantizes the quantized ones. Requesting a tensor the default plan absorbs (a Conv
output feeding a Relu) gives a plan where it is not absorbed (see `plan.py`).

Memory: the kernels' temporaries are multi-megabyte numpy arrays, allocated and freed at every
step. glibc hands blocks above 128 KiB back to the kernel when they are freed (munmap, heap
trimming), so every inference would fault each of them in again, zeroed page by page (on
ResNet-50, a tenth of the inference's time). A session therefore raises
glibc's mmap threshold to 32 MiB and its trim threshold to 1 GiB, once per process (`mallopt`;
Linux with glibc only): freed blocks are reused, as the arena of an inference runtime is. The
process keeps up to that much freed memory for reuse; `release_freed_memory` gives it back
after a one-off use (prepare's plan, made only to choose kernels).

Errors are the float runtime's: bad feeds are a UserError naming the input; a UDO kernel that
raises, or returns too few outputs or a dtype or shape the model contradicts, is the user's step
failing (StepFailed); a default-package or integer kernel that raises is a KernelError.
"""

from __future__ import annotations

import ctypes
import sys
from collections.abc import Iterator, Mapping, Sequence
from functools import cache
from typing import Any

import numpy as np

from ...errors import UserError
from ...ir.encodings import Encoding
from ...ir.graph import Node
from ...ir.qmodel import QuantizedModel
from ...ir.weights import release
from ...kernels.oppkg import Impl, OpPackage
from ..float_session import (
    LoadedModel,
    _detached,
    _failure,
    _fits,
    _read_only,
    _takes_num_outputs,
    check_user_output,
    streamed_frees,
)
from . import conv as conv_kernel
from .exact import Packed
from .fixed import qtype, quantize
from .plan import Planner, QPlan, QStep

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt parameters (malloc.h)


class QuantizedSession(LoadedModel[QPlan]):
    def __init__(self, qmodel: QuantizedModel,
                 packages: Mapping[str, OpPackage] | None = None) -> None:
        super().__init__(qmodel.model, packages)
        self.qmodel = qmodel
        reuse_freed_memory()
        self._impls: dict[str, Impl] = {}
        self._planner = Planner(qmodel, self._float_impl)
        self._load_plan()

    # -- load ------------------------------------------------------------------------------------

    def _float_impl(self, node: Node) -> Impl:
        """The float kernel of a node the plan runs as fallback, selected once (a node an
        integer kernel runs needs none: a Gelu runs from its table without one)."""
        if node.name not in self._impls:
            self._impls[node.name] = self._select(node)
        return self._impls[node.name]

    def _dtype(self, name: str) -> str:
        """What a float kernel sees of a tensor: a quantized weight dequantized to float32."""
        if name in self.qmodel.params and name in self._weights:
            return "float32"
        return super()._dtype(name)

    def _build(self, outputs: tuple[str, ...]) -> QPlan:
        plan = self._planner.build(outputs)
        for name in plan.constants:
            plan.constants[name] = _read_only(plan.constants[name])
        if self._pack_now:
            self._pack(plan)
        return plan

    def _pack(self, plan: QPlan) -> None:
        """Pack the convolutions the compiled kernel runs (static input shapes) as the plan is
        built: workers forked after it (quant reports) share the packing (see the float
        session); the plan built while loading packs on its first run."""
        for step in plan.steps:
            packed = step.kwargs.get("packed")
            if not isinstance(packed, Packed) or not step.integer or len(step.inputs) < 2:
                continue
            info, w = self._infos.get(step.inputs[0]), plan.constants.get(step.inputs[1])
            image = info.static_shape if info is not None else None
            if image is not None and w is not None and len(image) == 4:
                conv_kernel.prepare(packed, w, image[1:], step.kwargs)

    # -- run -------------------------------------------------------------------------------------

    def run(self, feeds: Mapping[str, np.ndarray],
            outputs: Sequence[str] | None = None) -> dict[str, np.ndarray]:
        """The requested tensors (default: the graph outputs) as floats: quantized ones
        dequantized, in the tensor's float type (float32 where the model says none)."""
        plan = self.plan(self._names(outputs))
        raw = self._execute(plan, feeds)
        return {name: self._real(name, plan.encodings[name], value)
                if name in plan.encodings and value.dtype.kind in "iu" else value
                for name, value in raw.items()}

    def stream(self, feeds: Mapping[str, np.ndarray],
               outputs: Sequence[str]) -> Iterator[tuple[str, np.ndarray]]:
        """(name, value) of each requested tensor as it is made, as `run` gives it (the same
        plan; quantized ones dequantized); each freed once no later step reads it (see the
        float session's `stream`)."""
        plan = self.plan(tuple(outputs))
        env: dict[str, Any] = dict(plan.constants)
        env.update(self._check_feeds(feeds, plan))
        wanted = set(plan.outputs)
        for name in dict.fromkeys(plan.outputs):
            if name in env:
                yield name, self._as_run(plan, name, env[name])
        for step, dead in zip(plan.steps, streamed_frees(plan.steps, plan.outputs,
                                                          plan.constants), strict=True):
            with np.errstate(all="ignore"):  # as in _execute
                self._run_step(step, env, ())
            for name in step.outputs:
                if name in wanted:
                    yield name, self._as_run(plan, name, env[name])
            for name in dead:
                del env[name]

    def _as_run(self, plan: QPlan, name: str, value: np.ndarray) -> np.ndarray:
        """A tensor as `run` returns it: dequantized when held quantized, else read-only."""
        if name in plan.encodings and value.dtype.kind in "iu":
            return self._real(name, plan.encodings[name], value)
        return _read_only(value)

    def _real(self, name: str, enc: Encoding, codes: np.ndarray) -> np.ndarray:
        """Encoding.dequantize (float64 arithmetic) rounded once to the tensor's float type."""
        info = self._infos.get(name)
        dtype = np.dtype(info.dtype if info is not None and info.dtype else np.float32)
        real = enc.scale * (np.asarray(codes, np.float64) + enc.offset)
        return real.astype(dtype if dtype.kind == "f" else np.float32)

    def run_quantized(self, feeds: Mapping[str, np.ndarray],
                      outputs: Sequence[str] | None = None) -> dict[str, np.ndarray]:
        """The requested tensors as the integer path holds them (quantized: integers)."""
        return self._execute(self.plan(self._names(outputs)), feeds)

    def _names(self, outputs: Sequence[str] | None) -> tuple[str, ...]:
        return tuple(outputs) if outputs is not None else tuple(t.name for t in self.graph.outputs)

    def _execute(self, plan: QPlan, feeds: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
        env: dict[str, Any] = dict(plan.constants)
        env.update(self._check_feeds(feeds, plan))
        with np.errstate(all="ignore"):  # float fallbacks: NaN and infinities as IEEE gives them
            for step in plan.steps:
                self._run_step(step, env, step.frees)
        return {name: _detached(env[name]) for name in plan.outputs}

    def _run_step(self, step: QStep, env: dict[str, Any], frees: Sequence[str]) -> None:
        """One step: its outputs into `env`, then `frees` deleted from it."""
        args = [env[name] if name else None for name in step.inputs]
        if step.dequantize:
            args = [a if e is None else e.dequantize(a) for a, e in zip(args, step.dequantize,
                                                                         strict=True)]
        if step.user:  # the user's kernel sees read-only inputs
            args = [_read_only(a) if isinstance(a, np.ndarray) else a for a in args]
        kwargs = step.kwargs
        if not step.integer and "num_outputs" not in kwargs and _takes_num_outputs(step.fn):
            kwargs = {**kwargs, "num_outputs": len(step.outputs)}
        try:
            result = step.fn(*args, **kwargs)
        except Exception as error:
            raise _failure(step, error) from error
        values = result if isinstance(result, tuple) else (result,)
        named = [(i, o) for i, o in enumerate(step.outputs) if o]
        if named and named[-1][0] >= len(values):
            raise _failure(step, ValueError(
                f"returned {len(values)} output(s), the node has {len(step.outputs)}"))
        for i, name in named:
            value = self._check_user_output(step, name, values[i]) if step.user else values[i]
            enc = step.quantize[i] if step.quantize else None
            if enc is not None and np.asarray(value).dtype.kind == "f":
                value = quantize(value, enc)
            env[name] = value
        if self._streams:  # the weights it read (mapped): no longer resident
            release(*args, *kwargs.values())
        result = args = values = None  # type: ignore[assignment]  (hold nothing past its use)
        for name in frees:
            del env[name]

    def _check_feeds(self, feeds: Mapping[str, np.ndarray], plan: QPlan) -> dict[str, Any]:
        unknown = [name for name in feeds if name not in self._inputs]
        if unknown:
            raise UserError(f"unknown input {unknown[0]!r}; the model's inputs are: "
                            + ", ".join(repr(n) for n in self._inputs))
        missing = [name for name in plan.feeds if name not in feeds]
        if missing:
            raise UserError(f"missing input {missing[0]!r}")
        checked = {}
        for name, value in feeds.items():
            info, enc = self._inputs[name], plan.encodings.get(name)
            array = np.asarray(value)
            if info.shape is not None and not _fits(array.shape, info.shape):
                raise UserError(f"input {name!r}: expected shape {list(info.shape)}, given "
                                f"{list(array.shape)}")
            checked[name] = _read_only(_entry_value(name, array, info.dtype, enc))
        return checked

    def _check_user_output(self, step: QStep, name: str, value: Any) -> np.ndarray:
        return check_user_output(step, name, value, self._infos)


def _entry_value(name: str, array: np.ndarray, dtype: str | None,
                 enc: Encoding | None) -> np.ndarray:
    """A feed as the plan holds it: an encoded input's codes (given as they are, or quantized
    from real values of any float type), a float input in its declared float type (a real value
    is a real value, whatever its width), any other as given when of the input's type."""
    if enc is not None and array.dtype == qtype(enc):
        return array
    if array.dtype.kind == "f" and (enc is not None or np.dtype(dtype or array.dtype).kind == "f"):
        return quantize(array, enc) if enc is not None else array.astype(dtype or array.dtype,
                                                                         copy=False)
    if dtype and array.dtype != np.dtype(dtype):
        expected = dtype + (f" (or {qtype(enc)}, quantized)" if enc else "")
        raise UserError(f"input {name!r}: expected {expected}, given {array.dtype}",
                        hint=f"convert it, e.g. x.astype(np.{dtype})")
    return array


@cache
def reuse_freed_memory() -> bool:
    """Keep freed heap blocks for reuse (see the module docstring); False where unavailable."""
    if sys.platform != "linux":
        return False
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (AttributeError, OSError):  # not glibc
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    return bool(mallopt(M_MMAP_THRESHOLD, 32 << 20) and mallopt(M_TRIM_THRESHOLD, 1 << 30))


def release_freed_memory() -> bool:
    """Give the freed heap memory back to the system now (glibc's malloc_trim), after a large
    one-off use (a plan built only to choose kernels): kept for reuse, it would stay resident
    for the rest of the process. False where unavailable."""
    if sys.platform != "linux":
        return False
    try:
        trim = ctypes.CDLL(None).malloc_trim
    except (AttributeError, OSError):  # not glibc
        return False
    trim.argtypes = [ctypes.c_size_t]
    return bool(trim(0))
