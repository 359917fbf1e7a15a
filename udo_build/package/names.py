"""Names and literals for generated code: identifiers from op-config names (`in[0]` -> `in_0`),
C++ and Python literals of default values, and text that is safe inside comments and docstrings.

Op configs name tensors and parameters freely; generated code needs identifiers that are valid,
not keywords, and unique within their scope. Everything here is pure and deterministic.
"""

from __future__ import annotations

import keyword
import math
import re
import struct
from collections.abc import Iterable
from typing import Any

from .tables import DType

CPP_KEYWORDS = frozenset("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t
char32_t class compl concept const consteval constexpr constinit const_cast continue co_await
co_return co_yield decltype default delete do double dynamic_cast else enum explicit export extern
false float for friend goto if inline int long mutable namespace new noexcept not not_eq nullptr
operator or or_eq private protected public register reinterpret_cast requires return short signed
sizeof static static_assert static_cast struct switch template this thread_local throw true try
typedef typeid typename union unsigned using virtual void volatile wchar_t while xor xor_eq
""".split())

# names the generated C++ uses itself (types of the signatures, template parameters, locals)
CPP_RESERVED = frozenset({
    "Tensor", "TensorType", "GraphStatus", "Op", "node", "params", "param", "status", "operation",
    "get_global_id", "printf", "size_t", "uint32_t", "int32_t",
    # OpenCL C keywords and types (the GPU kernels use the same names)
    "kernel", "global", "local", "constant", "private", "read_only", "write_only", "read_write",
    "half", "uchar", "ushort", "uint", "ulong", "image2d_t", "image3d_t", "sampler_t", "event_t",
    "restrict",
})

# module-level names of the kernels stub that a kernel function must not rebind
PY_RESERVED = frozenset({"np", "package", "Cost", "OpPackage"})


def identifier(name: str) -> str:
    """`in[0]` -> `in_0`: letters, digits and _, not starting with a digit, never empty."""
    text = re.sub(r"[^A-Za-z0-9]+", "_", name).strip("_")
    if not text:
        return "t"
    return f"t_{text}" if text[0].isdigit() else text


def unique(name: str, taken: set[str], reserved: Iterable[str]) -> str:
    """`name` made a non-reserved identifier not in `taken` (which it is then added to)."""
    base = identifier(name)
    if base in reserved:
        base += "_"
    found, n = base, 1
    while found in taken:
        n += 1
        found = f"{base}_{n}"
    taken.add(found)
    return found


def cpp_names(names: Iterable[str]) -> list[str]:
    """One scope's C++ identifiers for `names`, in order."""
    taken: set[str] = set()
    return [unique(n, taken, CPP_KEYWORDS | CPP_RESERVED) for n in names]


def py_names(names: Iterable[str]) -> list[str]:
    """One scope's Python identifiers for `names`, in order."""
    taken: set[str] = set()
    reserved = set(keyword.kwlist) | PY_RESERVED
    return [unique(n, taken, reserved) for n in names]


def snake(name: str) -> str:
    """`ScaleBias` -> `scale_bias`, `Conv2D` -> `conv2_d`, `HTPRelu` -> `htp_relu`."""
    text = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", identifier(name))
    return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", text).lower()


def lower_first(name: str) -> str:
    """`ScaleBias` -> `scaleBias` (the vendor's function names: `scaleBiasImpl`)."""
    return name[:1].lower() + name[1:]


# -- text in comments and docstrings ------------------------------------------------------------


def one_line(text: str) -> str:
    """Text as one line that is safe in //, /* */ and # comments: no newlines, no comment
    terminator, no trailing backslash (which would continue a // or make comment)."""
    flat = " ".join(str(text).split()).replace("*/", "* /")
    return flat.rstrip("\\").rstrip()


def docstring(text: str) -> str:
    """Text safe inside a triple-quoted Python docstring."""
    return str(text).replace("\\", "\\\\").replace('"""', '\\"\\"\\"')


# -- C++ literals -------------------------------------------------------------------------------


def c_string(text: str) -> str:
    """A C string literal; bytes outside printable ASCII as octal escapes (never greedy)."""
    out = []
    for byte in str(text).encode("utf-8"):
        char = chr(byte)
        if char in '"\\?':
            out.append("\\" + char)
        elif 32 <= byte < 127:
            out.append(char)
        else:
            out.append(f"\\{byte:03o}")
    return '"' + "".join(out) + '"'


_INT_SUFFIX = {"int64_t": "LL", "uint64_t": "ULL", "uint32_t": "u"}


def c_literal(value: Any, dt: DType) -> str:
    """One value of datatype `dt` as a C++ literal of its C type (never a narrowing one)."""
    if dt.literal == "string":
        return c_string(value if isinstance(value, str) else str(value))
    if isinstance(value, bool):
        value = int(value)
    if dt.literal == "bool":
        return "1" if value else "0"
    if dt.literal in ("float", "double"):
        text = repr(float(value))
        text = text if any(c in text for c in ".e") else text + ".0"
        return text + ("f" if dt.literal == "float" else "")
    if dt.literal == "half":
        bits = struct.unpack("<H", struct.pack("<e", float(value)))[0]
        return f"0x{bits:04x} /* {float(value)!r} */"
    number = int(value)
    if dt.c == "int64_t" and number == -(1 << 63):
        return "(-9223372036854775807LL - 1)"
    return f"{number}{_INT_SUFFIX.get(dt.c, '')}"


def is_whole(value: Any) -> bool:
    return isinstance(value, (bool, int)) or (isinstance(value, float) and value.is_integer())


def flatten(value: Any) -> list[Any]:
    if isinstance(value, (tuple, list)):
        return [x for v in value for x in flatten(v)]
    return [value]


def shape(value: Any) -> list[int]:
    """The dimensions of a (rectangular) nested tuple; [] for a scalar."""
    dims: list[int] = []
    while isinstance(value, (tuple, list)):
        dims.append(len(value))
        if not value:
            break
        value = value[0]
    return dims


# -- Python literals ----------------------------------------------------------------------------


def py_literal(value: Any) -> str:
    """A default as a Python literal: numbers, booleans, strings, nested lists for tensors."""
    if isinstance(value, (tuple, list)):
        return "[" + ", ".join(py_literal(v) for v in value) + "]"
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"not a finite default: {value!r}")
        return repr(value)
    return repr(value)


