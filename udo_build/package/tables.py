"""The mapping tables of the generator: datatypes to C++/OpenCL/Python types, arches to build
targets. Rules are data: the templates read these, they never spell a mapping themselves."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class DType:
    """How one op-definition datatype appears in generated code."""

    name: str  # FLOAT_32
    c: str  # the C element type of a value (defaults, static arrays)
    field: str  # the member of Qnn_Scalar_t holding a scalar of this type
    literal: str  # how a value is written: float | double | half | int | bool | string
    htp: str  # the HTP tensor type of a tensor of this type ("Tensor": the generic one)
    cl: str  # the OpenCL C element type
    py: str  # the Python type of a scalar parameter

    @property
    def qnn(self) -> str:
        return f"QNN_DATATYPE_{self.name}"


def _int(name: str, c: str, field: str, htp: str = "Tensor", cl: str = "int") -> DType:
    # the emulator's kernels see fixed-point values as the real numbers they stand for
    return DType(name, c, field, "int", htp, cl, "float" if "FIXED" in name else "int")


DTYPES: dict[str, DType] = {d.name: d for d in (
    DType("FLOAT_32", "float", "floatValue", "float", "PlainFloatTensor", "float", "float"),
    DType("FLOAT_16", "uint16_t", "floatValue", "half", "PlainFloat16Tensor", "half", "float"),
    DType("FLOAT_64", "double", "doubleValue", "double", "Tensor", "double", "float"),
    _int("INT_8", "int8_t", "int8Value", cl="char"),
    _int("INT_16", "int16_t", "int16Value", cl="short"),
    _int("INT_32", "int32_t", "int32Value", "Int32Tensor"),
    _int("INT_64", "int64_t", "int64Value", cl="long"),
    _int("UINT_8", "uint8_t", "uint8Value", cl="uchar"),
    _int("UINT_16", "uint16_t", "uint16Value", cl="ushort"),
    _int("UINT_32", "uint32_t", "uint32Value", cl="uint"),
    _int("UINT_64", "uint64_t", "uint64Value", cl="ulong"),
    _int("SFIXED_POINT_4", "int8_t", "int8Value", cl="char"),
    _int("SFIXED_POINT_8", "int8_t", "int8Value", "QuantInt8Tensor", "char"),
    _int("SFIXED_POINT_16", "int16_t", "int16Value", "QuantInt16Tensor", "short"),
    _int("SFIXED_POINT_32", "int32_t", "int32Value", "QuantInt32Tensor"),
    _int("UFIXED_POINT_4", "uint8_t", "uint8Value", cl="uchar"),
    _int("UFIXED_POINT_8", "uint8_t", "uint8Value", "QuantUint8Tensor", "uchar"),
    _int("UFIXED_POINT_16", "uint16_t", "uint16Value", "QuantUint16Tensor", "ushort"),
    _int("UFIXED_POINT_32", "uint32_t", "uint32Value", cl="uint"),
    DType("BOOL_8", "uint8_t", "bool8Value", "bool", "Tensor", "uchar", "bool"),
    DType("STRING", "const char*", "stringValue", "string", "Tensor", "char", "str"),
)}

# a real-valued default of a fixed-point datatype is kept as a float (it is not quantized here)
REAL_VALUED = DTYPES["FLOAT_32"]

GENERIC_TENSOR = "Tensor"


def dtype(name: str) -> DType:
    return DTYPES[name]


# -- SNPE UDO registration: the SnpeUdo API's datatype and layout enums (UdoBase.h) -------------

_SNPE_DATATYPES = {
    "FLOAT_16": "FLOAT_16", "FLOAT_32": "FLOAT_32",
    "SFIXED_POINT_4": "FIXED_4", "UFIXED_POINT_4": "FIXED_4",
    "SFIXED_POINT_8": "FIXED_8", "UFIXED_POINT_8": "FIXED_8",
    "SFIXED_POINT_16": "FIXED_16", "UFIXED_POINT_16": "FIXED_16",
    "SFIXED_POINT_32": "FIXED_32", "UFIXED_POINT_32": "FIXED_32",
    "UINT_8": "UINT_8", "UINT_16": "UINT_16", "UINT_32": "UINT_32", "BOOL_8": "UINT_8",
    "INT_8": "INT_8", "INT_16": "INT_16", "INT_32": "INT_32",
}
_SNPE_LAYOUTS = ("NHWC", "NCHW", "NDHWC")


def snpe_datatypes(datatypes: tuple[str, ...]) -> tuple[str, ...]:
    """The SnpeUdo datatypes of op-definition datatypes, in order, without repeats; the ones the
    SnpeUdo API has no value for (64-bit, STRING) are left out."""
    found = (f"SNPE_UDO_DATATYPE_{_SNPE_DATATYPES[d]}" for d in datatypes if d in _SNPE_DATATYPES)
    return tuple(dict.fromkeys(found))


def snpe_layout(layout: str) -> str:
    """The SnpeUdo layout of a tensor; what the API does not name is taken as NHWC, as the
    SNPE UDO generator's default layout."""
    return f"SNPE_UDO_LAYOUT_{layout if layout in _SNPE_LAYOUTS else 'NHWC'}"


# -- HTP registration: the generic implementation is the slow fallback, typed ones are cheaper --

@dataclass(frozen=True)
class Registration:
    types: tuple[str, ...]  # template arguments (empty: not a template)
    cost: str  # GLACIAL | SNAIL | FAST | FREE
    flags: tuple[str, ...]


def registration(types: tuple[str, ...], all_generic: bool) -> Registration:
    if all_generic:
        return Registration(types, "GLACIAL", ())
    return Registration(types, "SNAIL", ("Flags::RESOURCE_HVX",))


# -- arches and toolchains ----------------------------------------------------------------------

LEGACY_DSP_ARCHS = ("v65", "v66")  # the DSP before the HTP: one implementation library per op


def sdk_htp_archs() -> tuple[str, ...]:
    """Every HTP arch the SoC table knows (v68 and later): what a package builds for when no
    arch is given, as the vendor's generated Makefiles build every arch their SDK supports."""
    from ..soc.table import builtin_socs

    archs = {soc.arch for soc in builtin_socs().values()}
    return tuple(sorted((a for a in archs if a not in LEGACY_DSP_ARCHS), key=arch_number))


def arch_number(arch: str) -> int:
    return int(arch[1:])


def split_archs(archs: tuple[str, ...]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """(v65/v66 arches, v68-and-later arches), each sorted by number."""
    ordered = sorted(set(archs), key=arch_number)
    return (tuple(a for a in ordered if a in LEGACY_DSP_ARCHS),
            tuple(a for a in ordered if a not in LEGACY_DSP_ARCHS))


@dataclass(frozen=True)
class Toolchain:
    compiler: str  # the make variable naming the compiler
    folder: str  # the build folder of its libraries
    flags: str
    includes: str = ""  # make variables of extra include folders


def toolchain(platform: str) -> Toolchain:
    """x86 (host), aarch64 (Android) or a hexagon arch such as v73."""
    if platform == "x86":
        return Toolchain("X86_CXX", "build/x86_64-linux-clang", "")
    if platform == "aarch64":
        return Toolchain("ANDROID_CXX", "build/aarch64-android", "")
    return Toolchain("HEXAGON_CXX", f"build/hexagon-{platform}",
                     f"-m{platform} -mhvx -mhvx-length=128B", "$(HEXAGON_INCLUDES)")
