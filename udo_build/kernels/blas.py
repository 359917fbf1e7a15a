"""numpy's own BLAS, called directly: `gemm(a, b, out, beta)` is out = a @ b + beta * out.

np.matmul reaches the same sgemm/dgemm (transposed views and row strides wider than a row
passed as such), but always with beta = 0. Calling the library itself (through ctypes, with the
CBLAS interface) lets a convolution pre-fill its output with the bias (and the residual addend)
and have the GEMM accumulate into it (beta = 1: one pass over the output fewer, OpenBLAS skips
its own zeroing pass). The ctypes call costs about 10 us more than np.matmul's, so `gemm`
makes it only with beta != 0 and an output of DIRECT_MIN elements or more (below that, the
pass it saves is cheaper than the call); with beta = 0 np.matmul makes the same BLAS call.

The library is the OpenBLAS numpy loaded (found among the process's mapped libraries, as its
`scipy_cblas_sgemm64_` or `cblas_sgemm` symbols, with 64- or 32-bit integers by the symbol's
suffix): the same code, the same threads (`openblas_set_num_threads` governs both). Where it is
not found (another BLAS, another OS), `gemm` falls back to np.matmul plus an add; its results
then differ from the direct call's by float32 rounding only (the bias is added after the
product instead of before). On one machine the choice never changes: results are deterministic.

The same library's thread count, read and set (`blas_threads(n)`, a context manager; a no-op
where the library is not found): the worker pool (udo_build.runtime.pool) runs every inference
of its loops on one BLAS thread, since OpenBLAS's results change with its thread count.
"""

from __future__ import annotations

import contextlib
import ctypes
import re
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path

import numpy as np

ROW_MAJOR, NO_TRANS, TRANS = 101, 111, 112
DIRECT_MIN = 1 << 14  # output elements from which a beta != 0 GEMM calls the BLAS directly
SYMBOLS = (("scipy_cblas_", "64_", ctypes.c_int64), ("scipy_cblas_", "", ctypes.c_int),
           ("cblas_", "64_", ctypes.c_int64), ("cblas_", "", ctypes.c_int))


@cache
def _openblas() -> tuple[ctypes.CDLL, str, str, type] | None:
    """numpy's OpenBLAS among the libraries this process mapped (Linux), by its CBLAS symbols:
    (the library, the CBLAS prefix, the symbols' suffix, its integer type); None elsewhere."""
    try:
        text = Path("/proc/self/maps").read_text()
    except OSError:
        return None
    for path in sorted(set(re.findall(r"(/\S*openblas\S*\.so\S*)", text))):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix, suffix, integer in SYMBOLS:
            if hasattr(lib, f"{prefix}sgemm{suffix}") and hasattr(lib, f"{prefix}dgemm{suffix}"):
                return lib, prefix, suffix, integer
    return None


@cache
def _library() -> dict[np.dtype, Callable[..., None]]:
    """{float32: sgemm, float64: dgemm} of numpy's OpenBLAS; empty where it is not found."""
    found = _openblas()
    if found is None:
        return {}
    lib, prefix, suffix, integer = found
    return {np.dtype(np.float32): _bind(lib, f"{prefix}sgemm{suffix}", integer, ctypes.c_float),
            np.dtype(np.float64): _bind(lib, f"{prefix}dgemm{suffix}", integer, ctypes.c_double)}


@cache
def _thread_count() -> tuple[Callable[[], int], Callable[[int], None]] | None:
    """(get, set) of the library's thread count (`scipy_openblas_set_num_threads64_` beside
    `scipy_cblas_sgemm64_`, `openblas_set_num_threads` beside `cblas_sgemm`)."""
    found = _openblas()
    if found is None:
        return None
    lib, prefix, suffix, _ = found
    base = prefix.replace("cblas_", "openblas_")  # scipy_cblas_ -> scipy_openblas_
    get, put = f"{base}get_num_threads{suffix}", f"{base}set_num_threads{suffix}"
    if not (hasattr(lib, get) and hasattr(lib, put)):
        return None
    return getattr(lib, get), getattr(lib, put)


@contextlib.contextmanager
def blas_threads(n: int) -> Iterator[None]:
    """numpy's OpenBLAS on `n` threads inside, as it was after (no-op where it is not found)."""
    found = _thread_count()
    if found is None:
        yield
        return
    get, put = found
    before = int(get())
    put(n)
    try:
        yield
    finally:
        put(before)


def _bind(lib: ctypes.CDLL, name: str, integer: type, real: type) -> Callable[..., None]:
    fn = getattr(lib, name)
    fn.restype = None
    fn.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int, integer, integer, integer, real,
                   ctypes.c_void_p, integer, ctypes.c_void_p, integer, real, ctypes.c_void_p,
                   integer]
    return fn


def direct() -> bool:
    """Whether `gemm` calls the BLAS itself (else np.matmul)."""
    return bool(_library())


def _operand(a: np.ndarray) -> tuple[int, int] | None:
    """(CBLAS transpose flag, leading dimension) of a 2-D operand, None if BLAS cannot read it
    as it is (neither axis has unit stride)."""
    item = a.itemsize
    rows, cols = a.strides
    if cols == item and rows % item == 0 and rows >= max(a.shape[1], 1) * item:
        return NO_TRANS, rows // item
    if rows == item and cols % item == 0 and cols >= max(a.shape[0], 1) * item:
        return TRANS, cols // item
    return None


def gemm(a: np.ndarray, b: np.ndarray, out: np.ndarray, beta: float = 0.0) -> np.ndarray:
    """out = a @ b + beta * out for 2-D a (M, K), b (K, N), out (M, N) of one dtype; out's rows
    contiguous (its row stride may be wider). Returns out."""
    if beta == 0.0 or out.size < DIRECT_MIN:
        return _fallback(a, b, out, beta)
    fn = _library().get(out.dtype) if a.dtype == b.dtype == out.dtype else None
    m, k = a.shape
    n = b.shape[1]
    left, right = _operand(a), _operand(b)
    if (fn is None or left is None or right is None or out.strides[1] != out.itemsize
            or out.strides[0] < n * out.itemsize or 0 in (m, n, k)):
        return _fallback(a, b, out, beta)
    fn(ROW_MAJOR, left[0], right[0], m, n, k, 1.0, a.ctypes.data, left[1], b.ctypes.data,
       right[1], beta, out.ctypes.data, out.strides[0] // out.itemsize)
    return out


def _fallback(a: np.ndarray, b: np.ndarray, out: np.ndarray, beta: float) -> np.ndarray:
    if beta == 0.0:
        np.matmul(a, b, out=out)
    else:
        product = np.matmul(a, b)
        if beta != 1.0:
            out *= beta
        out += product
    return out
