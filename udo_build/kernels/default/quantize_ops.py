"""Quantization ops: QuantizeLinear, DequantizeLinear, DynamicQuantizeLinear, QLinearMatMul,
QLinearConv, MatMulInteger and ConvInteger.

A scale (and its zero point) is per tensor (a scalar or one value), per axis (1-D, one value
per slice of `axis`) or blocked (the input's rank, each value repeated `block_size` times along
`axis`). Quantizing rounds half to even and saturates to the output type: uint8, int8, uint16,
int16 (and int32 for dequantizing). 2-, 4- and float8-bit types are refused. Integer products
are exact (int64 accumulation); the QLinear ops requantize the exact accumulator in float64.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ._common import axis_of
from ._package import DEFAULT
from .conv import conv

# ONNX element type -> the integer types a quantized tensor may have here
INTEGER_TYPES = {2: np.uint8, 3: np.int8, 4: np.uint16, 5: np.int16, 6: np.int32}
FLOAT_TYPES = {1: np.float32, 10: np.float16, 11: np.float64}


def _onnx_type(code: int, table: dict[int, type]) -> np.dtype:
    if code not in table:
        from onnx import TensorProto

        name = TensorProto.DataType.Name(code) if code in TensorProto.DataType.values() \
            else str(code)
        raise NotImplementedError(f"element type {name.lower()} (supported: "
                                  + ", ".join(np.dtype(t).name for t in table.values()) + ")")
    return np.dtype(table[code])


def expand_param(p: np.ndarray, shape: Sequence[int], axis: int, block_size: int,
                 name: str) -> np.ndarray:
    """A scale or zero point shaped to broadcast against a tensor of `shape`."""
    p = np.asarray(p)
    if p.ndim == 0 or (p.ndim == 1 and p.size == 1 and block_size == 0):
        return p.reshape(())
    if not shape:
        raise ValueError(f"{name} of shape {list(p.shape)} for a scalar input")
    axis = axis_of(axis, len(shape))
    if block_size > 0:
        if p.ndim != len(shape):
            raise ValueError(f"blocked {name} has rank {p.ndim}, the input has {len(shape)}")
        full = np.repeat(p, block_size, axis=axis)
        if full.shape[axis] < shape[axis]:
            raise ValueError(f"{name} of {p.shape[axis]} blocks of {block_size} does not cover "
                             f"axis {axis} of size {shape[axis]}")
        return np.take(full, np.arange(shape[axis]), axis=axis)
    if p.ndim != 1 or p.size != shape[axis]:
        raise ValueError(f"{name} of shape {list(p.shape)}: per-axis parameters are 1-D with "
                         f"{shape[axis]} values (axis {axis})")
    return p.reshape([-1 if i == axis else 1 for i in range(len(shape))])


def saturated(values: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Rounded values (half to even) clipped to the integer type's range."""
    info = np.iinfo(dtype)
    return np.clip(np.rint(values), info.min, info.max).astype(dtype)


@DEFAULT.op("QuantizeLinear")
def quantize_linear(x: np.ndarray, y_scale: np.ndarray, y_zero_point: np.ndarray | None = None,
                    *, axis: int = 1, block_size: int = 0, output_dtype: int = 0,
                    saturate: int = 1, precision: int = 0) -> np.ndarray:
    del saturate  # float8 only
    if y_zero_point is not None:
        dtype = np.dtype(y_zero_point.dtype)
        if dtype not in map(np.dtype, INTEGER_TYPES.values()) or dtype == np.int32:
            raise NotImplementedError(f"QuantizeLinear to {dtype.name}")
        if output_dtype and _onnx_type(output_dtype, INTEGER_TYPES) != dtype:
            raise ValueError(f"output_dtype {output_dtype} differs from y_zero_point's "
                             f"{dtype.name}")
    else:
        dtype = _onnx_type(output_dtype, INTEGER_TYPES) if output_dtype else np.dtype(np.uint8)
    wide = _onnx_type(precision, FLOAT_TYPES) if precision else np.dtype(y_scale.dtype)
    scale = expand_param(y_scale, x.shape, axis, block_size, "y_scale").astype(wide)
    q = np.rint(x.astype(wide) / scale).astype(np.float64)
    if y_zero_point is not None:
        q = q + expand_param(y_zero_point, x.shape, axis, block_size, "y_zero_point")
    return saturated(q, dtype)


@DEFAULT.op("DequantizeLinear")
def dequantize_linear(x: np.ndarray, x_scale: np.ndarray,
                      x_zero_point: np.ndarray | None = None, *, axis: int = 1,
                      block_size: int = 0, output_dtype: int = 0) -> np.ndarray:
    if x.dtype.kind not in "iu":
        raise NotImplementedError(f"DequantizeLinear of {x.dtype.name}")
    dtype = _onnx_type(output_dtype, FLOAT_TYPES) if output_dtype else np.dtype(x_scale.dtype)
    values = x.astype(np.int64)
    if x_zero_point is not None:
        values = values - expand_param(x_zero_point, x.shape, axis, block_size,
                                       "x_zero_point").astype(np.int64)
    scale = expand_param(x_scale, x.shape, axis, block_size, "x_scale").astype(dtype)
    return (values.astype(dtype) * scale).astype(dtype)


