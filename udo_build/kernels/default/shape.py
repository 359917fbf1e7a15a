"""Shape and data-movement ops: Reshape, Flatten, Transpose, Squeeze, Unsqueeze, Concat, Split,
Slice, Gather, Expand, Tile, Pad, Shape, Size, ConstantOfShape, Range, DepthToSpace and
SpaceToDepth. Shapes, axes and indices arrive as int64 tensors (inputs at opset 17)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ...errors import UserError
from ...source import tensor_problem
from ._common import axis_of
from ._package import DEFAULT


def _ints(values: np.ndarray | Sequence[int]) -> list[int]:
    return [int(v) for v in np.asarray(values).reshape(-1)]


@DEFAULT.op("Reshape")
def reshape(data: np.ndarray, shape: np.ndarray, *, allowzero: int = 0) -> np.ndarray:
    """A 0 copies the input's dimension at its index (with allowzero: a dimension of size 0);
    one -1 is inferred."""
    dims = _ints(shape)
    if not allowzero:
        if any(d == 0 and i >= data.ndim for i, d in enumerate(dims)):
            raise ValueError(f"Reshape to {dims}: a 0 copies the input's dimension at its "
                             f"index, and the input {list(data.shape)} has rank {data.ndim}")
        dims = [data.shape[i] if d == 0 else d for i, d in enumerate(dims)]
    elif 0 in dims and -1 in dims:
        raise ValueError(f"Reshape to {dims} with allowzero: a 0 and a -1 together are invalid")
    return data.reshape(dims)


@DEFAULT.op("Flatten")
def flatten(x: np.ndarray, *, axis: int = 1) -> np.ndarray:
    axis = axis % x.ndim if axis < 0 else axis
    return x.reshape(int(np.prod(x.shape[:axis])), -1)


@DEFAULT.op("Transpose")
def transpose(data: np.ndarray, *, perm: Sequence[int] | None = None) -> np.ndarray:
    return np.transpose(data, perm)


@DEFAULT.op("Squeeze")
def squeeze(data: np.ndarray, axes: np.ndarray | None = None) -> np.ndarray:
    if axes is None:
        return np.squeeze(data)
    return np.squeeze(data, axis=tuple(axis_of(a, data.ndim) for a in _ints(axes)))


@DEFAULT.op("Unsqueeze")
def unsqueeze(data: np.ndarray, axes: np.ndarray) -> np.ndarray:
    rank = data.ndim + len(_ints(axes))
    return np.expand_dims(data, tuple(sorted(axis_of(a, rank) for a in _ints(axes))))


@DEFAULT.op("Concat")
def concat(*inputs: np.ndarray, axis: int) -> np.ndarray:
    return np.concatenate(inputs, axis=axis_of(axis, inputs[0].ndim))


@DEFAULT.op("Split")
def split(x: np.ndarray, sizes: np.ndarray | None = None, *, axis: int = 0,
          num_outputs: int | None = None) -> tuple[np.ndarray, ...]:
    """Split along `axis` by `sizes`, else into `num_outputs` parts (the last one smaller).

    At opset 17 the number of parts is the node's number of outputs: the runtime passes it as
    `num_outputs` (the opset 18 attribute)."""
    axis = axis_of(axis, x.ndim)
    if sizes is None:
        if not num_outputs:
            raise ValueError("Split needs the split sizes or the number of outputs")
        part = -(-x.shape[axis] // num_outputs)
        bounds = list(range(part, x.shape[axis], part))
    else:
        bounds = list(np.cumsum(_ints(sizes))[:-1])
    return tuple(np.split(x, bounds, axis=axis))


@DEFAULT.op("Slice")
def slice_(data: np.ndarray, starts: np.ndarray, ends: np.ndarray,
           axes: np.ndarray | None = None, steps: np.ndarray | None = None) -> np.ndarray:
    index = [slice(None)] * data.ndim
    axes_ = _ints(axes) if axes is not None else list(range(len(_ints(starts))))
    steps_ = _ints(steps) if steps is not None else [1] * len(axes_)
    for a, start, end, step in zip(axes_, _ints(starts), _ints(ends), steps_,
                                   strict=True):
        index[axis_of(a, data.ndim)] = slice(start, end, step)
    return data[tuple(index)]


@DEFAULT.op("Gather")
def gather(data: np.ndarray, indices: np.ndarray, *, axis: int = 0) -> np.ndarray:
    return np.take(data, indices.astype(np.int64, copy=False), axis=axis_of(axis, data.ndim))


@DEFAULT.op("GatherElements")
def gather_elements(data: np.ndarray, indices: np.ndarray, *, axis: int = 0) -> np.ndarray:
    axis = axis_of(axis, data.ndim)
    indices = np.where(indices < 0, indices + data.shape[axis], indices)
    return np.take_along_axis(data, indices, axis=axis)


@DEFAULT.op("Expand")
def expand(x: np.ndarray, shape: np.ndarray) -> np.ndarray:
    target = np.broadcast_shapes(x.shape, tuple(_ints(shape)))
    return np.array(np.broadcast_to(x, target))


@DEFAULT.op("Tile")
def tile(x: np.ndarray, repeats: np.ndarray) -> np.ndarray:
    return np.tile(x, _ints(repeats))


@DEFAULT.op("Pad")
def pad(data: np.ndarray, pads: np.ndarray, constant_value: np.ndarray | None = None,
        axes: np.ndarray | None = None, *, mode: str = "constant") -> np.ndarray:
    """Pads [begin..., end...] per axis (negative: crop); modes constant, reflect, edge, wrap."""
    axes_ = [axis_of(a, data.ndim) for a in _ints(axes)] if axes is not None \
        else list(range(data.ndim))
    amounts = _ints(pads)
    widths = [(0, 0)] * data.ndim
    for i, a in enumerate(axes_):
        widths[a] = (amounts[i], amounts[i + len(axes_)])
    crop = tuple(slice(max(-b, 0), data.shape[a] - max(-e, 0))
                 for a, (b, e) in enumerate(widths))
    data = data[crop]
    widths = [(max(b, 0), max(e, 0)) for b, e in widths]
    if mode == "constant":
        value = 0 if constant_value is None or np.size(constant_value) == 0 \
            else np.asarray(constant_value).reshape(-1)[0]
        return np.pad(data, widths, mode="constant", constant_values=value)
    if mode not in ("reflect", "edge", "wrap"):
        raise ValueError(f"Pad mode {mode!r} is not one of constant, reflect, edge, wrap")
    return np.pad(data, widths, mode=mode)


@DEFAULT.op("Shape")
def shape(data: np.ndarray, *, end: int | None = None, start: int = 0) -> np.ndarray:
    return np.array(data.shape[start:end], dtype=np.int64)


@DEFAULT.op("Size")
def size(data: np.ndarray) -> np.ndarray:
    return np.array(data.size, dtype=np.int64)


@DEFAULT.op("ConstantOfShape")
def constant_of_shape(shape: np.ndarray, *, value: Any = None) -> np.ndarray:
    """A tensor of `value` (a one-element tensor; float32 zero by default)."""
    fill = np.zeros(1, dtype=np.float32) if value is None else np.asarray(value)
    if fill.dtype == np.float64 and not isinstance(value, np.ndarray):
        fill = fill.astype(np.float32)  # a plain Python number: ONNX's float is float32
    dims = _ints(shape)
    problem = tensor_problem(dims, fill.dtype.itemsize)
    if problem is not None:
        raise UserError(f"ConstantOfShape: {problem}",
                        hint="check the shape the model computes for it")
    return np.full(dims, fill.reshape(-1)[0], dtype=fill.dtype)


@DEFAULT.op("Range")
def range_(start: np.ndarray, limit: np.ndarray, delta: np.ndarray) -> np.ndarray:
    return np.arange(start, limit, delta).astype(np.asarray(start).dtype)


@DEFAULT.op("DepthToSpace")
def depth_to_space(x: np.ndarray, *, blocksize: int, mode: str = "DCR") -> np.ndarray:
    n, c, h, w = x.shape
    b = blocksize
    if mode == "DCR":
        y = x.reshape(n, b, b, c // (b * b), h, w).transpose(0, 3, 4, 1, 5, 2)
    else:
        y = x.reshape(n, c // (b * b), b, b, h, w).transpose(0, 1, 4, 2, 5, 3)
    return y.reshape(n, c // (b * b), h * b, w * b)


@DEFAULT.op("SpaceToDepth")
def space_to_depth(x: np.ndarray, *, blocksize: int, mode: str = "DCR") -> np.ndarray:
    """Blocks of blocksize x blocksize pixels become channels: block offset major (DCR) or
    channel major (CRD, an attribute of opset 28)."""
    n, c, h, w = x.shape
    b = blocksize
    y = x.reshape(n, c, h // b, b, w // b, b)
    if mode == "DCR":
        y = y.transpose(0, 3, 5, 1, 2, 4)
    elif mode == "CRD":
        y = y.transpose(0, 1, 3, 5, 2, 4)
    else:
        raise ValueError(f"SpaceToDepth mode {mode!r} is not one of DCR, CRD")
    return y.reshape(n, c * b * b, h // b, w // b)
