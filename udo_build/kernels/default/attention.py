"""Transformer ops of opset 23 and later: RotaryEmbedding and Attention (scaled dot-product
attention with masks, causality, grouped key/value heads, a key/value cache and softcap).

Heads: a 4-D tensor is [batch, heads, seq, head_size]; a 3-D one is [batch, seq, hidden] and
the op's `num_heads` (or q_num_heads / kv_num_heads) attributes split its hidden axis.
"""

from __future__ import annotations

import numpy as np

from ._package import DEFAULT

_PRECISIONS = {1: np.float32, 10: np.float16, 11: np.float64}  # ONNX element types


def _split_heads(x: np.ndarray, heads: int | None, name: str) -> np.ndarray:
    """[batch, seq, hidden] -> [batch, heads, seq, hidden / heads]; 4-D tensors as they are."""
    if x.ndim == 4:
        return x
    if not heads or x.shape[2] % heads:
        raise ValueError(f"{name} of shape {list(x.shape)} needs a head count dividing its "
                         f"hidden size, got {heads}")
    return x.reshape(x.shape[0], x.shape[1], heads, -1).transpose(0, 2, 1, 3)


@DEFAULT.op("RotaryEmbedding")
def rotary_embedding(x: np.ndarray, cos_cache: np.ndarray, sin_cache: np.ndarray,
                     position_ids: np.ndarray | None = None, *, interleaved: int = 0,
                     num_heads: int | None = None, rotary_embedding_dim: int = 0) -> np.ndarray:
    """Rotate the first rotary_embedding_dim features of each head (all by default) by the
    angles whose cosines and sines the caches hold (rows picked by position_ids, or already
    [batch, seq, dim / 2]); pairs are (j, j + dim/2), or (2j, 2j + 1) when interleaved."""
    heads = _split_heads(x, num_heads, "RotaryEmbedding input")  # [b, h, s, d]
    dim = rotary_embedding_dim or heads.shape[3]
    if position_ids is not None:
        cos_cache, sin_cache = cos_cache[position_ids], sin_cache[position_ids]
    if cos_cache.shape[-1] != dim // 2 or sin_cache.shape[-1] != dim // 2:
        raise ValueError(f"the cos/sin caches have {cos_cache.shape[-1]}/{sin_cache.shape[-1]} "
                         f"columns; rotating {dim} features needs {dim // 2}")
    cos, sin = cos_cache[:, None], sin_cache[:, None]  # [b, 1, s, dim/2]
    rotated = heads[..., :dim]
    first, second = (rotated[..., 0::2], rotated[..., 1::2]) if interleaved \
        else (rotated[..., :dim // 2], rotated[..., dim // 2:])
    real, imag = cos * first - sin * second, sin * first + cos * second
    out = heads.copy()
    if interleaved:
        out[..., 0:dim:2], out[..., 1:dim:2] = real, imag
    else:
        out[..., :dim // 2], out[..., dim // 2:dim] = real, imag
    if x.ndim == 3:
        return out.transpose(0, 2, 1, 3).reshape(x.shape)
    return out


def _mask_bias(mask: np.ndarray | None, q_len: int, kv_len: int,
               dtype: np.dtype) -> np.ndarray:
    """The attention mask as an additive bias: True or 0 attends, False or -inf does not; a
    mask shorter than the keys is padded with "does not attend"."""
    bias = np.zeros((q_len, kv_len), dtype=dtype)
    if mask is None:
        return bias
    pad = kv_len - mask.shape[-1]
    if pad > 0:
        fill = False if mask.dtype == np.bool_ else -np.inf
        mask = np.pad(mask, [(0, 0)] * (mask.ndim - 1) + [(0, pad)], constant_values=fill)
    if mask.dtype == np.bool_:
        mask = np.where(mask, dtype.type(0), dtype.type(-np.inf))
    return bias + mask.astype(dtype)


def _allowed(q_len: int, kv_len: int, offset: np.ndarray, causal: bool, left: int,
             right: int, nonpad: np.ndarray | None) -> np.ndarray:
    """Which keys each query may see: j <= i + offset when causal, within the window
    [i + offset - left, i + offset + right] (a side of -1 is open), j < nonpad[b]. `offset`
    (the keys before the query block) is a scalar, or one per batch entry."""
    i = np.arange(q_len)[:, None]
    j = np.arange(kv_len)[None, :]
    diff = i + offset.reshape(-1, 1, 1, 1) - j if offset.ndim else i + int(offset) - j
    allowed = np.ones(diff.shape, dtype=bool)
    if causal:
        allowed &= diff >= 0
    if left >= 0:
        allowed &= diff <= left
    if right >= 0:
        allowed &= -diff <= right
    if nonpad is not None:
        allowed = allowed & (j < nonpad.reshape(-1, 1, 1, 1))
    return allowed


def _softmax_rows(scores: np.ndarray, masked: np.ndarray) -> np.ndarray:
    """Softmax over the last axis; rows that attend to nothing are all zero."""
    top = np.max(scores, axis=-1, keepdims=True)
    e = np.exp(scores - np.where(np.isneginf(top), 0, top))
    total = np.sum(e, axis=-1, keepdims=True)
    probs = e / np.where(total == 0, 1, total)
    return np.where(masked, 0, probs).astype(scores.dtype)


@DEFAULT.op("Attention")
def attention(q: np.ndarray, k: np.ndarray, v: np.ndarray,
              attn_mask: np.ndarray | None = None, past_key: np.ndarray | None = None,
              past_value: np.ndarray | None = None, nonpad_kv_seqlen: np.ndarray | None = None,
              *, is_causal: int = 0, kv_num_heads: int | None = None,
              left_window_size: int = -1, q_num_heads: int | None = None,
              qk_matmul_output_mode: int = 0, right_window_size: int = -1,
              scale: float | None = None, softcap: float = 0.0,
              softmax_precision: int | None = None) -> tuple[np.ndarray, ...]:
    """softmax(softcap(Q K^T * scale) + bias) V, scale 1/sqrt(head_size) by default; K and V
    follow the past cache (returned as present_key/value); fewer key/value heads are repeated
    to the query's (grouped-query attention). The bias masks what `attn_mask`, causality, the
    window (opset 25) and the keys' valid lengths (nonpad_kv_seqlen, opset 24) exclude; rows
    that see no key are zero. The fourth output is the (softcapped) scores (modes 0, 1), with
    the bias (2) or the probabilities (3)."""
    qh = _split_heads(q, q_num_heads, "Attention Q")
    key = _split_heads(k, kv_num_heads, "Attention K")
    value = _split_heads(v, kv_num_heads, "Attention V")
    if past_key is not None:
        key = np.concatenate([past_key, key], axis=2)
    if past_value is not None:
        value = np.concatenate([past_value, value], axis=2)
    present_key, present_value = key, value
    if qh.shape[1] != key.shape[1]:
        if qh.shape[1] % key.shape[1]:
            raise ValueError(f"{qh.shape[1]} query heads are not a multiple of "
                             f"{key.shape[1]} key/value heads")
        repeats = qh.shape[1] // key.shape[1]
        key, value = np.repeat(key, repeats, axis=1), np.repeat(value, repeats, axis=1)
    root = q.dtype.type(np.sqrt(scale if scale is not None else 1 / np.sqrt(qh.shape[3])))
    scores = (qh * root) @ (key * root).transpose(0, 1, 3, 2)
    if softcap > 0:
        scores = (np.tanh(scores / softcap) * softcap).astype(q.dtype)
    q_len, kv_len = qh.shape[2], key.shape[2]
    if past_key is None and nonpad_kv_seqlen is not None:
        offset = np.asarray(nonpad_kv_seqlen).astype(np.int64).reshape(-1) - q_len
    else:
        offset = np.array(past_key.shape[2] if past_key is not None else 0)
    allowed = _allowed(q_len, kv_len, offset, bool(is_causal), left_window_size,
                       right_window_size, nonpad_kv_seqlen)
    bias = _mask_bias(attn_mask, q_len, kv_len, q.dtype) \
        + np.where(allowed, q.dtype.type(0), q.dtype.type(-np.inf))
    biased = scores + bias
    masked = np.isneginf(np.max(bias, axis=-1, keepdims=True))
    if softmax_precision is not None and softmax_precision not in _PRECISIONS:
        raise ValueError(f"Attention softmax_precision {softmax_precision} is not one of "
                         "1 (float), 10 (float16), 11 (double)")
    wide = biased.astype(_PRECISIONS.get(softmax_precision or 0, q.dtype))
    probs = _softmax_rows(wide, masked).astype(q.dtype)
    y = probs @ value
    if q.ndim == 3:
        y = y.transpose(0, 2, 1, 3).reshape(y.shape[0], y.shape[2], -1)
    shown = {0: scores, 1: scores, 2: biased, 3: probs}.get(qk_matmul_output_mode)
    if shown is None:
        raise ValueError(f"qk_matmul_output_mode {qk_matmul_output_mode} is not 0, 1, 2 or 3")
    return y, present_key, present_value, shown.astype(q.dtype)