@DEFAULT.op("DynamicQuantizeLinear")
def dynamic_quantize_linear(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """uint8 over [min(x, 0), max(x, 0)]: (y, scale, zero point)."""
    low = np.float32(min(float(np.min(x, initial=0.0)), 0.0))
    high = np.float32(max(float(np.max(x, initial=0.0)), 0.0))
    scale = np.float32((high - low) / np.float32(255))
    if scale == 0:
        zero = np.uint8(0)
        return np.zeros(x.shape, np.uint8), scale, zero
    zero = saturated(np.float32(-low / scale), np.dtype(np.uint8))
    y = saturated(np.rint(x.astype(np.float32) / scale) + zero, np.dtype(np.uint8))
    return y, np.asarray(scale, np.float32), np.asarray(zero)


def _centered(q: np.ndarray, zero: np.ndarray | None, shape_axis: int | None) -> np.ndarray:
    """q - zero in int64; a 1-D zero point applies along `shape_axis` of q."""
    values = q.astype(np.int64)
    if zero is None:
        return values
    z = np.asarray(zero).astype(np.int64)
    if z.ndim == 1 and z.size > 1 and shape_axis is not None:
        z = z.reshape([-1 if i == shape_axis % q.ndim else 1 for i in range(q.ndim)])
    elif z.ndim == 1:
        z = z.reshape(())
    return values - z


@DEFAULT.op("MatMulInteger")
def matmul_integer(a: np.ndarray, b: np.ndarray, a_zero_point: np.ndarray | None = None,
                   b_zero_point: np.ndarray | None = None) -> np.ndarray:
    """(a - a_zero_point) @ (b - b_zero_point) in int32; 1-D zero points are per row of a and
    per column of b."""
    a_rows = -2 if a.ndim > 1 else None
    product = np.matmul(_centered(a, a_zero_point, a_rows), _centered(b, b_zero_point, -1))
    return product.astype(np.int32)


@DEFAULT.op("ConvInteger")
def conv_integer(x: np.ndarray, w: np.ndarray, x_zero_point: np.ndarray | None = None,
                 w_zero_point: np.ndarray | None = None, *, auto_pad: str = "NOTSET",
                 dilations: Sequence[int] | None = None, group: int = 1,
                 kernel_shape: Sequence[int] | None = None, pads: Sequence[int] | None = None,
                 strides: Sequence[int] | None = None) -> np.ndarray:
    """conv(x - x_zero_point, w - w_zero_point) in int32 (w's zero point per output channel
    when 1-D); the padding is zero after the shift, as ONNX defines."""
    xs = _centered(x, x_zero_point, None).astype(np.float64)
    ws = _centered(w, w_zero_point, 0).astype(np.float64)
    y = conv(xs, ws, auto_pad=auto_pad, dilations=dilations, group=group,
             kernel_shape=kernel_shape, pads=pads, strides=strides)
    return np.rint(y).astype(np.int32)  # float64 sums of these products are exact


def _requantize(acc: np.ndarray, scale: np.ndarray, y_scale: np.ndarray,
                y_zero_point: np.ndarray | None, like: np.dtype) -> np.ndarray:
    """An exact accumulator times its scale, quantized with (y_scale, y_zero_point)."""
    real = acc.astype(np.float64) * scale.astype(np.float64)
    q = np.rint(real / np.float64(np.asarray(y_scale).reshape(())))
    dtype = np.dtype(y_zero_point.dtype) if y_zero_point is not None else like
    zero = 0 if y_zero_point is None else np.asarray(y_zero_point).astype(np.int64).reshape(())
    return saturated(q + zero, dtype)


@DEFAULT.op("QLinearMatMul")
def qlinear_matmul(a: np.ndarray, a_scale: np.ndarray, a_zero_point: np.ndarray,
                   b: np.ndarray, b_scale: np.ndarray, b_zero_point: np.ndarray,
                   y_scale: np.ndarray, y_zero_point: np.ndarray) -> np.ndarray:
    """Quantized a @ b: scales and zero points per tensor, or per row of a / column of b."""
    a_rows = -2 if a.ndim > 1 else None
    acc = np.matmul(_centered(a, a_zero_point, a_rows), _centered(b, b_zero_point, -1))
    sa = np.asarray(a_scale, np.float64)
    sa = sa.reshape(-1, 1) if sa.ndim == 1 and sa.size > 1 else sa.reshape(())
    sb = np.asarray(b_scale, np.float64)
    sb = sb.reshape(-1) if sb.ndim == 1 and sb.size > 1 else sb.reshape(())
    return _requantize(acc, sa * sb, y_scale, y_zero_point, a.dtype)


@DEFAULT.op("QLinearConv")
def qlinear_conv(x: np.ndarray, x_scale: np.ndarray, x_zero_point: np.ndarray, w: np.ndarray,
                 w_scale: np.ndarray, w_zero_point: np.ndarray, y_scale: np.ndarray,
                 y_zero_point: np.ndarray, b: np.ndarray | None = None, *,
                 auto_pad: str = "NOTSET", dilations: Sequence[int] | None = None,
                 group: int = 1, kernel_shape: Sequence[int] | None = None,
                 pads: Sequence[int] | None = None,
                 strides: Sequence[int] | None = None) -> np.ndarray:
    """Quantized convolution: w's scale and zero point per tensor or per output channel; the
    int32 bias B is in the accumulator's scale (x_scale * w_scale)."""
    acc = conv_integer(x, w, x_zero_point, w_zero_point, auto_pad=auto_pad,
                       dilations=dilations, group=group, kernel_shape=kernel_shape, pads=pads,
                       strides=strides).astype(np.int64)
    spread = (-1,) + (1,) * (x.ndim - 2)
    if b is not None:
        acc = acc + b.astype(np.int64).reshape(spread)
    sw = np.asarray(w_scale, np.float64)
    sw = sw.reshape(spread) if sw.ndim == 1 and sw.size > 1 else sw.reshape(())
    return _requantize(acc, np.float64(np.asarray(x_scale).reshape(())) * sw, y_scale,
                       y_zero_point, x.dtype)
