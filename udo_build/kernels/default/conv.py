"""Convolutions: Conv, and FusedConv (Conv + residual addend + activation, made by the runtime).

A 2-d float32 convolution of one group runs the compiled kernel (`c/conv.c`, built on first
use by `udo_build.kernels.compiled`): one implicit GEMM per image over the input's phases (the
zero-padded input split by the strides), with the bias, the addend and Relu applied as each tile
of the output is stored. Its weights are packed for it once (`ConvWeights`: the float session
keeps one per convolution whose weights are a constant; a caller that passes none gets them
packed for the call). Each output value is one chain of fused multiply-adds over the taps in
order, the same bits on every x86 vector width; results differ from the numpy path below by
float32 rounding only.

The numpy path is the reference and the fallback (UDO_BUILD_NATIVE_KERNELS=0, no C compiler,
another dtype, 1-d and 3-d convolutions, groups): BLAS GEMMs of the weights, seen as
(M, C * taps), by columns of the input, called through numpy's own BLAS
(`udo_build.kernels.blas`) into an output pre-filled with the bias and the residual addend (the
GEMM adds into it: no pass of its own for either). The columns, by shape (never by timing:
results do not depend on the machine's speed):

- a 1x1 convolution without padding multiplies the input itself (strided first if it has
  strides);
- a 2-d stride-1 convolution whose output rows are wide enough reads each tap as one
  contiguous run of the padded input (`_wide`): a GEMM per tap straight from those runs from
  TAP_GEMM_CHANNELS input channels on, one GEMM over the runs copied below;
- any other (1-d, 3-d, narrow 2-d) copies into im2col columns, in one copy of a strided view
  of the zero-padded input with an axis per kernel tap (`im2col`, which the integer runtime
  shares);
- grouped and depthwise convolutions are one matmul batched over the groups (for depthwise ones
  numpy's batched small products beat a multiply-accumulate per tap by about 2x).
"""

from __future__ import annotations

import ctypes
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..blas import gemm
from ._common import pad_spatial, relu_into, spatial, window_pads
from ._package import DEFAULT

ACTIVATIONS = ("", "Relu")
TAP_GEMM_CHANNELS = 64  # from this many input channels on, a wide convolution has a GEMM per tap


@DEFAULT.op("Conv")
def conv(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, *, auto_pad: str = "NOTSET",
         dilations: Sequence[int] | None = None, group: int = 1,
         kernel_shape: Sequence[int] | None = None, pads: Sequence[int] | None = None,
         strides: Sequence[int] | None = None) -> np.ndarray:
    return fused_conv(x, w, b, None, auto_pad=auto_pad, dilations=dilations, group=group,
                      kernel_shape=kernel_shape, pads=pads, strides=strides)


