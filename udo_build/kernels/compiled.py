"""The emulator's own hot passes as C, compiled on first use with the host's C compiler and called
through ctypes: `c/passes.c` (the int8 path's requantization, fused with a residual Add's pair
lookup, the pair lookup alone, and a 2-d convolution's im2col of a centered integer input),
`c/conv.c` (the float path's 2-d convolution, see `udo_build.kernels.default.conv`), `c/pool.c`
(its MaxPool) and `c/qconv.c` (the int8 path's 2-d convolution on integer dot products, VNNI's or
AVX2's, requantized in its epilogue: see `udo_build.runtime.integer.conv`). The numpy code they
stand in for stays the reference and the fallback: `library()` is None when
UDO_BUILD_NATIVE_KERNELS=0, when no C compiler is found, or when the compile failed (one
RuntimeWarning then, with the compiler's first error line), and the callers run their numpy passes.

Where the library lives: a per-user cache folder (UDO_BUILD_KERNEL_CACHE, else
$XDG_CACHE_HOME/udo-build, else ~/.cache/udo-build), as `passes-<key>.so`, the key the sha256 of
the sources, the compiler's identity (`cc --version`), the flags and the machine (its
architecture and, since the flags name -march=native, the CPU's model and feature flags from
/proc/cpuinfo: a home folder shared by two kinds of CPU holds one library for each). It is
compiled into a temporary sibling and renamed into place under a file lock, so processes that
start at once (the worker pool, parallel builds) compile it once and never load a partial file;
a process loads it once, lazily: neither the CLI's start nor a no-op build imports this module.

The int8 passes give the same numbers on every CPU: they are integer arithmetic and IEEE
operations that are exact (a float32 or float64 integer to float64, an integer sum and a
product below 2^53, a multiplication by a power of two, comparisons) but one, the rounding,
which rint does half to even in the default rounding mode, as numpy's. `-O3 -march=native` lets
the compiler vectorize them with the host's widest instructions: exact operations give the same
result in any width, and without -ffast-math nothing is reassociated, with -ffp-contract=off no
product is fused into an addition (an FMA would round once where the numpy code rounds twice);
-fno-math-errno only lets rint be an instruction (it sets no errno anyway). The tests run both
paths on the same inputs and compare bits. The float convolution asks for its fused
multiply-adds by name (intrinsics): it differs from its numpy path by float32 rounding, and
gives the same bits on AVX-512 and AVX2 hosts (its tests compare the two builds); MaxPool is
exact.
"""

from __future__ import annotations

import ctypes
import hashlib
import json
import os
import platform
import shlex
import shutil
import subprocess
import threading
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..atomic import tmp_sibling

SOURCES = tuple(Path(__file__).parent / "c" / name
                for name in ("passes.c", "conv.c", "pool.c", "qconv.c"))
FLAGS = ("-O3", "-march=native", "-ffp-contract=off", "-fno-math-errno", "-fPIC", "-shared",
         "-fvisibility=hidden", "-std=c11")
SWITCH = "UDO_BUILD_NATIVE_KERNELS"  # "0": the numpy passes
CACHE = "UDO_BUILD_KERNEL_CACHE"  # the folder of compiled libraries
ACC_KINDS = {np.dtype(np.float32): 0, np.dtype(np.float64): 1, np.dtype(np.int32): 2}
OUT_KINDS = {np.dtype(np.uint8): 0, np.dtype(np.int8): 1, np.dtype(np.uint16): 2,
             np.dtype(np.int16): 3}

_P = ctypes.c_void_p
_N = ctypes.c_ssize_t


@dataclass(frozen=True)
class Library:
    """The loaded library: its file and its entry points."""

    path: Path
    requant: ctypes._CFuncPtr  # type: ignore[name-defined]
    pair_lookup: ctypes._CFuncPtr  # type: ignore[name-defined]
    im2col: ctypes._CFuncPtr  # type: ignore[name-defined]
    conv: ctypes._CFuncPtr  # type: ignore[name-defined]
    conv_pack: ctypes._CFuncPtr  # type: ignore[name-defined]
    conv_packed_size: ctypes._CFuncPtr  # type: ignore[name-defined]
    conv_cols: ctypes._CFuncPtr  # type: ignore[name-defined]
    maxpool: ctypes._CFuncPtr  # type: ignore[name-defined]
    pair_sum: ctypes._CFuncPtr  # type: ignore[name-defined]
    conv_int: ctypes._CFuncPtr  # type: ignore[name-defined]
    conv_onto_addend: ctypes._CFuncPtr  # type: ignore[name-defined]
    qconv: ctypes._CFuncPtr  # type: ignore[name-defined]
    qconv_pack: ctypes._CFuncPtr  # type: ignore[name-defined]
    qconv_packed_size: ctypes._CFuncPtr  # type: ignore[name-defined]
    qconv_isa: int  # udo_qconv's VNNI width (512, 256), 1: AVX2 pairs, 0: portable lanes


_LOCK = threading.Lock()
_LOADED: dict[str, Library | None] = {}  # "library" -> the library, or None: it failed


