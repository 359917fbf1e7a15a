"""Loads an XML OpDefCollection (the vendor's op definition format) into an `OpPackageDef`.

The steps, each refusing bad input with a `UserError` that names file, line and field path:

1. read at most 8 MiB and parse safely (`xsd.parse`: no DTD, no entities, no network);
2. drop, with a warning, every element and attribute that opdef.xsd declares nowhere;
3. validate against opdef.xsd (`xsd.validate`);
4. build the generic model, checking what the XSD leaves to Python (one Name, at most one of a
   single-valued child, at least one Datatype, defaults, enumerations, the shared op rules of
   `checks`), and turn the SupplementalOpDefLists into per-backend overrides.
"""

from __future__ import annotations

import functools
from dataclasses import replace
from pathlib import Path

from lxml import etree

from ..errors import Diagnostics, Problem, raise_if_any
from ..source import read_limited
from . import rules, vocab, xsd
from .checks import IDENTIFIER, DefaultError, check_enumeration, check_op
from .model import (
    BackendOverride,
    Default,
    OpDef,
    OpPackageDef,
    Origin,
    ParamDef,
    Reference,
    TensorDef,
)
from .xsd import collapse, field_path, token

MAX_BYTES = 8 << 20

_SINGLE = ("Name", "Description", "Mandatory", "Shape", "Rank", "Layout", "Text", "Default",
           "Repeated", "IsStaticTensor", "Enumeration", "UseDefaultTranslation")
_TRUE = ("true", "1")
_NO_DATATYPE_HINT = ("give at least one <Datatype>; if it differs per backend, use "
                     "BACKEND_SPECIFIC and give it in a SupplementalOpDefList")


def load_xml_config(path: str | Path, diag: Diagnostics) -> OpPackageDef:
    """The generic (unresolved) op package an XML OpDefCollection defines; warnings go to diag."""
    file = str(path)
    root = xsd.parse(read_limited(path, MAX_BYTES, "op config"), file)
    xsd.drop_unknown(root, file, diag)
    xsd.validate(root, file)
    loader = _Loader(file, diag)
    package = loader.package(root)
    raise_if_any(loader.problems)
    return package


# -- reading values and naming places -----------------------------------------------------------


def _flag(el: etree._Element, tag: str, default: bool) -> bool:
    value = token(el, tag)  # never empty when given: the XSD checks booleans
    return value.lower() in _TRUE if value else default


def _description(el: etree._Element) -> str:
    found = el.find("Description")
    if found is None:
        return ""
    contents = found.findall("Content")
    parts = ["".join(c.itertext()) for c in contents] or [found.text, *(c.tail for c in found)]
    return collapse(" ".join(p or "" for p in parts))


# -- building the model -------------------------------------------------------------------------


