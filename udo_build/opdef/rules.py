"""The loading rules of op configs as the vendor tools apply them, each stated once here.

The loaders (xml_config, json_config) read the files; what a file *means* where the vendor
formats leave room is decided by the functions below, each saying what the vendor tools do:

- `op_backends`: an op runs on the backends its OpDef lists (SupportedBackend, core_types);
- `supported_ops_backend`: a SupplementalOpDefList's SupportedOps adds its backend to the ops it
  names; it never takes an op off a backend;
- `supplement_datatypes`: a supplement's datatypes are added to the OpDef's (BACKEND_SPECIFIC
  dropped);
- `unknown_backend`: backends udo-build does not build (LPAI, ...) are warnings, never errors;
- `stray_supplement`: a SupplementalOpDef naming an op no OpDef defines is ignored with a
  warning;
- `default_is_real`: a quantized tensor's default is a real value;
- `read_default`: a mandatory item's default is never used, so it is kept as text unchecked;
  QNN's rank-relative defaults (`N-1`) are kept as text too;
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from .checks import DefaultError, parse_default
from .model import Default, OpDef
from .vocab import BACKEND_SPECIFIC, BACKENDS, FLOAT_TYPES

Warn = Callable[[str, str], None]  # (message, hint)

RANK_RELATIVE = re.compile(r"N\s*(-\s*\d+)?\Z")


def op_backends(declared: Iterable[str], op: str, warn: Warn) -> tuple[str, ...]:
    """The backends an op runs on: the ones its OpDef lists that udo-build builds.

    The vendor generators build an op for every backend its SupportedBackend (XML) or
    core_types (JSON, mapped to backends first) names (and, XML, `supported_ops_backend`); an
    OpDef that lists none runs on every backend. Names udo-build does not build are warnings
    (`unknown_backend`), so a file that also targets LPAI still loads for HTP.
    """
    given = [b for b in dict.fromkeys(declared) if b]
    if not given:
        return BACKENDS
    backends = tuple(b for b in BACKENDS if b in given)
    if not backends:
        warn(f"op {op} runs only on {', '.join(given)}, which udo-build does not build: it is "
             "in no package", f"list one of {', '.join(BACKENDS)} to build it")
    for name in (g for g in given if g not in BACKENDS and backends):
        unknown_backend(name, f"op {op}", warn)
    return backends


def unknown_backend(name: str, where: str, warn: Warn) -> None:
    """A backend udo-build does not build (LPAI, anything newer): a warning, never an error.

    The vendor's files name backends as they appear (LPAI came after HTP); udo-build keeps the
    parts of the file that are for the backends it builds and says what it leaves out.
    """
    warn(f"{where}: backend {name} is not one udo-build builds; what the file says for it is "
         "ignored", f"udo-build builds {', '.join(BACKENDS)}")


def supported_ops_backend(listed: str, backend: str, op: OpDef | None,
                          warn: Warn) -> tuple[str, ...]:
    """The backends of the op a SupportedOps OpName names, with the list's backend added.

    The vendor's translator registers an op for a backend from its OpDef's SupportedBackend
    and from every SupplementalOpDefList whose SupportedOps names it: SupportedOps adds a
    backend, it never takes one away, and an op it leaves out keeps its SupportedBackend (and
    its supplements). A name no OpDef defines is ignored with a warning.
    """
    if op is None:
        warn(f"SupportedOps names op {listed}, which no OpDef defines; ignored",
             "check the spelling, or remove the OpName")
        return ()
    return tuple(b for b in BACKENDS if b in op.backends or b == backend)


def supplement_datatypes(generic: Sequence[str], supplement: Sequence[str]) -> tuple[str, ...]:
    """The datatypes of an item on a backend its SupplementalOpDef gives datatypes for.

    The vendor merges a supplement into the OpDef: BACKEND_SPECIFIC is dropped from the
    generic datatypes and the supplement's are added to the rest (a union, not a replacement).
    """
    if not supplement:
        return ()
    kept = [d for d in generic if d != BACKEND_SPECIFIC]
    return tuple(dict.fromkeys([*kept, *supplement]))


def stray_supplement(name: str, known: Sequence[str], warn: Warn) -> None:
    """A SupplementalOpDef for an op no OpDef defines: the vendor ignores it; so do we, warning."""
    warn(f"SupplementalOpDef names op {name}, which no OpDef defines; ignored",
         f"the ops are: {', '.join(known) or 'none'}")


def default_is_real(datatypes: Sequence[str], quantized: bool) -> bool:
    """Whether a default is a real value (kept as a float) rather than a number of the datatype.

    Defaults of float types are real; so is the default of a quantized tensor (SNPE JSON: a
    "quantization_mode" such as TF), whatever its data_type, because the vendor's converters
    quantize the default with the tensor's encoding: `[1.0]` on a static UINT_8 tensor with
    quantization_mode TF is the real value 1.0, whether UINT_8 comes from data_type or from
    per_core_data_types. (Fixed-point types take any number as before: their values are real.)
    """
    concrete = [d for d in datatypes if d != BACKEND_SPECIFIC]
    return quantized or bool(concrete) and all(d in FLOAT_TYPES for d in concrete)


def read_default(raw: Any, datatypes: Sequence[str], rank: str, *, mandatory: bool,
                 quantized: bool = False, enumeration: Sequence[str] = (),
                 warn: Warn) -> Default:
    """A default from the file, checked where the vendor uses it and kept as text where not.

    The vendor never uses the default of a mandatory input or parameter (the model must give
    it), and QNN's own op definitions write rank-relative defaults like `N-1` (N the rank of
    the op's first input). Both are kept as the text written, with a warning when the text does
    not read as the datatype; every other default must fit datatype and rank (DefaultError).
    """
    real = default_is_real(datatypes, quantized)
    try:
        return parse_default(raw, datatypes, rank, enumeration, real=real)
    except DefaultError as exc:
        text = raw.strip() if isinstance(raw, str) else None
        rank_relative = text is not None and RANK_RELATIVE.match(text) is not None
        if not (mandatory or rank_relative) or text is None:
            raise
        why = "the item is mandatory, so its default is never used" if mandatory else (
            "a rank-relative default is not evaluated by udo-build")
        warn(f"default '{text}' is kept as text: {exc}", why)
        return Default("string", text)
