"""Cast and CastLike between numpy's types and the narrow ones of ml_dtypes (a dependency of
onnx): bfloat16, the float8 types, float4e2m1, int4/uint4 and int2/uint2.

Floats to float8 follow ONNX's saturate rule: with saturate (the default) infinities and values
beyond the type's range become its largest finite value; without, they become what the type
has for overflow (NaN, or infinity for E5M2). Floats to the 2- and 4-bit integers truncate
toward zero and wrap around, as onnx's reference does. float8e8m0 (its round_mode), string and
complex types are not supported.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

from ...errors import UserError
from ._package import DEFAULT

NUMPY_TYPES: dict[int, str] = {
    1: "float32", 2: "uint8", 3: "int8", 4: "uint16", 5: "int16", 6: "int32", 7: "int64",
    9: "bool", 10: "float16", 11: "float64", 12: "uint32", 13: "uint64",
}
NARROW_TYPES: dict[int, str] = {
    16: "bfloat16", 17: "float8_e4m3fn", 18: "float8_e4m3fnuz", 19: "float8_e5m2",
    20: "float8_e5m2fnuz", 21: "uint4", 22: "int4", 23: "float4_e2m1fn", 25: "uint2",
    26: "int2",
}
FLOAT8 = frozenset({17, 18, 19, 20})
PACKED_INTS = {21: (4, False), 22: (4, True), 25: (2, False), 26: (2, True)}


@functools.cache
def onnx_dtype(to: int) -> np.dtype[Any]:
    """The numpy dtype of an ONNX TensorProto data type (a UserError for the unsupported)."""
    if to in NUMPY_TYPES:
        return np.dtype(NUMPY_TYPES[to])
    if to in NARROW_TYPES:
        import ml_dtypes

        return np.dtype(getattr(ml_dtypes, NARROW_TYPES[to]))
    supported = {**NUMPY_TYPES, **NARROW_TYPES}
    raise UserError(f"Cast: not supported: the target type {to}",
                    hint="supported: " + ", ".join(f"{k} ({v})" for k, v in supported.items()))


def _is_float(dtype: np.dtype[Any]) -> bool:
    return dtype.kind == "f" or dtype.name in NARROW_TYPES.values() and "float" in dtype.name


def _to_float8(x: np.ndarray, target: np.dtype[Any], saturate: int) -> np.ndarray:
    import ml_dtypes

    wide = x.astype(np.float64 if x.dtype == np.float64 else np.float32)
    if saturate:
        top = float(ml_dtypes.finfo(target).max)
        wide = np.where(np.isnan(wide), wide, np.clip(wide, -top, top))
    return wide.astype(target)


def _to_packed_int(x: np.ndarray, to: int) -> np.ndarray:
    bits, signed = PACKED_INTS[to]
    values = np.trunc(x.astype(np.float64)) if _is_float(x.dtype) else x
    wide = values.astype(np.int64) & ((1 << bits) - 1)
    if signed:
        wide = np.where(wide >= 1 << (bits - 1), wide - (1 << bits), wide)
    return wide.astype(onnx_dtype(to))


def cast_to(x: np.ndarray, to: int, saturate: int = 1) -> np.ndarray:
    """x as ONNX type `to`."""
    x, target = np.asarray(x), onnx_dtype(to)
    if x.dtype == target:
        return x.copy()
    if to in FLOAT8 and _is_float(x.dtype):
        return _to_float8(x, target, saturate)
    if to in PACKED_INTS:
        return _to_packed_int(x, to)
    if x.dtype.name in NARROW_TYPES.values() and target.kind != "f":
        x = x.astype(np.float32)  # ml_dtypes casts the narrow types through float
    with np.errstate(over="ignore", invalid="ignore"):  # out of range: inf, as ONNX says
        return x.astype(target)


def _onnx_type_of(dtype: np.dtype[Any]) -> int:
    for code, name in {**NUMPY_TYPES, **NARROW_TYPES}.items():
        if dtype.name == name:
            return code
    raise UserError(f"CastLike: not supported: the target type {dtype.name}")


@DEFAULT.op("Cast")
def cast(x: np.ndarray, *, round_mode: str = "up", saturate: int = 1, to: int) -> np.ndarray:
    """`round_mode` only applies to float8e8m0, which is refused."""
    return cast_to(x, to, saturate)


@DEFAULT.op("CastLike")
def cast_like(x: np.ndarray, target: np.ndarray, *, round_mode: str = "up",
              saturate: int = 1) -> np.ndarray:
    return cast_to(x, _onnx_type_of(target.dtype), saturate)