class _Loader:
    """Collects the problems of one file while building its package."""

    def __init__(self, file: str, diag: Diagnostics) -> None:
        self.file = file
        self.diag = diag
        self.problems: list[Problem] = []

    def problem(self, el: etree._Element, message: str, hint: str | None = None,
                suffix: str = "") -> None:
        self.problems.append(Problem(message, self.file, el.sourceline, None,
                                     field_path(el, suffix), hint))

    def warn(self, el: etree._Element, message: str, hint: str | None = None,
             suffix: str = "") -> None:
        self.diag.warn(Problem(message, self.file, el.sourceline, None, field_path(el, suffix),
                               hint))

    def origin(self, el: etree._Element) -> Origin:
        return Origin(self.file, el.sourceline, field_path(el))

    def check_single(self, root: etree._Element) -> None:
        for el in root.iter():
            seen: dict[str, etree._Element] = {}
            for child in el:
                if child.tag in _SINGLE and child.tag in seen:
                    self.problem(child, f"{child.tag} is given twice",
                                 f"keep one <{child.tag}> (the first is at line "
                                 f"{seen[child.tag].sourceline})")
                seen.setdefault(child.tag, child)

    def name(self, el: etree._Element) -> str:
        name = token(el, "Name")
        if not name:
            self.problem(el, f"{el.tag} has no Name", f"give the {el.tag} a <Name>")
        return name

    def datatypes(self, el: etree._Element, required: bool = True) -> tuple[str, ...]:
        spelled = [token(d) for d in el.findall("Datatype")]
        found = tuple(dict.fromkeys(vocab.normalize_datatype(s) or s for s in spelled))
        if required and not found:
            self.problem(el, f"{el.tag} has no Datatype", _NO_DATATYPE_HINT)
        return found

    def default(self, el: etree._Element | None, datatypes: tuple[str, ...], rank: str,
                mandatory: bool, enumeration: tuple[str, ...] = ()) -> Default | None:
        if el is None:
            return None
        try:
            return rules.read_default((el.text or "").strip(), datatypes, rank,
                                      mandatory=mandatory, enumeration=enumeration,
                                      warn=functools.partial(self.warn, el))
        except DefaultError as exc:
            self.problem(el, str(exc), "give a default that fits the Datatype and Rank")
        except ValueError as exc:  # e.g. an integer too long for int()
            self.problem(el, f"default cannot be read: {exc}", "give a shorter number")
        return None

    def tensor(self, el: etree._Element) -> TensorDef:
        datatypes, rank = self.datatypes(el), token(el, "Shape/Rank", "ND")
        found, mandatory = el.find("Default"), _flag(el, "Mandatory", True)
        if el.tag == "Output" and found is not None:  # check_op refuses it, with its message
            default: Default | None = Default("string", found.text or "")
        else:
            default = self.default(found, datatypes, rank, mandatory)
        return TensorDef(
            self.name(el), datatypes, rank, token(el, "Shape/Layout", "UNDEFINED"),
            mandatory=mandatory, repeated=_flag(el, "Repeated", False),
            static=_flag(el, "IsStaticTensor", False), default=default,
            description=_description(el), shape_text=token(el, "Shape/Text"),
            origin=self.origin(el),
        )

    def param(self, el: etree._Element, op: str) -> ParamDef:
        name, datatypes = self.name(el), self.datatypes(el)
        rank = token(el, "Shape/Rank", "SCALAR")
        listed = el.find("Enumeration")
        enumeration = tuple(token(e) for e in el.iterfind("Enumeration/Enum"))
        if listed is not None:
            self.problems.extend(check_enumeration(
                enumeration, datatypes, rank, self.origin(listed), op, name))
        mandatory = _flag(el, "Mandatory", False)
        return ParamDef(
            name, datatypes, rank, token(el, "Shape/Layout", "UNDEFINED"), mandatory=mandatory,
            default=self.default(el.find("Default"), datatypes, rank, mandatory, enumeration),
            enumeration=enumeration, description=_description(el),
            shape_text=token(el, "Shape/Text"), origin=self.origin(el),
        )

    def op(self, el: etree._Element) -> OpDef:
        name = self.name(el)
        given = [token(b) for b in el.findall("SupportedBackend")]
        warn = functools.partial(self.warn, el)
        op = OpDef(
            name,
            tuple(t for t in map(self.tensor, el.findall("Input")) if t.name),
            tuple(t for t in map(self.tensor, el.findall("Output")) if t.name),
            tuple(p for p in (self.param(c, name) for c in el.findall("Parameter")) if p.name),
            backends=rules.op_backends(given, name, warn),
            use_default_translation=_flag(el, "UseDefaultTranslation", False),
            description=_description(el),
            references=tuple(Reference(r.get("Source", ""), r.get("Url", ""))
                             for r in el.findall("Reference")),
            origin=self.origin(el),
        )
        if name:
            self.problems.extend(check_op(op))
        return op

    def package(self, root: etree._Element) -> OpPackageDef:
        self.check_single(root)
        ops: dict[str, OpDef] = {}
        for el in root.iterfind("OpDefList/OpDef"):
            op = self.op(el)
            if op.name and op.name in ops:
                self.problem(el, f"OpDef {op.name} is given twice (first at line "
                                 f"{ops[op.name].origin.line})", "give each op its own Name")
            ops.setdefault(op.name, op)
        ops.pop("", None)
        if not ops and not self.problems:
            self.problem(root, "the op config defines no op",
                         "add <OpDefList><OpDef>...</OpDef></OpDefList>")
        name = collapse(root.get("PackageName"))
        if not IDENTIFIER.match(name):
            self.problem(root, f"PackageName '{name}' is not a valid identifier",
                         "use letters, digits and _, not starting with a digit", "PackageName")
        return OpPackageDef(name, collapse(root.get("Domain")),
                            collapse(root.get("Version")) or "1.0.0",
                            _Supplements(self, ops).apply(root), source_format="xml")


