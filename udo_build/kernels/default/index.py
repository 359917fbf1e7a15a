"""Index ops: GatherND, ScatterND, ScatterElements, TopK, OneHot, NonZero, Compress,
ReverseSequence and NonMaxSuppression. Indices may be negative (counted from the end of their
axis) wherever ONNX allows it; index outputs are int64."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ._common import axis_of
from ._package import DEFAULT

_REDUCTIONS: dict[str, Callable[..., None]] = {
    "add": np.add.at, "mul": np.multiply.at, "max": np.maximum.at, "min": np.minimum.at,
}


def _scalar(value: np.ndarray | None, default: float) -> float:
    if value is None or np.size(value) == 0:
        return default
    return np.asarray(value).reshape(-1)[0].item()


def _scatter(out: np.ndarray, index: tuple[np.ndarray, ...], updates: np.ndarray,
             reduction: str, op: str) -> np.ndarray:
    """out[index] = updates, or combined with them by `reduction` (repeated indices too)."""
    if reduction == "none":
        out[index] = updates
    elif reduction in _REDUCTIONS:
        _REDUCTIONS[reduction](out, index, updates)
    else:
        raise ValueError(f"{op} reduction {reduction!r} is not one of none, add, mul, max, min")
    return out


@DEFAULT.op("GatherND")
def gather_nd(data: np.ndarray, indices: np.ndarray, *, batch_dims: int = 0) -> np.ndarray:
    """Slices of `data` at the index tuples of the last axis of `indices`; the first
    `batch_dims` axes of both are a shared batch."""
    b = batch_dims
    depth = indices.shape[-1]
    batch = int(np.prod(data.shape[:b], dtype=np.int64))
    flat = data.reshape((batch,) + data.shape[b:])
    index = indices.astype(np.int64).reshape((batch,) + indices.shape[b:])
    rows = np.arange(batch).reshape((batch,) + (1,) * (index.ndim - 2))
    picked = flat[(rows,) + tuple(np.moveaxis(index, -1, 0))]
    return picked.reshape(indices.shape[:-1] + data.shape[b + depth:])


@DEFAULT.op("ScatterND")
def scatter_nd(data: np.ndarray, indices: np.ndarray, updates: np.ndarray, *,
               reduction: str = "none") -> np.ndarray:
    index = tuple(np.moveaxis(indices.astype(np.int64), -1, 0))
    return _scatter(data.copy(), index, updates, reduction, "ScatterND")


@DEFAULT.op("ScatterElements")
def scatter_elements(data: np.ndarray, indices: np.ndarray, updates: np.ndarray, *,
                     axis: int = 0, reduction: str = "none") -> np.ndarray:
    """out[..., indices[i, j, ...], ...] = updates[i, j, ...], `indices` replacing the
    coordinate on `axis`."""
    axis = axis_of(axis, data.ndim)
    index = list(np.indices(indices.shape, sparse=True))
    index[axis] = np.where(indices < 0, indices + data.shape[axis], indices).astype(np.int64)
    return _scatter(data.copy(), tuple(index), updates, reduction, "ScatterElements")


@DEFAULT.op("TopK")
def top_k(x: np.ndarray, k: np.ndarray, *, axis: int = -1, largest: int = 1,
          sorted: int = 1) -> tuple[np.ndarray, np.ndarray]:  # noqa: A002 (the ONNX name)
    """The k largest (or smallest) values along `axis` and their indices; equal values keep
    their order (the lower index first). The result is sorted whatever `sorted` says (ONNX
    leaves the order free when it is 0)."""
    axis = axis_of(axis, x.ndim)
    count = int(_scalar(k, 0))
    if count < 0 or count > x.shape[axis]:
        raise ValueError(f"TopK k={count} is outside [0, {x.shape[axis]}] (axis {axis})")
    if largest:  # a stable ascending sort of the reversed axis, reversed: ties stay in order
        n = x.shape[axis]
        order = n - 1 - np.argsort(np.flip(x, axis), axis=axis, kind="stable")
        order = np.flip(order, axis)
    else:
        order = np.argsort(x, axis=axis, kind="stable")
    order = np.take(order, np.arange(count), axis=axis).astype(np.int64)
    return np.take_along_axis(x, order, axis=axis), order


@DEFAULT.op("OneHot")
def one_hot(indices: np.ndarray, depth: np.ndarray, values: np.ndarray, *,
            axis: int = -1) -> np.ndarray:
    """values[1] where the new axis equals the index (negative ones count from `depth`),
    values[0] elsewhere; indices outside [-depth, depth) give a row of values[0]."""
    size = int(_scalar(depth, 0))
    index = np.asarray(indices).astype(np.int64)
    index = np.where(index < 0, index + size, index)
    hot = index[..., None] == np.arange(size)
    hot = np.moveaxis(hot, -1, axis_of(axis, index.ndim + 1))
    off, on = np.asarray(values).reshape(-1)[:2]
    return np.where(hot, on, off).astype(values.dtype)


@DEFAULT.op("NonZero")
def non_zero(x: np.ndarray) -> np.ndarray:
    """The coordinates of the non-zero elements, one column each, in row-major order."""
    if x.ndim == 0:
        return np.zeros((0, int(bool(x))), dtype=np.int64)
    return np.array(np.nonzero(x), dtype=np.int64).reshape(x.ndim, -1)


@DEFAULT.op("Compress")
def compress(x: np.ndarray, condition: np.ndarray, *, axis: int | None = None) -> np.ndarray:
    """The slices along `axis` (of the flattened input without an axis) where `condition`
    holds; a shorter condition leaves out the remaining slices."""
    keep = np.asarray(condition).astype(bool).reshape(-1)
    if axis is None:
        return np.compress(keep, x.reshape(-1))
    return np.compress(keep, x, axis=axis_of(axis, x.ndim))


@DEFAULT.op("ReverseSequence")
def reverse_sequence(x: np.ndarray, sequence_lens: np.ndarray, *, batch_axis: int = 1,
                     time_axis: int = 0) -> np.ndarray:
    """Each batch entry's first sequence_lens[b] steps along `time_axis`, reversed."""
    out = x.copy()
    for b, length in enumerate(np.asarray(sequence_lens).reshape(-1).tolist()):
        index: list[slice | int] = [slice(None)] * x.ndim
        index[batch_axis] = b
        index[time_axis] = slice(0, int(length))
        part = x[tuple(index)]
        out[tuple(index)] = np.flip(part, time_axis - (batch_axis < time_axis))
    return out