@DEFAULT.op("FusedConv")
def fused_conv(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None,
               z: np.ndarray | None = None, *, activation: str = "", auto_pad: str = "NOTSET",
               dilations: Sequence[int] | None = None, group: int = 1,
               kernel_shape: Sequence[int] | None = None, pads: Sequence[int] | None = None,
               strides: Sequence[int] | None = None,
               packed: ConvWeights | None = None, out: np.ndarray | None = None) -> np.ndarray:
    """activation(conv(x, w) + b + z). `packed`: the weights' packings for the compiled
    kernel, kept by the caller from one run to the next (else made for this call). `out`:
    where to write the result (of its shape and dtype, each image C-contiguous: a Concat's
    channel slice), returned."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"FusedConv activation {activation!r} is not one of {ACTIVATIONS}")
    weights = packed if packed is not None else ConvWeights(w)
    call = weights.call(x, b, z, group, kernel_shape, auto_pad, pads, strides, dilations)
    if out is not None and (out.shape != call.shape or out.dtype != call.dtype):
        raise ValueError(f"out is {out.dtype} {list(out.shape)}, the convolution makes "
                         f"{call.dtype} {list(call.shape)}")
    lib = _library() if call.takes and (out is None or all(
        out[i].flags.c_contiguous for i in range(out.shape[0]))) else None
    if lib is not None:
        y = out
        if y is None and weights.buffers is not None:
            y = weights.buffers.take(call.shape, call.dtype)
        if y is None:
            y = np.empty(call.shape, call.dtype)
        _native(lib, x, weights, call, b, z, y, activation == "Relu")
        return y
    if out is not None:  # the numpy path into its own array, copied
        np.copyto(out, fused_conv(x, w, b, z, activation=activation, auto_pad=auto_pad,
                                  dilations=dilations, group=group, kernel_shape=kernel_shape,
                                  pads=pads, strides=strides, packed=weights))
        return out
    geometry, shape, dtype = call.geometry, call.shape, call.dtype
    y = np.empty(shape, dtype)
    if group > 1:
        _grouped(x, w, group, geometry, y, b, z)
    elif wide_pays(x.shape[2:], geometry):
        for i in range(x.shape[0]):
            _wide(x[i], w, geometry, y[i], b, None if z is None else z[i], activation)
        return y
    else:
        for i in range(x.shape[0]):
            cols = _columns(x[i:i + 1], geometry).reshape(w[0].size, -1)
            out = y[i].reshape(w.shape[0], -1)
            gemm(w.reshape(w.shape[0], -1), cols, out,
                 _prefill(out, b, None if z is None else z[i].reshape(out.shape)))
    if activation == "Relu":
        relu_into(y, y)
    return y


# -- the compiled kernel: an implicit GEMM over the input's phases (c/conv.c) ---------------------


class Call:
    """What a convolution with one input shape and dtypes needs, found once (`ConvWeights.call`):
    its geometry, output shape and dtype, whether the compiled kernel takes it, and for a 2-d
    convolution of one group the 14 numbers udo_conv reads (their address) and the address of
    the weights' packing for its orientation (made on the first run)."""

    __slots__ = ("geometry", "shape", "dtype", "takes", "numbers", "address", "packing", "bias",
                 "bias_address")

    def __init__(self, geometry: Geometry, shape: tuple[int, ...], dtype: np.dtype,
                 takes: bool, image: tuple[int, ...]) -> None:
        self.geometry, self.shape, self.dtype, self.takes = geometry, shape, dtype, takes
        g, two_d = geometry, len(geometry.kernel) == 2 and len(image) == 3
        self.numbers = np.array([*image, *g.kernel, *g.strides, *g.dilations, *g.begin,
                                 *g.outs, shape[1]], np.int64) if two_d else None
        self.address = 0 if self.numbers is None else self.numbers.ctypes.data
        self.packing: int | None = None
        self.bias: np.ndarray | None = None  # the bias of the last call, and its address
        self.bias_address = 0