class _Supplements:
    """The SupplementalOpDefLists of a file: the backends their SupportedOps add to ops, and the
    per-backend overrides of datatypes and layouts (see `rules`)."""

    def __init__(self, loader: _Loader, ops: dict[str, OpDef]) -> None:
        self.loader = loader
        self.ops = ops
        self.given: dict[tuple[str, str, str, str], tuple[BackendOverride, int]] = {}

    def apply(self, root: etree._Element) -> tuple[OpDef, ...]:
        for listed in root.findall("SupplementalOpDefList"):
            backend = collapse(listed.get("Backend"))
            if backend not in vocab.BACKENDS:
                rules.unknown_backend(backend, "SupplementalOpDefList",
                                      functools.partial(self.loader.warn, listed))
                continue
            for el in listed.iterfind("SupportedOps/OpName"):
                op = self.ops.get(token(el))
                backends = rules.supported_ops_backend(
                    token(el), backend, op, functools.partial(self.loader.warn, el))
                if op is not None:
                    self.ops[op.name] = replace(op, backends=backends)
        for listed in root.findall("SupplementalOpDefList"):
            backend = collapse(listed.get("Backend"))
            for el in listed.iterfind("SupplementalOpDef") if backend in vocab.BACKENDS else ():
                self.supplement(el, backend)
        return tuple(self.fill(op) for op in self.ops.values())

    def supplement(self, el: etree._Element, backend: str) -> None:
        name = self.loader.name(el)
        op = self.ops.get(name)
        if op is None:
            if name:
                rules.stray_supplement(name, list(self.ops),
                                       functools.partial(self.loader.warn, el))
            return
        if backend not in op.backends:
            self.loader.warn(
                el, f"SupplementalOpDef for op {name} is ignored: the op does not run on {backend}",
                f"op {name} runs on: {', '.join(op.backends) or 'no backend udo-build builds'}")
            return
        for item in el:
            if item.tag != "Name":
                self.item(item, op, backend)

    def item(self, el: etree._Element, op: OpDef, backend: str) -> None:
        name, kind = self.loader.name(el), el.tag.lower()
        pool = {"Input": op.inputs, "Output": op.outputs, "Parameter": op.params}[el.tag]
        key = (op.name, el.tag, name, backend)
        if name and name not in {t.name for t in pool}:
            self.loader.problem(el, f"op {op.name} has no {kind} '{name}'",
                                f"its {kind}s are: {', '.join(t.name for t in pool) or 'none'}")
        elif name and key in self.given:
            self.loader.problem(el, f"{el.tag} {name} of op {op.name} is supplemented twice for "
                                    f"backend {backend}",
                                f"merge it with the one at line {self.given[key][1]}")
        elif name:
            generic = next(t.datatypes for t in pool if t.name == name)
            datatypes = rules.supplement_datatypes(generic, self.loader.datatypes(el, False))
            override = BackendOverride(backend, datatypes, token(el, "Shape/Layout") or None)
            self.given[key] = (override, el.sourceline)

    def fill(self, op: OpDef) -> OpDef:
        def overrides(tag: str, name: str) -> tuple[BackendOverride, ...]:
            found = [self.given.get((op.name, tag, name, b)) for b in vocab.BACKENDS]
            return tuple(f[0] for f in found if f and (f[0].datatypes or f[0].layout))

        return replace(
            op,
            inputs=tuple(replace(t, overrides=overrides("Input", t.name)) for t in op.inputs),
            outputs=tuple(replace(t, overrides=overrides("Output", t.name)) for t in op.outputs),
            params=tuple(replace(p, overrides=overrides("Parameter", p.name)) for p in op.params),
        )