def enabled() -> bool:
    """Whether the compiled passes may run (UDO_BUILD_NATIVE_KERNELS is not 0)."""
    return os.environ.get(SWITCH, "1").strip() != "0"


def library() -> Library | None:
    """The compiled library, compiled and loaded on the first call of the process (None: the
    numpy passes run; see the module docstring)."""
    if not enabled():
        return None
    found = _LOADED.get("library", _LOCK)
    if found is not _LOCK:
        return found
    with _LOCK:
        if "library" not in _LOADED:
            _LOADED["library"] = _build_and_load()
        return _LOADED["library"]


def cache_folder() -> Path:
    """Where compiled libraries are kept (see the module docstring)."""
    if os.environ.get(CACHE):
        return Path(os.environ[CACHE])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "udo-build"


def compiler() -> list[str] | None:
    """The C compiler's command: $CC (with its own words), else cc, else gcc (None: none)."""
    if os.environ.get("CC"):
        words = shlex.split(os.environ["CC"])
        return words if words and shutil.which(words[0]) else None
    found = shutil.which("cc") or shutil.which("gcc")
    return [found] if found else None


def library_path(cc: list[str], identity: str) -> Path:
    """The cache file of the library this compiler (`cc`: its command, `identity`: its
    --version) makes."""
    key = json.dumps({"sources": [hashlib.sha256(s.read_bytes()).hexdigest() for s in SOURCES],
                      "compiler": [cc, identity], "flags": FLAGS, "machine": machine()},
                     sort_keys=True)
    return cache_folder() / f"passes-{hashlib.sha256(key.encode()).hexdigest()[:32]}.so"


def machine() -> str:
    """The architecture, and the CPU's model and feature flags (what -march=native reads)."""
    lines = []
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as info:
            for line in info:
                field = line.split(":", 1)[0].strip()
                if field in ("model name", "flags", "Features", "CPU implementer", "CPU part"):
                    lines.append(line.strip())
                if not line.strip() and lines:
                    break  # the first processor's block
    except OSError:
        pass
    return "\n".join([platform.machine(), platform.processor(), *lines])


def _build_and_load() -> Library | None:
    cc = compiler()
    if cc is None:
        _warn("no C compiler found (cc, gcc or $CC)")
        return None
    try:
        version = subprocess.run([*cc, "--version"], capture_output=True, text=True,
                                 check=False, env={**os.environ, "LC_ALL": "C"}).stdout
        path = library_path(cc, version)
        if not path.exists():
            error = _compile(cc, path)
            if error is not None:
                _warn(f"{cc[0]} failed: {error}")
                return None
        return _open(path)
    except OSError as exc:
        _warn(f"{exc.strerror or exc} ({exc.filename or cc[0]})")
        return None


def _compile(cc: list[str], path: Path) -> str | None:
    """Compile the source into `path` (a temporary sibling renamed there, under a file lock:
    one process compiles, the others find it); the compiler's first error line on failure."""
    from filelock import FileLock

    path.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(path.with_suffix(".lock"))):
        if path.exists():
            return None
        tmp = tmp_sibling(path)
        try:
            done = subprocess.run([*cc, *FLAGS, *map(str, SOURCES), "-o", str(tmp), "-lm"],
                                  capture_output=True, text=True, check=False,
                                  env={**os.environ, "LC_ALL": "C"})
            if done.returncode != 0:
                lines = [ln for ln in done.stderr.splitlines() if "error" in ln.lower()]
                return (lines or done.stderr.strip().splitlines() or ["no output"])[0]
            os.replace(tmp, path)
        finally:
            tmp.unlink(missing_ok=True)
    return None