def _corners(boxes: np.ndarray, center_point_box: int) -> np.ndarray:
    """Boxes as [y_min, x_min, y_max, x_max] (from corners in any order, or centers)."""
    if center_point_box:
        xc, yc, w, h = np.moveaxis(boxes, -1, 0)
        return np.stack([yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2], axis=-1)
    y1, x1, y2, x2 = np.moveaxis(boxes, -1, 0)
    return np.stack([np.minimum(y1, y2), np.minimum(x1, x2), np.maximum(y1, y2),
                     np.maximum(x1, x2)], axis=-1)


def _iou(box: np.ndarray, others: np.ndarray) -> np.ndarray:
    """Intersection over union of one box with each of `others` (0 when they do not meet)."""
    top = np.maximum(box[0], others[:, 0])
    left = np.maximum(box[1], others[:, 1])
    height = np.minimum(box[2], others[:, 2]) - top
    width = np.minimum(box[3], others[:, 3]) - left
    inter = np.where((height > 0) & (width > 0), height * width, 0)
    area = (box[2] - box[0]) * (box[3] - box[1])
    areas = (others[:, 2] - others[:, 0]) * (others[:, 3] - others[:, 1])
    union = area + areas - inter
    valid = (inter > 0) & (area > 0) & (areas > 0) & (union > 0)
    return np.where(valid, inter / np.where(valid, union, 1), 0)


def _select(boxes: np.ndarray, scores: np.ndarray, limit: int, iou_threshold: float,
            score_threshold: float | None) -> list[int]:
    """Greedy selection: the best remaining score (the lower index on ties) unless it
    overlaps a selected box by more than `iou_threshold`."""
    order = np.argsort(-scores.astype(np.float64), kind="stable")
    if score_threshold is not None:
        order = order[scores[order] > score_threshold]
    chosen: list[int] = []
    for i in order.tolist():
        if len(chosen) >= limit:
            break
        if not chosen or not (_iou(boxes[i], boxes[chosen]) > iou_threshold).any():
            chosen.append(i)
    return chosen


@DEFAULT.op("NonMaxSuppression")
def non_max_suppression(boxes: np.ndarray, scores: np.ndarray,
                        max_output_boxes_per_class: np.ndarray | None = None,
                        iou_threshold: np.ndarray | None = None,
                        score_threshold: np.ndarray | None = None, *,
                        center_point_box: int = 0) -> np.ndarray:
    """[batch, class, box] of the boxes kept for each batch and class, in that order."""
    limit = int(_scalar(max_output_boxes_per_class, 0))
    iou = float(_scalar(iou_threshold, 0.0))
    floor = None if score_threshold is None or np.size(score_threshold) == 0 \
        else float(_scalar(score_threshold, 0.0))
    corners = _corners(boxes, center_point_box)
    rows = [(b, c, i) for b in range(scores.shape[0]) for c in range(scores.shape[1])
            for i in _select(corners[b], scores[b, c], limit, iou, floor)]
    return np.array(rows, dtype=np.int64).reshape(-1, 3)
