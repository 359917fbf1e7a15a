"""Fuzzing the XML loader: whatever the bytes, it returns a package or raises UserError."""

from __future__ import annotations

import copy
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lxml import etree

from udo_build.errors import Diagnostics, UserError
from udo_build.opdef.model import OpPackageDef
from udo_build.opdef.xml_config import load_xml_config

DATA = Path(__file__).parent / "data" / "xml"
BASES = [(DATA / f"{name}.xml").read_bytes()
         for name in ("relu_supplemental", "full_opdef", "order_b")]
TAGS = ["OpDefCollection", "OpDefList", "OpDef", "Name", "Description", "Content", "Input",
        "Output", "Parameter", "Datatype", "Shape", "Rank", "Layout", "Default", "Enumeration",
        "Enum", "Mandatory", "Repeated", "SupportedBackend", "SupplementalOpDefList",
        "SupplementalOpDef", "SupportedOps", "OpName", "Unknown"]
VALUES = ["", " ", "6D", "ND", "SCALAR", "true", "0", "yes", "FLOAT_32", "QNN_DATATYPE_INT_32",
          "BACKEND_SPECIFIC", "NHWC", "HTP", "[1, 2", "[[1], [2, 3]]", "[" * 40, "1.5", "-3",
          "9" * 5000, "CEIL", "in[0]", "Relu", "Op-1"]
FUZZ = settings(max_examples=200, deadline=None, database=None,
                suppress_health_check=[HealthCheck.too_slow])

texts = st.one_of(st.sampled_from(VALUES), st.text(
    st.characters(codec="utf-8", exclude_categories=("Cs", "Cc")), max_size=12))


@st.composite
def edited_trees(draw: st.DrawFn) -> bytes:
    """A valid config with one to four elements deleted, duplicated, renamed or rewritten."""
    root = etree.fromstring(draw(st.sampled_from(BASES)), etree.XMLParser(remove_comments=True))
    for _ in range(draw(st.integers(1, 4))):
        el = draw(st.sampled_from(list(root.iter())))
        action = draw(st.sampled_from(["delete", "duplicate", "rename", "text", "attribute"]))
        parent = el.getparent()
        if action == "delete" and parent is not None:
            parent.remove(el)
        elif action == "duplicate" and parent is not None:
            parent.insert(parent.index(el), copy.deepcopy(el))
        elif action == "rename":
            el.tag = draw(st.sampled_from(TAGS))
        elif action == "text":
            el.text = draw(texts)
        else:
            el.set(draw(st.sampled_from(["PackageName", "Backend", "Source", "Other"])),
                   draw(texts))
    return etree.tostring(root, encoding="utf-8")


@st.composite
def edited_bytes(draw: st.DrawFn) -> bytes:
    """A valid config truncated, or with random bytes inserted or written over it."""
    data = bytearray(draw(st.sampled_from(BASES)))
    at = draw(st.integers(0, len(data)))
    action = draw(st.sampled_from(["truncate", "insert", "overwrite"]))
    if action == "truncate":
        return bytes(data[:at])
    noise = draw(st.binary(min_size=1, max_size=16))
    data[at:at + (len(noise) if action == "overwrite" else 0)] = noise
    return bytes(data)


def check_loads_or_refuses(data: bytes) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "ops.xml"
        path.write_bytes(data)
        try:
            package = load_xml_config(path, Diagnostics())
        except UserError as exc:
            assert exc.problems and all(p.message and p.file for p in exc.problems)
        else:
            assert isinstance(package, OpPackageDef) and package.ops


@FUZZ
@given(edited_trees())
def test_edited_trees(data: bytes) -> None:
    check_loads_or_refuses(data)


@FUZZ
@given(st.one_of(edited_bytes(), st.binary(max_size=64)))
def test_edited_bytes(data: bytes) -> None:
    check_loads_or_refuses(data)
