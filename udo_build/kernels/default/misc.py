"""Other ops: EyeLike, Unique, BitCast and the losses NegativeLogLikelihoodLoss and
SoftmaxCrossEntropyLoss (Shrink is in activation, MeanVarianceNormalization in
transformer_norm, Det in math_ext)."""

from __future__ import annotations

import numpy as np

from ._common import axis_of, element_type
from ._package import DEFAULT

REDUCTIONS = ("none", "sum", "mean")


@DEFAULT.op("EyeLike")
def eye_like(x: np.ndarray, *, dtype: int | None = None, k: int = 0) -> np.ndarray:
    if x.ndim != 2:
        raise ValueError(f"EyeLike takes a 2-D tensor, got shape {list(x.shape)}")
    out_type = x.dtype if dtype is None else element_type(dtype)
    return np.eye(x.shape[0], x.shape[1], k=k, dtype=out_type)


@DEFAULT.op("Unique")
def unique(x: np.ndarray, *, axis: int | None = None, sorted: int = 1
           ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(values, index of each value's first occurrence, inverse indices, counts), in sorted
    order or (sorted=0) in order of first occurrence; slices along `axis` when it is given."""
    picked = None if axis is None else axis_of(axis, x.ndim)
    values, first, inverse, counts = np.unique(x, return_index=True, return_inverse=True,
                                               return_counts=True, axis=picked)
    inverse = inverse.reshape(-1)
    if not sorted:
        order = np.argsort(first, kind="stable")
        rank = np.empty_like(order)
        rank[order] = np.arange(order.size)
        values = np.take(values, order, axis=0 if picked is None else picked)
        first, counts, inverse = first[order], counts[order], rank[inverse]
    return (values, first.astype(np.int64), inverse.astype(np.int64),
            counts.astype(np.int64))


@DEFAULT.op("BitCast")
def bit_cast(x: np.ndarray, *, to: int) -> np.ndarray:
    """x's bytes read as another element type of the same width."""
    dtype = element_type(to)
    if dtype.itemsize != x.dtype.itemsize:
        raise ValueError(f"BitCast from {x.dtype.name} to {dtype.name}: the widths differ")
    return np.array(x, order="C").view(dtype)


def _reduce(loss: np.ndarray, weights: np.ndarray, reduction: str) -> np.ndarray:
    if reduction == "none":
        return loss
    if reduction == "sum":
        return np.asarray(np.sum(loss))
    if reduction == "mean":
        total = np.sum(weights)
        return np.asarray(np.sum(loss) / total if total else 0.0)
    raise ValueError(f"reduction {reduction!r} is not one of {', '.join(REDUCTIONS)}")


@DEFAULT.op("NegativeLogLikelihoodLoss")
def nll_loss(x: np.ndarray, target: np.ndarray, weight: np.ndarray | None = None, *,
             ignore_index: int | None = None, reduction: str = "mean") -> np.ndarray:
    """-x[n, target[n, ...], ...] * weight[target], over x [N, C, ...]; targets equal to
    ignore_index count for nothing (also in the mean's denominator)."""
    t = target.astype(np.int64)
    ignored = np.zeros(t.shape, bool) if ignore_index is None else t == ignore_index
    safe = np.where(ignored, 0, t)
    if np.any((safe < 0) | (safe >= x.shape[1])):
        raise ValueError(f"a target is outside [0, {x.shape[1]}) (and not ignore_index)")
    picked = np.take_along_axis(x.astype(np.float64), safe[:, None], axis=1)[:, 0]
    w = np.ones(x.shape[1]) if weight is None else weight.astype(np.float64)
    weights = np.where(ignored, 0.0, w[safe])
    return _reduce(-picked * weights, weights, reduction).astype(x.dtype)


@DEFAULT.op("SoftmaxCrossEntropyLoss")
def softmax_cross_entropy_loss(scores: np.ndarray, labels: np.ndarray,
                               weights: np.ndarray | None = None, *,
                               ignore_index: int | None = None, reduction: str = "mean"
                               ) -> tuple[np.ndarray, np.ndarray]:
    """(loss, log probabilities): the negative log likelihood of log_softmax over axis 1."""
    wide = scores.astype(np.float64)
    shifted = wide - np.max(wide, axis=1, keepdims=True)
    log_prob = shifted - np.log(np.sum(np.exp(shifted), axis=1, keepdims=True))
    loss = nll_loss(log_prob, labels, weights, ignore_index=ignore_index, reduction=reduction)
    return loss.astype(scores.dtype), log_prob.astype(scores.dtype)