class ConvWeights:
    """A convolution's weights and their packings for the compiled kernel, each made on first
    use and kept: the float runtime's plan holds one per convolution whose weights are a
    constant, so a model's weights are packed once, not at every run; its geometry is found once
    per input shape and attributes (`call`). `buffers`, where
    given, lends output arrays (`take(shape, dtype)`: one, or None), the float session's pool
    of dead tensors (udo_build.runtime.buffers)."""

    __slots__ = ("weights", "buffers", "calls", "_packings")

    def __init__(self, weights: np.ndarray, buffers: Any = None) -> None:
        self.weights = weights
        self.buffers = buffers
        self.calls: dict[tuple, Call] = {}  # by input shapes, dtypes and attributes
        self._packings: dict[int, np.ndarray] = {}

    def call(self, x: np.ndarray, b: np.ndarray | None, z: np.ndarray | None, group: int,
             kernel_shape: Sequence[int] | None, auto_pad: str, pads: Sequence[int] | None,
             strides: Sequence[int] | None, dilations: Sequence[int] | None) -> Call:
        """This convolution's `Call` for x (and b, z) of these shapes and dtypes and these
        attributes."""
        key = (x.shape, x.dtype, None if b is None else b.dtype,
               None if z is None else z.shape, None if z is None else z.dtype, group, auto_pad,
               *(None if v is None else tuple(v) for v in (kernel_shape, pads, strides,
                                                         dilations)))
        found = self.calls.get(key)
        if found is None:
            w = self.weights
            g = _geometry(x, w, group, kernel_shape, auto_pad, pads, strides, dilations)
            shape = (x.shape[0], w.shape[0], *g.outs)
            found = self.calls[key] = Call(g, shape, np.result_type(w, x),
                                           _takes(x, w, b, z, group, g, shape),
                                           tuple(x.shape[1:]) if group == 1 else ())
        return found

    def packing_of(self, lib: Any, call: Call) -> int:
        """The address of the packing `call`'s orientation reads (made on first use)."""
        if call.packing is None:
            call.packing = self.packing(lib, int(lib.conv_cols(call.address))).ctypes.data
        return call.packing

    def packing(self, lib: Any, cols: int) -> np.ndarray:
        """The weights as (M, K) packed for the orientation `cols` (see c/conv.c)."""
        found = self._packings.get(cols)
        if found is None:
            m, k = self.weights.shape[0], self.weights[0].size
            found = aligned(int(lib.conv_packed_size(m, k, cols)))
            source = np.ascontiguousarray(self.weights, np.float32)  # held through the call
            lib.conv_pack(source.ctypes.data, m, k, cols, found.ctypes.data)
            found.flags.writeable = False
            self._packings[cols] = found
        return found


def run_compiled(lib: Any, x: np.ndarray, weights: ConvWeights, b: np.ndarray | None, *,
                 auto_pad: str = "NOTSET", dilations: Sequence[int] | None = None,
                 pads: Sequence[int] | None = None, strides: Sequence[int] | None = None,
                 out: Any = None, zp: int = 0) -> np.ndarray:
    """conv(x, weights) + b by the compiled kernel (`lib`, the caller's), for float32 x
    (N, C, H, W), or integers of 8 or 16 bits less their zero point `zp` (centered as the
    kernel reads them: exact in float32), and a 2-d convolution of one group;
    `weights.weights` may be of any numeric dtype (packed as float32 once): the integer path's
    exact products. `out(shape)`, where given, lends the float32 output array."""
    call = weights.call(x, b, None, 1, None, auto_pad, pads, strides, dilations)
    y = out(call.shape) if out is not None else np.empty(call.shape, np.float32)
    if y.size:
        _native(lib, x, weights, call, b, None, y, False, zp=zp)
    return y


_INT_KINDS = {np.dtype(np.uint8): 0, np.dtype(np.int8): 1, np.dtype(np.uint16): 2,
              np.dtype(np.int16): 3}  # udo_conv_int's x_kind


def pack_for(weights: ConvWeights, image: tuple[int, ...], *, auto_pad: str = "NOTSET",
             dilations: Sequence[int] | None = None, group: int = 1,
             kernel_shape: Sequence[int] | None = None, pads: Sequence[int] | None = None,
             strides: Sequence[int] | None = None, **_: Any) -> None:
    """Pack `weights` now for input images of this shape (C, H, W), where the compiled kernel
    will run them (nothing otherwise): processes forked after it share the packing instead of
    each making its own on its first run."""
    w = weights.weights  # float32 (the float path) or integers (the integer path's)
    if group != 1 or w.ndim != 4 or not (w.dtype == np.float32 or w.dtype.kind in "iu") \
            or len(image) != 3:
        return
    lib = _library()
    if lib is None:
        return
    x = np.broadcast_to(np.float32(0), (1, *image))  # the call reads its shape alone
    call = weights.call(x, None, None, group, kernel_shape, auto_pad, pads, strides, dilations)
    if 0 not in call.shape and image[0]:
        weights.packing_of(lib, call)