def _open(path: Path) -> Library:
    lib = ctypes.CDLL(str(path))
    requant, lookup = lib.udo_requant, lib.udo_pair_lookup
    requant.restype = lookup.restype = ctypes.c_int
    requant.argtypes = [_P, ctypes.c_int, _N, _N, _N, _N, _N, _P, _N, _P, _N, ctypes.c_double,
                        ctypes.c_double, ctypes.c_int32, _P, ctypes.c_int, _P, ctypes.c_int, _P,
                        ctypes.c_int, _P, ctypes.c_int]
    conv_int = lib.udo_conv_int
    conv_int.restype = ctypes.c_int
    conv_int.argtypes = [_P, ctypes.c_int, ctypes.c_float, _P, _P, _P, ctypes.c_int, _P]
    pair_sum = lib.udo_pair_sum
    pair_sum.restype = None
    pair_sum.argtypes = [_P, _P, _N, _P, ctypes.c_int, _P]
    lookup.argtypes = [_P, _P, _N, _P, ctypes.c_int, _P]
    im2col = lib.udo_im2col
    im2col.restype = ctypes.c_int
    im2col.argtypes = [_P, ctypes.c_int, *[_N] * 13, ctypes.c_float, _P]
    conv, pack, size, cols = (lib.udo_conv, lib.udo_conv_pack, lib.udo_conv_packed_size,
                              lib.udo_conv_cols)
    conv.restype = pack.restype = cols.restype = ctypes.c_int
    conv.argtypes = [_P, _P, _P, _P, _P, ctypes.c_int, _P]
    pack.argtypes = [_P, _N, _N, ctypes.c_int, _P]
    size.restype = _N
    size.argtypes = [_N, _N, ctypes.c_int]
    cols.argtypes = [_P]
    maxpool = lib.udo_maxpool
    maxpool.restype = ctypes.c_int
    maxpool.argtypes = [_P, *[_N] * 13, _P]
    onto = lib.udo_conv_onto_addend
    onto.restype = ctypes.c_int
    onto.argtypes = [_P]
    qconv, qpack, qsize = lib.udo_qconv, lib.udo_qconv_pack, lib.udo_qconv_packed_size
    qconv.restype = ctypes.c_int
    qconv.argtypes = [_P, ctypes.c_int, ctypes.c_int, _P, _P, _P, _P, _P, _P, _P, _P]
    qpack.restype = None
    qpack.argtypes = [_P, _N, _N, _N, _P]
    qsize.restype = _N
    qsize.argtypes = [_N, _N, _N]
    isa = lib.udo_qconv_isa
    isa.restype = ctypes.c_int
    isa.argtypes = []
    return Library(path, requant, lookup, im2col, conv, pack, size, cols, maxpool, pair_sum,
                   conv_int, onto, qconv, qpack, qsize, int(isa()))


def _warn(why: str) -> None:
    warnings.warn(f"udo-build's compiled kernels are not available ({why}); the numpy passes "
                  f"run instead (set {SWITCH}=0 to say so and silence this)", RuntimeWarning,
                  stacklevel=3)


class Layout(NamedTuple):
    """How udo_requant reads an accumulator: channels x rows x cols elements, the channel and
    row strides in elements (the columns contiguous)."""

    channels: int
    rows: int
    cols: int
    channel_stride: int
    row_stride: int


def requantize(lib: Library, acc: np.ndarray, layout: Layout, factor: np.ndarray,
               offset: np.ndarray | None, clamp: tuple[float, float], zp: int, out: np.ndarray,
               pair: tuple[np.ndarray, np.ndarray, bool] | None = None,
               sum: tuple[np.ndarray, int] | None = None) -> None:
    """udo_requant over acc read as `layout`, into out (contiguous, channels x rows x cols
    elements); `factor` and `offset` float64, one per channel or one; `pair`: (table, other,
    q_first) for the lookup after (other contiguous raw bytes, out's shape); `sum`: (the six
    numbers, kinds) that compute the 1-byte table's bytes instead (udo_pair_sum checked)."""
    table, other, first = pair if pair is not None else (None, None, True)
    numbers, kinds = sum if sum is not None else (None, 0)
    status = lib.requant(
        acc.ctypes.data, ACC_KINDS[acc.dtype], *layout,
        factor.ctypes.data, int(factor.size > 1),
        None if offset is None else offset.ctypes.data, int(offset is not None and offset.size > 1),
        clamp[0], clamp[1], zp, out.ctypes.data,
        OUT_KINDS[out.dtype] if pair is None else 0,
        None if table is None else table.ctypes.data, 0 if table is None else table.itemsize,
        None if other is None else other.ctypes.data, int(first),
        None if numbers is None else numbers.ctypes.data, kinds)
    if status != 0:  # pragma: no cover (the callers pass only the kinds it takes)
        raise ValueError(f"udo_requant refused its arguments ({acc.dtype} -> {out.dtype})")


def pair_lookup(lib: Library, a: np.ndarray, b: np.ndarray, table: np.ndarray) -> np.ndarray:
    """table[a << 8 | b] for contiguous raw bytes a and b of one shape."""
    out = np.empty(a.shape, table.dtype)
    if lib.pair_lookup(a.ctypes.data, b.ctypes.data, a.size, table.ctypes.data, table.itemsize,
                       out.ctypes.data) != 0:  # pragma: no cover
        raise ValueError(f"udo_pair_lookup takes 1- or 2-byte tables, not {table.dtype}")
    return out


def im2col(lib: Library, x: np.ndarray, zp: int, kernel: tuple[int, ...],
           strides: tuple[int, ...], dilations: tuple[int, ...], begin: list[int] | tuple[int, ...],
           outs: list[int] | tuple[int, ...]) -> np.ndarray:
    """udo_im2col: the float32 columns (N, C, kh, kw, oh, ow) of x - zp for contiguous 1- or
    2-byte integers x (N, C, H, W)."""
    n, c, h, w = x.shape
    cols = np.empty((n, c, *kernel, *outs), np.float32)
    status = lib.im2col(x.ctypes.data, OUT_KINDS[x.dtype], n * c, h, w, *kernel, *strides,
                        *dilations, *begin, *outs, float(zp), cols.ctypes.data)
    if status != 0:  # pragma: no cover (the callers pass only the kinds it takes)
        raise ValueError(f"udo_im2col refused its arguments ({x.dtype}, strides {strides})")
    return cols
