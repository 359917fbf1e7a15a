"""Native kernels: a CPU op package's C++ op bodies, compiled for the host, run by the emulator in
place of the numpy kernels (`udo-build build-cpu` compiles them; udo_build/package/cpu_build.py).

The library is every source under the package's `src/` plus a small shim udo-build writes; the
shim's C ABI (below, `SHIM_ABI`) hands plain buffers and shapes to it, and the shim builds the
vendor's `QnnCpuOpPackage_Node_t` from them and calls the op through the package's interface
provider (createOpImpl, the implementation's function, freeOpImpl), so the C++ runs exactly as
the CPU backend calls it.

What an implementation computes comes from the library; the shapes and types of its outputs come
from the op's numpy kernel, run once on zeros per distinct input signature (the emulator's shape
oracle for custom ops, as when converting). A native implementation replaces the op's generic
(float) numpy implementation; typed ones stay. It is named `udo_build_native_<Package>.<Op>`,
so records name it the same on every machine; the library is loaded from a private copy named
after its sha256, so rebuilding it in place never reuses a stale one.
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import tempfile
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ..errors import StepFailed, UserError
from .oppkg import Impl, OpPackage, OpPackageError

# numpy dtype -> (the shim's code, the vendor's datatype name); the shim maps code -> name
DTYPES: dict[str, tuple[int, str]] = {
    "float32": (0, "QNN_DATATYPE_FLOAT_32"),
    "int32": (1, "QNN_DATATYPE_INT_32"),
    "uint32": (2, "QNN_DATATYPE_UINT_32"),
    "int8": (3, "QNN_DATATYPE_INT_8"),
    "uint8": (4, "QNN_DATATYPE_UINT_8"),
    "bool": (5, "QNN_DATATYPE_BOOL_8"),
}
PARAM_SCALAR, PARAM_TENSOR, PARAM_STRING = 0, 1, 2
UNKNOWN_OP = 0xFFFFFFFFFFFFFFFF  # what the shim returns for an op it does not have
INIT_FAILED = 0xFFFFFFFFFFFFFFFE  # ... when the package's interface provider or init failed

SHIM_ABI = """\
struct UdoBuildTensor {
  int32_t dtype;
  uint32_t rank;
  const uint32_t* dims;
  void* data;
};
struct UdoBuildParam {
  const char* name;
  int32_t kind;
  double scalar;
  UdoBuildTensor tensor;
  const char* text;
};"""


class _Tensor(ctypes.Structure):
    _fields_ = [("dtype", ctypes.c_int32), ("rank", ctypes.c_uint32),
                ("dims", ctypes.POINTER(ctypes.c_uint32)), ("data", ctypes.c_void_p)]


class _Param(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("kind", ctypes.c_int32), ("scalar", ctypes.c_double),
                ("tensor", _Tensor), ("text", ctypes.c_char_p)]


@dataclass(frozen=True)
class NativeLibrary:
    """A loaded native kernels library: its file, package and ops."""

    path: Path
    package: str
    ops: tuple[str, ...]
    execute: Callable[..., int]


_LOADED: dict[str, NativeLibrary] = {}
_LOCK = threading.Lock()


def load_library(path: Path) -> NativeLibrary:
    """The native kernels library at `path` (loaded once per content)."""
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise UserError(f"cannot read the native kernels library: {exc.strerror or exc}",
                        file=path, hint="build it with: udo-build build-cpu PACKAGE_FOLDER") \
            from None
    digest = hashlib.sha256(data).hexdigest()
    with _LOCK:
        if digest not in _LOADED:
            _LOADED[digest] = _open(path, data, digest)
        return _LOADED[digest]


def _open(path: Path, data: bytes, digest: str) -> NativeLibrary:
    private = Path(tempfile.gettempdir()) / f"udo-build-native-{os.getuid()}" / f"{digest}.so"
    if not private.exists():
        private.parent.mkdir(mode=0o700, exist_ok=True)
        tmp = private.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(data)
        os.replace(tmp, private)
    try:
        lib = ctypes.CDLL(str(private))
        package, ops = lib.udo_build_package, lib.udo_build_ops
        execute = lib.udo_build_execute
    except (OSError, AttributeError) as exc:
        raise UserError(f"not a native kernels library: {exc}", file=path,
                        hint="build it with: udo-build build-cpu PACKAGE_FOLDER") from None
    package.restype = ops.restype = ctypes.c_char_p
    execute.restype = ctypes.c_uint64
    execute.argtypes = [ctypes.c_char_p, ctypes.c_uint32, ctypes.POINTER(_Tensor),
                        ctypes.c_uint32, ctypes.POINTER(_Tensor), ctypes.c_uint32,
                        ctypes.POINTER(_Param)]
    names = tuple(n for n in ops().decode().split(",") if n)
    return NativeLibrary(path, package().decode(), names, execute)


def with_native(package: OpPackage, path: Path, opdefs: dict[str, Any] | None) -> OpPackage:
    """`package` with the generic implementation of every op the library has replaced by the
    library's (each op needs its numpy kernel: it gives the output shapes)."""
    lib = load_library(path)
    out = OpPackage(package.name)
    for op in package.ops():
        for impl in package.impls(op):
            if op in lib.ops and impl.generic:
                impl = Impl(op, _kernel(lib, op, impl.fn, _param_types(opdefs, op)),
                            impl.cost, impl.flags, None)
            out.add(impl)
    missing = [op for op in lib.ops if not any(i.generic for i in package.impls(op))]
    if missing:
        raise UserError(f"the native kernels library has {', '.join(missing)}, which the numpy "
                        f"kernels of package {package.name} do not implement", file=path,
                        hint="a native op needs its generic numpy kernel too: it gives the "
                             "shapes of the op's outputs (and is the reference to check against)")
    out.merge(_params_and_rules(package))
    return out


