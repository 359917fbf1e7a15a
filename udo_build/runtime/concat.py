"""The float plan's channel Concats made in place: the convolutions that feed one write their
channels straight into its output, and the Concat copies nothing.

SqueezeNet's fire modules, Inception's blocks and DenseNet's layers end in a Concat over the
channels of convolutions' outputs: the plain plan writes each output, then copies them all
into a fresh array (with its page faults). Here the Concat's output is made first (an `Alloc`
step, from the session's dead tensors where one of its shape waits), each convolution writes
its channel slice of it (`fused_conv(out=...)`: for one image a slice of the channels of an
NCHW tensor is one contiguous run, which the compiled kernel writes as it would its own array),
and the Concat step is gone.

Only where nothing else can see the difference: a Concat over axis 1 of tensors of static
shapes, each input made by a float convolution step of the plan (one whose weights are packed,
`_with_packed`), read by nothing but this Concat and only once, none of them nor the Concat's
output requested by the plan (a requested tensor is yielded as it is made, and the Concat's
output would be yielded before its channels are written).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..ir.graph import DEFAULT_PACKAGE, Node, TensorInfo
from ..kernels.default.conv import fused_conv
from .buffers import Buffers


class Alloc:
    """A step's function making the Concat's output: an array of its shape and dtype, one of
    the session's dead tensors where one waits (its contents are stale: every channel is
    written before anything reads it)."""

    def __init__(self, shape: tuple[int, ...], dtype: np.dtype, buffers: Buffers) -> None:
        self.shape, self.dtype, self.buffers = shape, dtype, buffers
        buffers.want(shape, dtype)

    def __call__(self) -> np.ndarray:
        found = self.buffers.take(self.shape, self.dtype)
        return found if found is not None else np.empty(self.shape, self.dtype)


def conv_into(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None,
              z: np.ndarray | None = None, target: np.ndarray | None = None, *, lo: int,
              hi: int, **kwargs: Any) -> np.ndarray:
    """FusedConv writing its result into channels [lo, hi) of `target` (the Concat's output);
    the slice is returned."""
    assert target is not None
    return fused_conv(x, w, b, z, out=target[:, lo:hi], **kwargs)


def concat_in_place(steps: Sequence[Any], nodes: Sequence[Node], outputs: Sequence[str],
                    infos: Mapping[str, TensorInfo], buffers: Buffers) -> list[Any]:
    """The plan's steps (`Step`s, one per node, in order) with each channel Concat that
    qualifies (see the module's docstring) made in place."""
    made = {o: i for i, node in enumerate(nodes) for o in node.outputs if o}
    reads: dict[str, int] = {}
    for node in nodes:
        for name in node.inputs:
            if name:
                reads[name] = reads.get(name, 0) + 1
    requested = set(outputs)
    before: dict[int, list[Any]] = {}  # step index -> steps to insert before it
    replaced: dict[int, Any] = {}
    dropped: set[int] = set()
    for at, node in enumerate(nodes):
        producers = _producers(node, at, steps, made, reads, requested, infos)
        if producers is None:
            continue
        out = node.outputs[0]
        info = infos[out]
        shape, dtype = info.static_shape, np.dtype(info.dtype)
        assert shape is not None
        alloc = dataclasses.replace(steps[at], fn=Alloc(shape, dtype, buffers), inputs=(),
                                    outputs=(out,), kwargs={}, frees=())
        before.setdefault(min(producers), []).append(alloc)
        lo = 0
        for i in producers:
            step, channels = steps[i], infos[nodes[i].outputs[0]].static_shape[1]
            inputs = (*step.inputs, *("",) * (4 - len(step.inputs)), out)
            frees = (*step.frees, *(o for o in step.outputs if o not in step.frees))
            replaced[i] = dataclasses.replace(
                step, fn=conv_into, inputs=inputs, frees=frees,
                kwargs={**step.kwargs, "lo": lo, "hi": lo + channels})
            lo += channels
        dropped.add(at)
        if steps[at].frees:  # the Concat's output dead at once (no reader): after the last
            last = max(producers)
            replaced[last] = dataclasses.replace(
                replaced[last], frees=(*replaced[last].frees,
                                       *(f for f in steps[at].frees if f == out)))
    if not dropped:
        return list(steps)
    result = []
    for i, step in enumerate(steps):
        result.extend(before.get(i, ()))
        if i not in dropped:
            result.append(replaced.get(i, step))
    return result


def _producers(node: Node, at: int, steps: Sequence[Any], made: Mapping[str, int],
               reads: Mapping[str, int], requested: set[str],
               infos: Mapping[str, TensorInfo]) -> list[int] | None:
    """The indices of the convolution steps that feed this Concat, in its input order, where it
    qualifies; None otherwise."""
    if node.package != DEFAULT_PACKAGE or node.op != "Concat" or len(node.outputs) != 1 \
            or not node.inputs or node.outputs[0] in requested:
        return None
    info = infos.get(node.outputs[0])
    shape = info.static_shape if info is not None else None
    if shape is None or len(shape) < 2 or not info.dtype:
        return None
    axis = int(node.kwargs.get("axis", 0))
    if axis % len(shape) != 1:
        return None
    producers = []
    for name in node.inputs:
        i = made.get(name)
        source = infos.get(name)
        if (not name or i is None or i >= at or reads.get(name) != 1 or name in requested
                or steps[i].fn is not fused_conv or "packed" not in steps[i].kwargs
                or len(steps[i].outputs) != 1 or source is None
                or source.static_shape is None or source.dtype != info.dtype
                or len(source.static_shape) != len(shape)):
            return None
        producers.append(i)
    if len(set(producers)) != len(producers) or \
            sum(infos[n].static_shape[1] for n in node.inputs) != shape[1]:
        return None
    return producers