def aligned(size: int, dtype: type = np.float32) -> np.ndarray:
    """An empty array of `size` elements of dtype starting on a 64-byte boundary."""
    item = np.dtype(dtype).itemsize
    raw = np.empty(size + 64 // item, dtype)
    start = (-raw.ctypes.data % 64) // item
    return raw[start:start + size]


def _takes(x: np.ndarray, w: np.ndarray, b: np.ndarray | None, z: np.ndarray | None,
           group: int, g: Geometry, shape: tuple[int, ...]) -> bool:
    """Whether the compiled kernel runs this convolution (2-d, one group, float32 tensors,
    something to compute), where its library is there."""
    f32 = np.float32
    return not (group != 1 or len(g.kernel) != 2 or x.dtype != f32 or w.dtype != f32
                or 0 in shape or x.shape[1] == 0 or (b is not None and b.dtype != f32)
                or (z is not None and (z.dtype != f32 or z.shape != shape)))


def _library() -> Any:
    from ..compiled import library

    return library()


def _native(lib: Any, x: np.ndarray, weights: ConvWeights, call: Call, b: np.ndarray | None,
            z: np.ndarray | None, y: np.ndarray, relu: bool, *, zp: int = 0) -> None:
    """Each image of x (N, C, H, W) into y (N, M, Ho, Wo: each image C-contiguous) by the
    compiled kernel: udo_conv for float32 x, udo_conv_int for integers (less `zp`; no
    addend)."""
    kind = _INT_KINDS.get(x.dtype)
    if not x.flags.c_contiguous:
        x = np.ascontiguousarray(x)
    if z is not None and not z.flags.c_contiguous:
        z = np.ascontiguousarray(z)
    bias = 0
    if b is not None:
        if b is call.bias:  # the plan's constant, as at the last call
            bias = call.bias_address
        else:
            if not (b.ndim == 1 and b.flags.c_contiguous and b.dtype == np.float32):
                b = np.ascontiguousarray(b.reshape(-1), np.float32)
            bias = call.bias_address = _address(b)
            call.bias = b  # held: its address stays its own
    numbers, packing = call.address, weights.packing_of(lib, call)
    xa, ya, za = _address(x), _address(y), 0 if z is None else _address(z)
    for i in range(x.shape[0]):
        if kind is None:
            status = lib.conv(xa + i * x.strides[0], numbers, packing, bias or None,
                              za + i * z.strides[0] if z is not None else None, int(relu),
                              ya + i * y.strides[0])
        else:
            status = lib.conv_int(xa + i * x.strides[0], kind, float(zp), numbers, packing,
                                  bias or None, int(relu), ya + i * y.strides[0])
        if status != 0:
            raise MemoryError("the compiled convolution could not allocate its panels")


def _address(a: np.ndarray) -> int:
    """The address of a's first element (faster than a.ctypes.data where a is a writeable
    C-contiguous array)."""
    if a.flags.writeable and a.flags.c_contiguous:
        return ctypes.addressof(ctypes.c_char.from_buffer(a))
    return a.ctypes.data


@dataclass(frozen=True)
class Geometry:
    """A convolution's window: kernel, strides, dilations, pads (start, end), output sizes."""

    kernel: tuple[int, ...]
    strides: tuple[int, ...]
    dilations: tuple[int, ...]
    begin: list[int]
    end: list[int]
    outs: list[int]


def _geometry(x: np.ndarray, w: np.ndarray, group: int, kernel_shape: Sequence[int] | None,
              auto_pad: str, pads: Sequence[int] | None, strides: Sequence[int] | None,
              dilations: Sequence[int] | None) -> Geometry:
    """The window of a convolution, its attributes checked against the tensors."""
    rank = x.ndim - 2
    kernel = tuple(w.shape[2:])
    if kernel_shape and tuple(kernel_shape) != kernel:
        raise ValueError(f"Conv kernel_shape {list(kernel_shape)} differs from the weights' "
                         f"{list(kernel)}")
    if x.shape[1] != w.shape[1] * group or w.shape[0] % group:
        raise ValueError(f"Conv input channels {x.shape[1]}, weights {list(w.shape)} and "
                         f"group {group} do not agree")
    strides_, dilations_ = spatial(strides, rank, 1), spatial(dilations, rank, 1)
    return Geometry(kernel, strides_, dilations_,
                    *window_pads(auto_pad, pads, x.shape[2:], kernel, strides_, dilations_))


def _prefill(out: np.ndarray, b: np.ndarray | None, z: np.ndarray | None) -> float:
    """out = b (per row) + z, what the GEMM then adds to; the GEMM's beta (0: nothing to add)."""
    if b is None and z is None:
        return 0.0
    if b is not None:
        b = b.reshape((-1,) + (1,) * (out.ndim - 1))
    if z is None:
        np.copyto(out, b)
    elif b is None:
        np.copyto(out, z)
    else:
        np.add(z, b, out=out)
    return 1.0


def _columns(x: np.ndarray, g: Geometry) -> np.ndarray:
    """The GEMM's right operand: a 1x1 unpadded convolution reads the input itself (strided
    first if it has strides), any other im2col's columns."""
    reach = [(o - 1) * s + 1 for o, s in zip(g.outs, g.strides, strict=True)]
    if all(k == 1 for k in g.kernel) and not any(g.begin) and all(
            r <= size for r, size in zip(reach, x.shape[2:], strict=True)):
        if any(s != 1 for s in g.strides):
            x = x[(Ellipsis,) + tuple(slice(None, r, s)
                                      for r, s in zip(reach, g.strides, strict=True))]
        return np.ascontiguousarray(x)
    return im2col(x, g.kernel, g.strides, g.dilations, g.begin, g.outs)


def _grouped(x: np.ndarray, w: np.ndarray, group: int, g: Geometry, y: np.ndarray,
             b: np.ndarray | None, z: np.ndarray | None) -> None:
    """Grouped and depthwise convolutions: one batched matmul over the groups (numpy's
    batched small products beat a multiply-accumulate per tap by about 2x)."""
    n, m = x.shape[0], w.shape[0]
    cols = _columns(x, g).reshape(n, group, w[0].size, -1)
    np.matmul(w.reshape(group, m // group, w[0].size), cols,
              out=y.reshape(n, group, m // group, cols.shape[-1]))
    if b is not None:
        y += b.reshape((-1,) + (1,) * len(g.outs))
    if z is not None:
        y += z


# -- wide rows: 2-d convolutions whose im2col copies whole contiguous rows -----------------------


def wide_pays(size: Sequence[int], g: Geometry) -> bool:
    """Whether a 2-d stride-1 convolution with a kernel larger than 1x1 takes the wide-row
    path: its rows carry (kw - 1) * dw junk columns, at most an eighth of the output's width
    (the GEMM's extra work). Chosen by shape only; strided convolutions measured slower this
    way (the compacting epilogue costs more than their im2col saves)."""
    if len(size) != 2 or all(k == 1 for k in g.kernel) or any(s != 1 for s in g.strides):
        return False
    return 8 * (g.kernel[1] - 1) * g.dilations[1] <= g.outs[1]


def _wide(x: np.ndarray, w: np.ndarray, g: Geometry, y: np.ndarray, b: np.ndarray | None,
          z: np.ndarray | None, activation: str) -> None:
    """One image (C, H, W) of a 2-d stride-1 convolution whose taps read contiguous rows.

    The input is zero-padded to rows of Wq = Wo + (kw - 1) * dw pixels. Tap (i, j) reads it
    shifted by i * dh rows and j * dw columns: for all output rows at once, one run of Ho * Wq
    values of each flat channel, a (C, Ho * Wq) matrix BLAS reads in place. With
    TAP_GEMM_CHANNELS input channels or more, each tap is its own GEMM adding into the output
    (no im2col at all); with fewer, the runs are copied into one (C * taps, Ho * Wq) operand
    for one GEMM. Either way the GEMM computes Wq - Wo junk columns per row, which the
    epilogue drops as it copies (and activates) the result into y."""
    (kh, kw), (dh, dw) = g.kernel, g.dilations
    ho, wo = g.outs
    wq = wo + (kw - 1) * dw
    c, m, size = x.shape[0], w.shape[0], ho * wq
    flat = _padded(x, g.begin, ho + (kh - 1) * dh + 1, wq).reshape(c, -1)
    starts = [i * dh * wq + j * dw for i in range(kh) for j in range(kw)]
    wide = np.empty((m, ho, wq), dtype=y.dtype)
    wide[:, :, wo:] = 0  # junk columns, kept finite
    beta = _prefill(wide[:, :, :wo], b, z)
    out = wide.reshape(m, size)
    if c >= TAP_GEMM_CHANNELS:
        per_tap = np.ascontiguousarray(w.reshape(m, c, kh * kw).transpose(2, 0, 1))
        for t, start in enumerate(starts):
            gemm(per_tap[t], flat[:, start:start + size], out, beta if t == 0 else 1.0)
    else:
        cols = np.empty((c, kh * kw, size), dtype=x.dtype)
        for t, start in enumerate(starts):
            cols[:, t] = flat[:, start:start + size]
        gemm(w.reshape(m, -1), cols.reshape(-1, size), out, beta)
    if activation == "Relu":
        np.maximum(wide[:, :, :wo], _zeros(wo, y.dtype), out=y)
    else:
        np.copyto(y, wide[:, :, :wo])


def _padded(x: np.ndarray, begin: Sequence[int], hq: int, wq: int) -> np.ndarray:
    """The input (C, H, W) zero-padded to (C, hq, wq), `begin` rows and columns first (the
    extra row at the bottom keeps the last tap's run inside the buffer)."""
    (bh, bw), (h, w) = begin, x.shape[1:]
    padded = np.zeros((x.shape[0], hq, wq), dtype=x.dtype)
    rows, cols = min(h, hq - bh), min(w, wq - bw)
    padded[:, bh:bh + rows, bw:bw + cols] = x[:, :rows, :cols]
    return padded


_ZEROS: dict[tuple[int, np.dtype], np.ndarray] = {}


def _zeros(n: int, dtype: np.dtype) -> np.ndarray:
    """A read-only row of n zeros (numpy's maximum against a broadcast row beats a scalar)."""
    key = (n, np.dtype(dtype))
    if key not in _ZEROS:
        zeros = np.zeros(n, dtype=dtype)
        zeros.flags.writeable = False
        _ZEROS[key] = zeros
    return _ZEROS[key]


def im2col(x: np.ndarray, kernel: tuple[int, ...], strides: tuple[int, ...],
           dilations: tuple[int, ...], begin: list[int], outs: list[int]) -> np.ndarray:
    """The columns (N, C, *kernel, *outs): for every tap, the input pixels it multiplies.

    The input is zero-padded to the extent the windows reach (cropped where a start pad is
    negative); the columns are then one copy of a strided view of it that has an axis per
    kernel tap and per output position (one numpy call for every tap at once: the same bytes
    as a copy per tap, without a Python loop over the taps)."""
    cols = np.empty((*x.shape[:2], *kernel, *outs), dtype=x.dtype)
    if cols.size == 0:
        return cols
    crop, pad_begin, pad_end = [], [], []
    for k, s, d, b, o, size in zip(kernel, strides, dilations, begin, outs, x.shape[2:],
                                   strict=True):
        reach = (o - 1) * s + (k - 1) * d + 1  # the padded extent the windows read
        crop.append(slice(max(0, -b), None))
        pad_begin.append(max(b, 0))
        pad_end.append(max(0, reach - max(b, 0) - (size - max(0, -b))))
    padded = pad_spatial(x[(Ellipsis, *crop)], pad_begin, pad_end)
    steps = padded.strides[2:]
    view = np.lib.stride_tricks.as_strided(
        padded, cols.shape, padded.strides[:2]
        + tuple(a * d for a, d in zip(steps, dilations, strict=True))
        + tuple(a * s for a, s in zip(steps, strides, strict=True)), writeable=False)
    np.copyto(cols, view)
    return cols


@DEFAULT.op("ConvTranspose")
def conv_transpose(x: np.ndarray, w: np.ndarray, b: np.ndarray | None = None, *,
                   auto_pad: str = "NOTSET", dilations: Sequence[int] | None = None,
                   group: int = 1, kernel_shape: Sequence[int] | None = None,
                   output_padding: Sequence[int] | None = None,
                   output_shape: Sequence[int] | None = None, pads: Sequence[int] | None = None,
                   strides: Sequence[int] | None = None) -> np.ndarray:
    """The gradient of Conv: one matmul (weights transposed, per group) gives every tap's
    contribution of every input pixel; col2im adds them, tap by tap, into the output."""
    n, c = x.shape[:2]
    rank, kernel, sizes = x.ndim - 2, tuple(w.shape[2:]), x.shape[2:]
    mg = w.shape[1]
    strides_, dilations_ = spatial(strides, rank, 1), spatial(dilations, rank, 1)
    extra = spatial(output_padding, rank, 0)
    full = [(i - 1) * s + (k - 1) * d + 1 + e for i, s, k, d, e in
            zip(sizes, strides_, kernel, dilations_, extra, strict=True)]
    if output_shape is None and auto_pad in ("SAME_UPPER", "SAME_LOWER"):
        output_shape = [i * s for i, s in zip(sizes, strides_, strict=True)]
    begin, end = _transpose_pads(auto_pad, pads, output_shape, full, rank)
    weights = w.reshape(group, c // group, mg * math.prod(kernel)).transpose(0, 2, 1)
    taps = np.matmul(weights, x.reshape(n, group, c // group, -1))
    taps = taps.reshape(n, group * mg, *kernel, *sizes)
    y = np.zeros((n, group * mg, *full), dtype=taps.dtype)
    for tap in np.ndindex(*kernel):
        index = tuple(slice(t * d, t * d + (i - 1) * s + 1, s) for t, d, i, s in
                      zip(tap, dilations_, sizes, strides_, strict=True))
        y[(slice(None), slice(None)) + index] += taps[(slice(None), slice(None)) + tap]
    y = _crop(y, begin, end)
    if b is not None:
        y = y + b.reshape((-1,) + (1,) * rank)
    return np.ascontiguousarray(y)


def _crop(y: np.ndarray, begin: list[int], end: list[int]) -> np.ndarray:
    """y without `begin`/`end` pixels per spatial axis; negative ones add zeros instead."""
    if min(begin + end, default=0) >= 0:
        return y[(Ellipsis,) + tuple(slice(b, n - e) for b, e, n in
                                     zip(begin, end, y.shape[2:], strict=True))]
    sizes = [n - b - e for b, e, n in zip(begin, end, y.shape[2:], strict=True)]
    out = np.zeros((*y.shape[:2], *sizes), dtype=y.dtype)
    src = tuple(slice(max(b, 0), n - max(e, 0)) for b, e, n in
                zip(begin, end, y.shape[2:], strict=True))
    dst = tuple(slice(max(-b, 0), s - max(-e, 0)) for b, e, s in
                zip(begin, end, sizes, strict=True))
    out[(Ellipsis,) + dst] = y[(Ellipsis,) + src]
    return out


def _transpose_pads(auto_pad: str, pads: Sequence[int] | None,
                    output_shape: Sequence[int] | None, full: list[int],
                    rank: int) -> tuple[list[int], list[int]]:
    """ConvTranspose's (start, end) pads: given, or set by output_shape (auto_pad SAME_*: the
    input's size times the stride, unless output_shape says otherwise)."""
    if output_shape is not None:
        target = list(output_shape)[-rank:]
        total = [f - t for f, t in zip(full, target, strict=True)]
        small, big = [t // 2 for t in total], [t - t // 2 for t in total]
        return (small, big) if auto_pad == "SAME_UPPER" else (big, small)
    given = list(pads) if pads and auto_pad != "VALID" else [0] * (2 * rank)
    return [int(p) for p in given[:rank]], [int(p) for p in given[rank:]]
