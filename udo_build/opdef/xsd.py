"""The XML side of op configs: hardened parsing, the project's XSD, and field paths.

- `parse` reads an OpDefCollection safely: no DTD (so no entity can be expanded or fetched), no
  network, a hardened lxml parser; the root must be <OpDefCollection>.
- `drop_unknown` warns about and removes every element and attribute the XSD declares nowhere
  (real files carry names newer than any schema).
- `validate` checks the document against opdef.xsd and turns each libxml2 error into a readable
  problem with file, line and field path.
- `field_path` names an element in the file's own terms: `OpDef[Relu].Input[in[0]].Shape.Rank`;
  an element without a Name is numbered among its siblings from 1: `OpDef[#2].Parameter[#3]`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from lxml import etree

from ..errors import Diagnostics, Problem, UserError, raise_if_any
from ..source import decode_text
from . import vocab

XSD_PATH = Path(__file__).with_name("opdef.xsd")

_XS = "{http://www.w3.org/2001/XMLSchema}"
_XSI = "{http://www.w3.org/2001/XMLSchema-instance}"
_DECLARATION = re.compile(r"<!\s*(DOCTYPE|ENTITY)\b", re.IGNORECASE)
_NO_DTD = "DOCTYPE and ENTITY declarations are not allowed in op configs"
_NO_DTD_HINT = "remove the <!DOCTYPE ...> block; an op config needs no DTD"
NAMED = ("OpDef", "Input", "Output", "Parameter", "SupplementalOpDef")
_NUMBERED = (*NAMED, "SupplementalOpDefList")  # always get [name] or [#position]
_TRANSPARENT = ("OpDefCollection", "OpDefList")  # left out of field paths
_ALLOWED = {"Rank": vocab.RANKS, "Layout": vocab.XML_LAYOUTS, "Datatype": vocab.DATATYPES,
            "Backend": vocab.BACKENDS, "SupportedBackend": vocab.BACKENDS}


# -- parsing and the schema ---------------------------------------------------------------------


def _parser() -> etree.XMLParser:
    return etree.XMLParser(
        resolve_entities=False, no_network=True, load_dtd=False, dtd_validation=False,
        huge_tree=False, remove_comments=True, remove_pis=True, encoding="utf-8",
    )


def parse(data: bytes, file: str) -> etree._Element:
    text = decode_text(data, file)
    if not text.strip():
        raise UserError("the op config is empty", file=file,
                        hint="an op config is an <OpDefCollection> XML document")
    found = _DECLARATION.search(text)
    if found:
        raise UserError(_NO_DTD, file=file, line=text.count("\n", 0, found.start()) + 1,
                        hint=_NO_DTD_HINT)
    parser = _parser()
    try:
        root = etree.fromstring(data, parser)
    except etree.XMLSyntaxError as exc:
        first = parser.error_log[0] if len(parser.error_log) else None
        message = first.message if first else str(exc.msg)
        line, column = (first.line, first.column) if first else exc.position
        raise UserError(f"not well-formed XML: {message}", file=file, line=line,
                        column=column or None) from None
    if root.getroottree().docinfo.doctype:
        raise UserError(_NO_DTD, file=file, hint=_NO_DTD_HINT)  # only if the check above missed
    if root.tag != "OpDefCollection":
        raise UserError(f"the root element is <{root.tag}>, not <OpDefCollection>", file=file,
                        line=root.sourceline,
                        hint="an op config is an <OpDefCollection> without a namespace")
    return root


@dataclass(frozen=True)
class _Schema:
    validator: etree.XMLSchema
    elements: frozenset[str]  # every element name the XSD declares
    attributes: frozenset[str]  # every attribute name the XSD declares
    children: dict[tuple[str, ...], tuple[str, ...]]  # element ancestry -> allowed children


@lru_cache(maxsize=1)
def _schema() -> _Schema:
    doc = etree.parse(str(XSD_PATH), _parser())
    types = {t.get("name"): t for t in doc.getroot().iterfind(f"{_XS}complexType")}
    children: dict[tuple[str, ...], tuple[str, ...]] = {}

    def walk(ancestry: tuple[str, ...], ctype: etree._Element) -> None:
        decls = list(ctype.iter(f"{_XS}element"))
        children[ancestry] = tuple(d.get("name") for d in decls)
        for d in decls:
            if d.get("type") in types:
                walk((*ancestry, d.get("name")), types[d.get("type")])

    top = doc.getroot().find(f"{_XS}element")
    walk((top.get("name"),), top.find(f"{_XS}complexType"))
    return _Schema(
        etree.XMLSchema(doc),
        frozenset(e.get("name") for e in doc.iter(f"{_XS}element")),
        frozenset(a.get("name") for a in doc.iter(f"{_XS}attribute")),
        children,
    )


# -- naming places ------------------------------------------------------------------------------


def collapse(text: str | None) -> str:
    return " ".join((text or "").split())


def did_you_mean(given: str, names: Iterable[str], form: str) -> str | None:
    """A hint naming the closest of `names` (ignoring case), or None when none is close."""
    by_upper = {n.upper(): n for n in names}
    close = difflib.get_close_matches(given.upper(), sorted(by_upper), 1, 0.8)
    return f"did you mean {form.format(by_upper[close[0]])}?" if close else None


def token(el: etree._Element, path: str = ".", default: str = "") -> str:
    """The whitespace-collapsed text of the first element at `path` below el, or `default`."""
    found = el.find(path)
    return default if found is None else collapse("".join(found.itertext()))


def _segment(el: etree._Element) -> str:
    tag, parent = el.tag, el.getparent()
    key = ""
    if tag == "SupplementalOpDefList":
        key = collapse(el.get("Backend"))
    elif tag in NAMED:
        key = token(el, "Name")
    if key:
        return f"{tag}[{key}]"
    same = [c for c in parent if c.tag == tag] if parent is not None else [el]
    return tag if len(same) == 1 and tag not in _NUMBERED else f"{tag}[#{same.index(el) + 1}]"


def field_path(el: etree._Element, suffix: str = "") -> str:
    """The field path of an element (and of its attribute or child `suffix`)."""
    chain = [*reversed(list(el.iterancestors())), el]
    parts = [_segment(e) for e in chain if e.tag not in _TRANSPARENT]
    return ".".join([*parts, suffix] if suffix else parts) or el.tag


def _ancestry(el: etree._Element) -> tuple[str, ...]:
    return (*(e.tag for e in reversed(list(el.iterancestors()))), el.tag)


# -- translating XSD errors ---------------------------------------------------------------------

_XSD_ERROR = re.compile(r"Element '([^']*)'(?:, attribute '([^']*)')?: (.*)", re.DOTALL)
_Hint = tuple[str, "str | None"]
_EXAMPLES = {"PackageName": 'PackageName="MyOpPackage"',
             "Backend": f'Backend="HTP" (one of {", ".join(vocab.BACKENDS)})'}


def _bad_value(found: dict[str, str], el: etree._Element | None) -> _Hint:
    name, value = found["attr"] or found["tag"], found["value"]
    allowed = _ALLOWED.get(name, ("true", "false", "1", "0"))
    listing = ", ".join(allowed)
    if name == "Datatype":
        listing += " (the QNN_DATATYPE_ forms, like QNN_DATATYPE_FLOAT_32, are accepted too)"
    head = f"{name} is empty" if not value else f"'{value}' is not an allowed {name}"
    spellings = vocab.accepted_datatype_spellings() if name == "Datatype" else allowed
    return f"{head}; allowed: {listing}", did_you_mean(value, spellings, "{}")


def _unexpected(found: dict[str, str], el: etree._Element | None) -> _Hint:
    parent = el.getparent() if el is not None else None
    expected = _schema().children.get(_ancestry(parent), ()) if parent is not None else ()
    listed = ", ".join(expected) or (found["expected"] or "").replace(" ,", ",").strip()
    hint = None
    if el is not None and any(a.tag == "SupplementalOpDef" for a in el.iterancestors()):
        hint = ("a SupplementalOpDef gives only the Datatype (and, for inputs and outputs, the "
                "Shape/Layout) per backend; give everything else in the OpDef")
    return f"<{found['tag']}> is not allowed here; expected one of: {listed}", hint


def _missing_attribute(found: dict[str, str], el: etree._Element | None) -> _Hint:
    example = _EXAMPLES.get(found["attribute"])
    return (f"<{found['tag']}> needs the attribute {found['attribute']}",
            f"add it, like {example}" if example else None)


# (libxml2 message, translation): the first that matches wins, else the message is kept as it is.
# A translation is a function or (message, hint) templates; both get the named groups and the
# element's tag and attribute.
_XSD_RULES: list[tuple[re.Pattern[str], Callable[..., _Hint] | _Hint]] = [
    (re.compile(r"\[facet '(?:enumeration|pattern)'\] The value '(?P<value>.*)' is not"),
     _bad_value),
    (re.compile(r"'(?P<value>.*)' is not a valid value of the"), _bad_value),
    (re.compile(r"This element is not expected\.(?: Expected is[^(]*\((?P<expected>.*)\))?"),
     _unexpected),
    (re.compile(r"The attribute '(?P<attribute>.*)' is required but missing"), _missing_attribute),
    (re.compile(r"The attribute '(?P<attribute>.*)' is not allowed"),
     ("attribute {attribute} is not allowed on <{tag}>", "remove it")),
    (re.compile(r"Character content other than whitespace"),
     ("<{tag}> holds text, but only elements are allowed here", "remove the text")),
    (re.compile(r"Element content is not allowed"),
     ("<{tag}> holds elements, but only a value is allowed here", "remove the elements inside it")),
    (re.compile(r"Missing child element\(s\)\. Expected is (?:one of )?\( (?P<expected>.*) \)"),
     ("<{tag}> needs at least one of: {expected}", None)),
]


def _translate(message: str, el: etree._Element | None) -> tuple[str, str | None, str]:
    """(message, hint, the attribute it is about or '') for one libxml2 schema error."""
    head = _XSD_ERROR.match(message)
    tag, attr, text = head.groups() if head else ("", None, message)
    for pattern, translation in _XSD_RULES:
        match = pattern.search(text)
        if match:
            found = {**match.groupdict(), "tag": tag, "attr": attr}
            if callable(translation):
                return (*translation(found, el), attr or found.get("attribute") or "")
            hint = translation[1].format(**found) if translation[1] else None
            return translation[0].format(**found), hint, attr or found.get("attribute") or ""
    return text.strip(), None, attr or ""


def _find(root: etree._Element, xpath: str | None) -> etree._Element | None:
    try:
        found = root.getroottree().xpath(xpath) if xpath else []
    except (etree.XPathError, ValueError):
        return None
    first = found[0] if isinstance(found, list) and found else None
    return first if isinstance(first, etree._Element) else None


# -- the two passes -----------------------------------------------------------------------------


def drop_unknown(root: etree._Element, file: str, diag: Diagnostics) -> None:
    """Warn about and remove every element and attribute the XSD does not declare."""
    schema = _schema()
    unknown: set[str] = set()

    def warn(el: etree._Element, message: str, hint: str | None, suffix: str = "") -> None:
        diag.warn(Problem(message, file, el.sourceline, None, field_path(el, suffix), hint))

    for el in root.iter():
        if any(a.tag in unknown for a in el.iterancestors()):
            continue
        if el.tag not in schema.elements:
            unknown.add(el.tag)
            warn(el, f"unknown element <{el.tag}> ignored",
                 did_you_mean(el.tag, schema.elements, "<{}>"))
            continue
        for name in [n for n in el.attrib if n not in schema.attributes]:
            if not name.startswith(_XSI):  # schema hints (xsi:) are dropped silently
                warn(el, f"unknown attribute {name} ignored",
                     did_you_mean(name, schema.attributes, "{}"), name)
            del el.attrib[name]
    etree.strip_elements(root, *unknown, with_tail=False)


def validate(root: etree._Element, file: str) -> None:
    """Check against opdef.xsd; one UserError with a readable problem per libxml2 error."""
    validator = _schema().validator
    if validator.validate(root.getroottree()):
        return
    problems: dict[tuple[int, str | None], Problem] = {}
    for entry in validator.error_log:
        el = _find(root, entry.path)
        message, hint, attr = _translate(entry.message, el)
        field = field_path(el, attr) if el is not None else None
        problems.setdefault((entry.line, field), Problem(
            message, file, entry.line or None, None, field, hint))
    raise_if_any(list(problems.values()))
