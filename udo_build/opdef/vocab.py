"""The value sets of op definitions, and the normalization of their spellings.

Op configs spell datatypes in two vocabularies: the short one (`FLOAT_32`, `UFIXED_POINT_8`,
SNPE's `FIXED_8`) and the QNN one (`QNN_DATATYPE_FLOAT_32`). Both normalize to the short form.
"""

from __future__ import annotations

BACKENDS: tuple[str, ...] = ("CPU", "GPU", "DSP", "HTP")
DSP_ARCHS: tuple[str, ...] = ("v65", "v66", "v68", "v69", "v73", "v75", "v79", "v81")

BACKEND_SPECIFIC = "BACKEND_SPECIFIC"

DATATYPES: tuple[str, ...] = (
    "INT_8", "INT_16", "INT_32", "INT_64",
    "UINT_8", "UINT_16", "UINT_32", "UINT_64",
    "FLOAT_16", "FLOAT_32", "FLOAT_64",
    "SFIXED_POINT_4", "SFIXED_POINT_8", "SFIXED_POINT_16", "SFIXED_POINT_32",
    "UFIXED_POINT_4", "UFIXED_POINT_8", "UFIXED_POINT_16", "UFIXED_POINT_32",
    "BOOL_8", "STRING", BACKEND_SPECIFIC,
)  # fmt: skip

# SNPE's UDO vocabulary: FIXED_n are the asymmetric unsigned (TF) quantized types.
_SNPE_ALIASES = {f"FIXED_{n}": f"UFIXED_POINT_{n}" for n in (4, 8, 16, 32)}
_PREFIXES = ("QNN_DATATYPE_", "SNPE_UDO_DATATYPE_")

INTEGER_TYPES = frozenset(t for t in DATATYPES if t.startswith(("INT_", "UINT_")))
FLOAT_TYPES = frozenset({"FLOAT_16", "FLOAT_32", "FLOAT_64"})
FIXED_TYPES = frozenset(t for t in DATATYPES if "FIXED_POINT" in t)

RANKS: tuple[str, ...] = ("SCALAR", "1D", "2D", "3D", "4D", "5D", "ND")
XML_LAYOUTS: tuple[str, ...] = (
    "NHWC", "NHCW", "NDHWC", "NONTRIVIAL", "UNDEFINED", BACKEND_SPECIFIC,
)  # fmt: skip
JSON_LAYOUTS: tuple[str, ...] = ("NHWC", "NCHW")
LAYOUTS: tuple[str, ...] = (*XML_LAYOUTS, "NCHW")


def accepted_datatype_spellings() -> tuple[str, ...]:
    """Every spelling an op config may use for a datatype (for the XSD and JSON schema)."""
    short = [t for t in DATATYPES if t != BACKEND_SPECIFIC]
    qnn = [f"QNN_DATATYPE_{t}" for t in short]
    snpe = [f"SNPE_UDO_DATATYPE_{t}" for t in short]
    return (*DATATYPES, *qnn, *snpe, *_SNPE_ALIASES)


def normalize_datatype(text: str) -> str | None:
    """The short spelling of a datatype, or None when it is not one."""
    value = text.strip().upper()
    for prefix in _PREFIXES:
        if value.startswith(prefix):
            value = value[len(prefix):]
            break
    value = _SNPE_ALIASES.get(value, value)
    return value if value in DATATYPES else None


def rank_dims(rank: str) -> int | None:
    """SCALAR -> 0, '3D' -> 3, ND -> None (any)."""
    if rank == "SCALAR":
        return 0
    if rank == "ND":
        return None
    return int(rank[0])


def allowed(values: tuple[str, ...] | list[str]) -> str:
    return ", ".join(values)