def _params_and_rules(package: OpPackage) -> OpPackage:
    carrier = OpPackage(package.name)
    for op in package.ops():
        if package.params(op):
            carrier.param_order(op, *package.params(op))
    for rule in package.rules():
        carrier.rule(rule)
    return carrier


def _param_types(opdefs: dict[str, Any] | None, op: str) -> dict[str, str]:
    """Param name -> the numpy dtype of its values, from the op definitions (tensor params)."""
    from_name = {"FLOAT_32": "float32", "INT_32": "int32", "UINT_32": "uint32",
                 "INT_8": "int8", "UINT_8": "uint8", "BOOL_8": "bool"}
    for entry in (opdefs or {}).get("ops", ()):
        if entry.get("name") == op:
            return {p["name"]: from_name.get((p.get("datatypes") or ["FLOAT_32"])[0], "float32")
                    for p in entry.get("params", ())}
    return {}


def _kernel(lib: NativeLibrary, op: str, reference: Callable[..., Any],
            param_types: dict[str, str]) -> Callable[..., Any]:
    shapes: dict[tuple[Any, ...], list[tuple[tuple[int, ...], np.dtype[Any]]]] = {}

    def run(*inputs: Any, **params: Any) -> Any:
        arrays = [np.ascontiguousarray(x) for x in inputs]
        key = (tuple((a.shape, a.dtype.str) for a in arrays), repr(sorted(params.items())))
        if key not in shapes:
            shapes[key] = _output_specs(reference, arrays, params)
        outputs = [np.empty(shape, dtype) for shape, dtype in shapes[key]]
        _call(lib, op, arrays, outputs, params, param_types)
        return outputs[0] if len(outputs) == 1 else tuple(outputs)

    run.__module__ = f"udo_build_native_{lib.package}"
    run.__name__ = run.__qualname__ = op
    return run


def _output_specs(reference: Callable[..., Any], arrays: Sequence[np.ndarray],
                  params: dict[str, Any]) -> list[tuple[tuple[int, ...], np.dtype[Any]]]:
    result = reference(*[np.zeros_like(a) for a in arrays], **params)
    results = result if isinstance(result, tuple) else (result,)
    return [(np.shape(r), np.asarray(r).dtype) for r in results]


def _call(lib: NativeLibrary, op: str, inputs: Sequence[np.ndarray],
          outputs: Sequence[np.ndarray], params: dict[str, Any],
          param_types: dict[str, str]) -> None:
    keep: list[Any] = []  # what the structs point into, alive for the call
    c_in = (_Tensor * max(len(inputs), 1))(*[_tensor(a, keep) for a in inputs])
    c_out = (_Tensor * max(len(outputs), 1))(*[_tensor(a, keep) for a in outputs])
    plist = [_param(k, v, param_types.get(k), keep) for k, v in sorted(params.items())]
    c_params = (_Param * max(len(plist), 1))(*plist)
    status = lib.execute(op.encode(), len(inputs), c_in, len(outputs), c_out, len(plist),
                         c_params)
    if status == UNKNOWN_OP:
        raise StepFailed("kernels", f"{lib.path}: the library has no op {op}")
    if status == INIT_FAILED:
        raise StepFailed("kernels", f"{lib.package} ({lib.path.name}): the package's interface "
                         "provider or its init failed (its messages are on stderr)")
    if status != 0:
        raise StepFailed("kernels", f"{lib.package}::{op} (native, {lib.path.name}) failed with "
                         f"error {status} (its messages are on stderr)")


def _tensor(array: np.ndarray, keep: list[Any]) -> _Tensor:
    name = array.dtype.name
    if name not in DTYPES:
        raise StepFailed("kernels", f"a native op cannot take a {name} tensor; it takes: "
                         + ", ".join(DTYPES))
    dims = (ctypes.c_uint32 * max(array.ndim, 1))(*array.shape)
    keep += [dims, array]
    return _Tensor(DTYPES[name][0], array.ndim, dims, array.ctypes.data)


def _param(name: str, value: Any, dtype: str | None, keep: list[Any]) -> _Param:
    encoded = name.encode()
    keep.append(encoded)
    if isinstance(value, str):
        text = value.encode()
        keep.append(text)
        return _Param(encoded, PARAM_STRING, 0.0, _Tensor(), text)
    if isinstance(value, (list, tuple, np.ndarray)):
        array = np.ascontiguousarray(value, dtype=dtype or None)
        if dtype is None and array.dtype.name not in DTYPES:
            array = array.astype(np.float32 if array.dtype.kind == "f" else np.int32)
        return _Param(encoded, PARAM_TENSOR, 0.0, _tensor(array, keep), None)
    try:
        return _Param(encoded, PARAM_SCALAR, float(value), _Tensor(), None)
    except (TypeError, ValueError):
        raise OpPackageError(f"parameter {name}: a native op cannot take {value!r}") from None