# -- the vendor's names of a package's libraries ------------------------------------------------
#
# Checked against the vendor's generated makefiles as public projects carry them: a QNN HTP (and
# DSP v68+) package builds build/<target>/libQnn<PackageName>.so for x86_64-linux-clang,
# hexagon-<arch> and aarch64-android; a QNN CPU or GPU package builds
# libs/<target>/lib<PackageName>.so; the SNPE UDO generator's makefile copies those into
# libs/<x86-64_linux_clang | arm64-v8a | dsp_<arch>>/libUdo<PackageName>Impl<Core>.so next to the
# registration library libUdo<PackageName>Reg.so. Loaders find a package's interface by the
# symbol <PackageName>InterfaceProvider.

QNN, SNPE = "qnn", "snpe"  # the layouts: QNN op packages (XML configs), SNPE UDO (JSON configs)
_QNN_TARGETS = {"x86": "x86_64-linux-clang", "aarch64": "aarch64-android"}
_SNPE_TARGETS = {"x86": "x86-64_linux_clang", "aarch64": "arm64-v8a"}
_SNPE_CORES = {"CPU": "Cpu", "GPU": "Gpu", "DSP": "Dsp", "HTP": "Dsp"}


def target_folder(platform: str, flavor: str = QNN) -> str:
    """The vendor's folder name of a build target: x86 | aarch64 | a hexagon arch (v73)."""
    if flavor == SNPE:
        return _SNPE_TARGETS.get(platform, f"dsp_{platform}")
    return _QNN_TARGETS.get(platform, f"hexagon-{platform}")


def library(package: str, backend: str, platform: str, flavor: str = QNN) -> str:
    """The path of the library a package's makefile builds for `platform`, as the vendor's
    generated makefiles name it (relative to the package folder)."""
    folder = target_folder(platform, flavor)
    if flavor == SNPE:
        # the DSP implementation library for online prepare on the device is the _AltPrep one
        alt = "_AltPrep" if _SNPE_CORES[backend] == "Dsp" and platform == "aarch64" else ""
        return f"libs/{folder}/{impl_library(package, backend).removesuffix('.so')}{alt}.so"
    if backend in ("CPU", "GPU"):
        return f"libs/{folder}/lib{package}.so"
    return f"build/{folder}/libQnn{package}.so"


def impl_library(package: str, backend: str) -> str:
    """The file name of an SNPE UDO implementation library, as the registration library names
    it for its core type (the runtime finds it on the library path)."""
    return f"libUdo{package}Impl{_SNPE_CORES[backend]}.so"


def registration_library(package: str, platform: str) -> str:
    """The path of an SNPE UDO package's registration library for `platform` (x86 | aarch64),
    which the runtime loads first: it registers the package's ops and names the implementation
    library of each core type."""
    return f"libs/{target_folder(platform, SNPE)}/libUdo{package}Reg.so"


def snpe_core(backend: str) -> str:
    """The SNPE UDO core type a backend's implementation runs on (HTP and DSP: the DSP)."""
    return f"SNPE_UDO_CORETYPE_{_SNPE_CORES[backend].upper()}"


def op_library(package: str, op: str, arch: str, flavor: str = QNN) -> str:
    """A v65/v66 DSP package's implementation library of one op, next to the package library
    (whose interface loads it by this name)."""
    folder = library(package, "DSP", arch, flavor).rsplit("/", 1)[0]
    return f"{folder}/lib{package}_{op}.so"


def provider(package: str) -> str:
    """The symbol a loader asks a package library for (`--op_packages lib.so:<provider>`)."""
    return f"{package}InterfaceProvider"


def package_folder(backend: str, package: str) -> str:
    """Where a backend's package goes in an output folder: one folder per backend, the package
    keeping its name (several backends of one config are not renamed packages)."""
    return f"{backend}/{package}"
