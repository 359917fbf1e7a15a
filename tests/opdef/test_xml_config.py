"""The XML OpDefCollection loader: vendor templates, each rule, hardening, canonical form."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from lxml import etree

from udo_build.errors import Diagnostics, UserError
from udo_build.opdef import vocab
from udo_build.opdef.model import (
    BackendOverride,
    Default,
    OpDef,
    OpPackageDef,
    ParamDef,
    Reference,
    TensorDef,
    resolve_backend,
)
from udo_build.opdef.xml_config import MAX_BYTES, load_xml_config
from udo_build.opdef.xsd import XSD_PATH

DATA = Path(__file__).parent / "data" / "xml"

IN = "<Input><Name>x</Name><Datatype>FLOAT_32</Datatype></Input>"
OUT = "<Output><Name>y</Name><Datatype>FLOAT_32</Datatype></Output>"
DATATYPES = (
    "INT_8, INT_16, INT_32, INT_64, UINT_8, UINT_16, UINT_32, UINT_64, FLOAT_16, FLOAT_32, "
    "FLOAT_64, SFIXED_POINT_4, SFIXED_POINT_8, SFIXED_POINT_16, SFIXED_POINT_32, UFIXED_POINT_4, "
    "UFIXED_POINT_8, UFIXED_POINT_16, UFIXED_POINT_32, BOOL_8, STRING, BACKEND_SPECIFIC"
)


def doc(*body: str, extra: str = "", attrs: str = 'PackageName="Pkg"') -> str:
    """An op config with one op named Op; each body part on its own line, from line 5 on."""
    lines = [f"<OpDefCollection {attrs}>", "<OpDefList>", "<OpDef>", "<Name>Op</Name>", *body,
             "</OpDef>", "</OpDefList>", extra, "</OpDefCollection>", ""]
    return "\n".join(lines)


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Run in tmp_path so that messages name files as ops.xml."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def load(text: str | bytes, diag: Diagnostics | None = None) -> OpPackageDef:
    path = Path("ops.xml")
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return load_xml_config(path, diag if diag is not None else Diagnostics())


def errors(text: str | bytes) -> list[str]:
    with pytest.raises(UserError) as caught:
        load(text)
    return [str(p) for p in caught.value.problems]


# -- the vendor templates -----------------------------------------------------------------------


def test_full_opdef_template() -> None:
    diag = Diagnostics()
    pkg = load_xml_config(DATA / "full_opdef.xml", diag)
    four_d = dict(rank="4D", layout="NHWC")
    expected = OpPackageDef("ExamplePackage", "aisw", "2.1.0", source_format="xml", ops=(OpDef(
        name="ScaleBias",
        description="Scales and shifts its input.",
        references=(
            Reference("Android NDK NeuralNetworks",
                      "ANEURALNETWORKS_MUL <https://developer.android.com/ndk/reference>"),
            Reference("Internal wiki", ""),
        ),
        inputs=(
            TensorDef("in[0]", ("FLOAT_32", "UFIXED_POINT_8"), **four_d,
                      description="input activation", shape_text="a 4D tensor"),
            TensorDef("bias", ("FLOAT_32",), "1D", mandatory=False, static=True,
                      default=Default("tensor", (0.5, -1, 0.002)),
                      description="per-channel bias", shape_text="[channels]"),
        ),
        outputs=(
            TensorDef("out[0]", ("FLOAT_32", "UFIXED_POINT_8"), **four_d,
                      description="output activation"),
            TensorDef("mask", ("BOOL_8",), mandatory=False, shape_text="same shape as in[0]"),
        ),
        params=(
            ParamDef("scale", ("FLOAT_32",), default=Default("scalar", 0.5),
                     description="the factor to scale by"),
            ParamDef("inplace", ("BOOL_8",), default=Default("boolean", True)),
            ParamDef("label", ("STRING",), default=Default("string", "fast path")),
            ParamDef("weights", ("INT_32",), "1D", mandatory=True,
                     default=Default("tensor", (1, 2, 3)), shape_text="[n]"),
            ParamDef("rounding", ("UINT_32",), default=Default("scalar", 1),
                     enumeration=("FLOOR", "CEIL", "NEAREST")),
        ),
        backends=("CPU", "HTP"),
        use_default_translation=True,
    ),))
    assert pkg == expected
    assert diag.warnings == []
    op = pkg.ops[0]
    assert (op.origin.line, op.origin.field) == (5, "OpDef[ScaleBias]")
    assert (op.params[4].origin.line, op.params[4].origin.field) == (
        79, "OpDef[ScaleBias].Parameter[rounding]")
    assert op.origin.file == str(DATA / "full_opdef.xml")


def test_supplemental_template_and_resolution() -> None:
    pkg = load_xml_config(DATA / "relu_supplemental.xml", Diagnostics())
    relu = pkg.ops[0]
    assert relu.backends == ("CPU", "HTP")
    assert relu.inputs[0].datatypes == ("BACKEND_SPECIFIC",)
    assert relu.inputs[0].overrides == (
        BackendOverride("HTP", ("UFIXED_POINT_8", "UFIXED_POINT_16")),)
    assert relu.outputs[0].overrides == (BackendOverride("HTP", ("UFIXED_POINT_8",), "NHWC"),)
    assert relu.params[0].overrides == (BackendOverride("HTP", ("UINT_32",)),)
    assert relu.params[0].default == Default("scalar", 0)

    htp = resolve_backend(pkg, "HTP")
    assert (htp.name, htp.backend) == ("ReluOpPackage", "HTP")
    op = htp.ops[0]
    assert op.inputs[0].datatypes == ("UFIXED_POINT_8", "UFIXED_POINT_16")
    assert (op.outputs[0].datatypes, op.outputs[0].layout) == (("UFIXED_POINT_8",), "NHWC")

    # nothing types Relu for CPU: the vendor's typing, one warning for the op, at the op
    diag = Diagnostics()
    cpu = resolve_backend(pkg, "CPU", diag).ops[0]
    assert [t.datatypes for t in (*cpu.inputs, *cpu.outputs)] == [("FLOAT_32",)] * 2
    assert cpu.outputs[0].layout == "UNDEFINED"
    (first,) = diag.warnings
    assert first.message == (
        "op Relu: BACKEND_SPECIFIC with no datatype or layout for backend CPU; taken as the "
        "vendor's generators take it: 'in[0]', 'out[0]' FLOAT_32; 'out[0]' UNDEFINED")
    assert first.hint == ("to choose, give them a Datatype in a SupplementalOpDef for Relu "
                          'under <SupplementalOpDefList Backend="CPU">')
    assert (first.line, first.field) == (pkg.ops[0].origin.line, "OpDef[Relu]")


def test_no_description_unknown_names_warn() -> None:
    diag = Diagnostics()
    pkg = load_xml_config(DATA / "no_description.xml", diag)
    assert [(w.line, w.field, w.message) for w in diag.warnings] == [
        (4, "Author", "unknown attribute Author ignored"),
        (15, "OpDef[Softplus].Output[y].Quantization", "unknown element <Quantization> ignored"),
    ]
    op = pkg.ops[0]
    assert (pkg.name, pkg.domain, pkg.version) == ("PlainPackage", "", "1.0.0")
    assert op.description == op.inputs[0].description == op.params[0].description == ""
    assert op.backends == vocab.BACKENDS and op.use_default_translation is False
    assert op.inputs[0] == TensorDef("x", ("FLOAT_32",))  # rank ND, layout UNDEFINED, mandatory
    assert op.params[0] == ParamDef("beta", ("FLOAT_32",), default=Default("scalar", 1.0))


def test_unknown_element_keeps_surrounding_text(here: Path) -> None:
    diag = Diagnostics()
    pkg = load(doc("<Description>adds <b>one</b> to x</Description>", IN, OUT), diag)
    assert pkg.ops[0].description == "adds to x"
    assert [str(w) for w in diag.warnings] == [
        "ops.xml:5: OpDef[Op].Description.b: unknown element <b> ignored"]


def test_misspelled_element_is_dropped_with_a_suggestion(here: Path) -> None:
    diag = Diagnostics()
    text = doc("<Input><Name>x</Name><Datatypes>FLOAT_32</Datatypes></Input>", OUT,
               attrs='PackageName="Pkg" Domian="aisw"')
    assert errors(text) == [
        "ops.xml:5: OpDef[Op].Input[x]: Input has no Datatype; give at least one <Datatype>; if it "
        "differs per backend, use BACKEND_SPECIFIC and give it in a SupplementalOpDefList"]
    with pytest.raises(UserError):
        load(text, diag)
    assert [str(w) for w in diag.warnings] == [
        "ops.xml:1: Domian: unknown attribute Domian ignored; did you mean Domain?",
        "ops.xml:5: OpDef[Op].Input[x].Datatypes: unknown element <Datatypes> ignored; did you "
        "mean <Datatype>?"]


def test_xsd_lists_equal_vocab() -> None:
    xs = "{http://www.w3.org/2001/XMLSchema}"
    root = etree.parse(str(XSD_PATH)).getroot()
    values = {t.get("name"): tuple(e.get("value") for e in t.iter(f"{xs}enumeration"))
              for t in root.iter(f"{xs}simpleType")}
    assert values["Datatype"] == vocab.accepted_datatype_spellings()
    assert values["Rank"] == vocab.RANKS
    assert values["Layout"] == vocab.XML_LAYOUTS
    assert values["Backend"] == ()  # any name: unknown backends are warnings (opdef.rules)


# -- one test per rule --------------------------------------------------------------------------

RULES = [
    ("parameter without Name", doc(IN, OUT, "<Parameter><Datatype>INT_32</Datatype></Parameter>"),
     ["ops.xml:7: OpDef[Op].Parameter[#1]: Parameter has no Name; give the Parameter a <Name>"]),
    ("no input", doc(OUT),
     ["ops.xml:3: OpDef[Op]: op Op has no input; an op needs at least one input"]),
    ("no output", doc(IN),
     ["ops.xml:3: OpDef[Op]: op Op has no output; an op needs at least one output"]),
    ("output with Default",
     doc(IN, "<Output><Name>y</Name><Datatype>FLOAT_32</Datatype><Default>0</Default></Output>"),
     ["ops.xml:6: OpDef[Op].Output[y].Default: op Op, output 'y': outputs cannot have a default; "
      "remove the default"]),
    ("bad Rank",
     doc("<Input><Name>x</Name><Datatype>FLOAT_32</Datatype><Shape><Rank>6D</Rank></Shape>"
         "</Input>", OUT),
     ["ops.xml:5: OpDef[Op].Input[x].Shape.Rank: '6D' is not an allowed Rank; "
      "allowed: SCALAR, 1D, 2D, 3D, 4D, 5D, ND"]),
    ("bad Layout",
     doc("<Input><Name>x</Name><Datatype>FLOAT_32</Datatype><Shape><Layout>NCHW</Layout></Shape>"
         "</Input>", OUT),
     ["ops.xml:5: OpDef[Op].Input[x].Shape.Layout: 'NCHW' is not an allowed Layout; "
      "allowed: NHWC, NHCW, NDHWC, NONTRIVIAL, UNDEFINED, BACKEND_SPECIFIC"]),
    ("bad Datatype", doc(IN, "<Output><Name>y</Name><Datatype> FLOAT32 </Datatype></Output>"),
     [f"ops.xml:6: OpDef[Op].Output[y].Datatype: 'FLOAT32' is not an allowed Datatype; allowed: "
      f"{DATATYPES} (the QNN_DATATYPE_ forms, like QNN_DATATYPE_FLOAT_32, are accepted too); "
      "did you mean FLOAT_32?"]),
    ("empty Datatype", doc(IN, "<Output><Name>y</Name><Datatype/></Output>"),
     [f"ops.xml:6: OpDef[Op].Output[y].Datatype: Datatype is empty; allowed: {DATATYPES} "
      "(the QNN_DATATYPE_ forms, like QNN_DATATYPE_FLOAT_32, are accepted too)"]),
    ("bad boolean",
     doc("<Input><Name>x</Name><Datatype>FLOAT_32</Datatype><Mandatory>yes</Mandatory></Input>",
         OUT),
     ["ops.xml:5: OpDef[Op].Input[x].Mandatory: 'yes' is not an allowed Mandatory; "
      "allowed: true, false, 1, 0"]),
    ("misspelled boolean", doc(IN, OUT, "<UseDefaultTranslation>Flase</UseDefaultTranslation>"),
     ["ops.xml:7: OpDef[Op].UseDefaultTranslation: 'Flase' is not an allowed "
      "UseDefaultTranslation; allowed: true, false, 1, 0; did you mean false?"]),
    ("empty SupportedBackend", doc(IN, OUT, "<SupportedBackend> </SupportedBackend>"),
     ["ops.xml:7: OpDef[Op].SupportedBackend: SupportedBackend is empty; "
      "allowed: CPU, GPU, DSP, HTP"]),
    ("Repeated in a Parameter",
     doc(IN, OUT, "<Parameter><Name>p</Name><Datatype>INT_32</Datatype>"
                  "<Repeated>true</Repeated></Parameter>"),
     ["ops.xml:7: OpDef[Op].Parameter[p].Repeated: <Repeated> is not allowed here; expected one "
      "of: Name, Description, Mandatory, Datatype, Shape, Default, Enumeration"]),
    ("Default in a supplement", doc(IN, OUT, extra=(
        '<SupplementalOpDefList Backend="HTP"><SupplementalOpDef><Name>Op</Name>\n'
        "<Input><Name>x</Name><Default>1</Default></Input>"
        "</SupplementalOpDef></SupplementalOpDefList>")),
     ["ops.xml:10: SupplementalOpDefList[HTP].SupplementalOpDef[Op].Input[x].Default: <Default> "
      "is not allowed here; expected one of: Name, Datatype, Shape; a SupplementalOpDef gives "
      "only the Datatype (and, for inputs and outputs, the Shape/Layout) per backend; give "
      "everything else in the OpDef"]),
    ("Rank in a supplement", doc(IN, OUT, extra=(
        '<SupplementalOpDefList Backend="HTP"><SupplementalOpDef><Name>Op</Name>'
        "<Input><Name>x</Name><Shape><Rank>4D</Rank></Shape></Input>"
        "</SupplementalOpDef></SupplementalOpDefList>")),
     ["ops.xml:9: SupplementalOpDefList[HTP].SupplementalOpDef[Op].Input[x].Shape.Rank: <Rank> "
      "is not allowed here; expected one of: Layout; a SupplementalOpDef gives only the Datatype "
      "(and, for inputs and outputs, the Shape/Layout) per backend; give everything else in the "
      "OpDef"]),
    ("text where elements belong", doc(IN, OUT, "stray words"),
     ["ops.xml:3: OpDef[Op]: <OpDef> holds text, but only elements are allowed here; "
      "remove the text"]),
    ("element inside a value", doc(IN, OUT, "<Parameter><Name>p<Datatype/></Name></Parameter>"),
     ["ops.xml:7: OpDef[Op].Parameter[p].Name: <Name> holds elements, but only a value is "
      "allowed here; remove the elements inside it"]),
    ("empty Enumeration",
     doc(IN, OUT, "<Parameter><Name>p</Name><Datatype>UINT_32</Datatype><Enumeration/>"
                  "</Parameter>"),
     ["ops.xml:7: OpDef[Op].Parameter[p].Enumeration: <Enumeration> needs at least one of: Enum"]),
    ("PackageName missing", doc(IN, OUT, attrs='Domain="aisw"'),
     ['ops.xml:1: PackageName: <OpDefCollection> needs the attribute PackageName; add it, like '
      'PackageName="MyOpPackage"']),
    ("PackageName not an identifier", doc(IN, OUT, attrs='PackageName="My Package"'),
     ["ops.xml:1: PackageName: PackageName 'My Package' is not a valid identifier; use letters, "
      "digits and _, not starting with a digit"]),
    ("Backend missing", doc(IN, OUT, extra="<SupplementalOpDefList/>"),
     ['ops.xml:9: SupplementalOpDefList[#1].Backend: <SupplementalOpDefList> needs the attribute '
      'Backend; add it, like Backend="HTP" (one of CPU, GPU, DSP, HTP)']),
    ("known attribute in the wrong place", doc(IN, OUT, '<Reference Backend="HTP"/>'),
     ["ops.xml:7: OpDef[Op].Reference.Backend: attribute Backend is not allowed on <Reference>; "
      "remove it"]),
    ("Mandatory twice",
     doc("<Input><Name>x</Name><Datatype>FLOAT_32</Datatype>\n<Mandatory>true</Mandatory>"
         "<Mandatory>false</Mandatory></Input>", OUT),
     ["ops.xml:6: OpDef[Op].Input[x].Mandatory[#2]: Mandatory is given twice; keep one "
      "<Mandatory> (the first is at line 6)"]),
    ("no Datatype", doc("<Input><Name>x</Name></Input>", OUT),
     ["ops.xml:5: OpDef[Op].Input[x]: Input has no Datatype; give at least one <Datatype>; if it "
      "differs per backend, use BACKEND_SPECIFIC and give it in a SupplementalOpDefList"]),
    ("INT_32 default 1.5",
     doc(IN, OUT, "<Parameter><Name>n</Name><Datatype>INT_32</Datatype>",
         "<Default>1.5</Default></Parameter>"),
     ["ops.xml:8: OpDef[Op].Parameter[n].Default: default 1.5 is not a whole number, as type "
      "INT_32 needs; give a default that fits the Datatype and Rank"]),
    ("tensor default on a SCALAR",
     doc("<Input><Name>x</Name><Datatype>FLOAT_32</Datatype><Shape><Rank>SCALAR</Rank></Shape>"
         "<Mandatory>false</Mandatory><Default>[1, 2]</Default></Input>", OUT),
     ["ops.xml:5: OpDef[Op].Input[x].Default: a SCALAR takes a single value as default, not a "
      "tensor; give a default that fits the Datatype and Rank"]),
    ("enumeration default not in the set",
     doc(IN, OUT, "<Parameter><Name>r</Name><Datatype>UINT_32</Datatype><Default> ROUND </Default>"
                  "<Enumeration><Enum>FLOOR</Enum><Enum>CEIL</Enum></Enumeration></Parameter>"),
     ["ops.xml:7: OpDef[Op].Parameter[r].Default: default 'ROUND' is not a value of the "
      "enumeration; allowed: FLOOR (0), CEIL (1); give a default that fits the Datatype and Rank"]),
    ("enumeration of floats",
     doc(IN, OUT, "<Parameter><Name>r</Name><Datatype>FLOAT_32</Datatype>"
                  "<Enumeration><Enum>A</Enum><Enum>A</Enum></Enumeration></Parameter>"),
     ["ops.xml:7: OpDef[Op].Parameter[r].Enumeration: op Op, parameter 'r': an enumeration needs "
      "an integer datatype, not FLOAT_32; enumeration values are numbered 0, 1, 2, ... in order: "
      "use UINT_32",
      "ops.xml:7: OpDef[Op].Parameter[r].Enumeration: op Op, parameter 'r': enumeration value "
      "'A' is given twice"]),
    ("unknown tensor in a supplement", doc(IN, OUT, extra=(
        '<SupplementalOpDefList Backend="HTP"><SupplementalOpDef><Name>Op</Name>'
        "<Input><Name>z</Name><Datatype>INT_8</Datatype></Input>"
        "</SupplementalOpDef></SupplementalOpDefList>")),
     ["ops.xml:9: SupplementalOpDefList[HTP].SupplementalOpDef[Op].Input[z]: op Op has no input "
      "'z'; its inputs are: x"]),
    ("tensor supplemented twice", doc(IN, OUT, extra=(
        '<SupplementalOpDefList Backend="HTP"><SupplementalOpDef><Name>Op</Name>'
        "<Output><Name>y</Name><Datatype>INT_8</Datatype></Output></SupplementalOpDef>\n"
        "<SupplementalOpDef><Name>Op</Name><Output><Name>y</Name><Datatype>INT_16</Datatype>"
        "</Output></SupplementalOpDef></SupplementalOpDefList>")),
     ["ops.xml:10: SupplementalOpDefList[HTP].SupplementalOpDef[Op].Output[y]: Output y of op Op "
      "is supplemented twice for backend HTP; merge it with the one at line 9"]),
    ("duplicate OpDef", doc(IN, OUT, "</OpDef>\n<OpDef><Name>Op</Name>", IN, OUT),
     ["ops.xml:8: OpDef[Op]: OpDef Op is given twice (first at line 3); give each op its own "
      "Name"]),
    ("op name not an identifier", doc(IN, OUT).replace("<Name>Op</Name>", "<Name>My-Op</Name>"),
     ["ops.xml:3: OpDef[My-Op]: op name 'My-Op' is not a valid identifier; use letters, digits "
      "and _, not starting with a digit (package sources are named after the op)"]),
    ("nameless op among others", doc(IN, OUT, "</OpDef>\n<OpDef>", IN, OUT),
     ["ops.xml:8: OpDef[#2]: OpDef has no Name; give the OpDef a <Name>"]),
    ("no op", '<OpDefCollection PackageName="Pkg"><OpDefList/></OpDefCollection>',
     ["ops.xml:1: OpDefCollection: the op config defines no op; add "
      "<OpDefList><OpDef>...</OpDef></OpDefList>"]),
    ("every problem at once",
     doc("<Input><Name>x</Name><Datatype>FLOAT_32</Datatype><Shape><Rank>6D</Rank></Shape>"
         "</Input>", "<Output><Name>y</Name><Datatype>INT_32</Datatype><Mandatory>maybe"
         "</Mandatory></Output>"),
     ["ops.xml:5: OpDef[Op].Input[x].Shape.Rank: '6D' is not an allowed Rank; "
      "allowed: SCALAR, 1D, 2D, 3D, 4D, 5D, ND",
      "ops.xml:6: OpDef[Op].Output[y].Mandatory: 'maybe' is not an allowed Mandatory; "
      "allowed: true, false, 1, 0"]),
]


@pytest.mark.parametrize(("text", "expected"), [r[1:] for r in RULES], ids=[r[0] for r in RULES])
def test_rule(here: Path, text: str, expected: list[str]) -> None:
    assert errors(text) == expected


def test_repeated_input_fails_on_htp_only(here: Path) -> None:
    pkg = load(doc("<Input><Name>x</Name><Datatype>FLOAT_32</Datatype><Repeated>true</Repeated>"
                   "</Input>", OUT))
    assert resolve_backend(pkg, "CPU").ops[0].inputs[0].repeated is True
    with pytest.raises(UserError) as caught:
        resolve_backend(pkg, "HTP")
    assert str(caught.value) == ("ops.xml:5: OpDef[Op].Input[x]: op Op, input 'x': Repeated inputs "
                                 "are not supported on HTP; set Repeated to false, or do not "
                                 "build this op for DSP or HTP")


def test_supported_ops_never_narrow_backends(here: Path) -> None:
    text = doc(IN, OUT, "</OpDef>\n<OpDef><Name>Other</Name>", IN, OUT, extra=(
        '<SupplementalOpDefList Backend="HTP"><SupportedOps><OpName>Op</OpName></SupportedOps>'
        '</SupplementalOpDefList><SupplementalOpDefList Backend="HTP"><SupportedOps>'
        "<OpName>Other</OpName></SupportedOps></SupplementalOpDefList>"
        '<SupplementalOpDefList Backend="GPU"><SupportedOps/></SupplementalOpDefList>'))
    pkg = load(text)
    assert [(op.name, op.backends) for op in pkg.ops] == [("Op", vocab.BACKENDS),
                                                       ("Other", vocab.BACKENDS)]


def test_supplement_for_an_op_off_the_backend_warns(here: Path) -> None:
    diag = Diagnostics()
    pkg = load(doc(IN, OUT, "<SupportedBackend>CPU</SupportedBackend>", extra=(
        '<SupplementalOpDefList Backend="HTP"><SupplementalOpDef><Name>Op</Name>'
        "<Input><Name>x</Name><Datatype>INT_8</Datatype></Input>"
        "</SupplementalOpDef></SupplementalOpDefList>")), diag)
    assert pkg.ops[0].inputs[0].overrides == ()
    assert [str(w) for w in diag.warnings] == [
        "ops.xml:10: SupplementalOpDefList[HTP].SupplementalOpDef[Op]: SupplementalOpDef for op Op "
        "is ignored: the op does not run on HTP; op Op runs on: CPU"]


# -- hardening ----------------------------------------------------------------------------------

NO_DTD = "DOCTYPE and ENTITY declarations are not allowed in op configs"
HOSTILE = {
    "doctype": '<?xml version="1.0"?>\n<!DOCTYPE OpDefCollection>\n<OpDefCollection/>',
    "xxe file": ('<?xml version="1.0"?>\n<!DOCTYPE r [\n<!ENTITY x SYSTEM "file:///etc/passwd">\n'
                 ']>\n<OpDefCollection PackageName="&x;"/>'),
    "xxe http": ('<!DOCTYPE r [<!ENTITY x SYSTEM "http://127.0.0.1:9/evil">]>'
                 '<OpDefCollection PackageName="&x;"/>'),
    "billion laughs": "<?xml version='1.0'?>\n<!DOCTYPE lolz [\n<!ENTITY lol 'lol'>\n" + "".join(
        f"<!ENTITY lol{i} '{('&lol' + str(i - 1) + ';') * 10 if i > 1 else '&lol;' * 10}'>\n"
        for i in range(1, 10)) + "]>\n<OpDefCollection PackageName='&lol9;'/>",
    "parameter entity": ('<!DOCTYPE r [<!ENTITY % ext SYSTEM "file:///etc/passwd"> %ext;]>\n'
                         "<OpDefCollection/>"),
    "lower case": "<!doctype OpDefCollection><OpDefCollection/>",
}
HOSTILE_LINES = {"doctype": 2, "xxe file": 2, "xxe http": 1, "billion laughs": 2,
                 "parameter entity": 1, "lower case": 1}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_dtds_are_refused(here: Path, name: str) -> None:
    with pytest.raises(UserError) as caught:
        load(HOSTILE[name])
    problem = caught.value.problem
    assert (problem.message, problem.line) == (NO_DTD, HOSTILE_LINES[name])
    assert problem.hint == "remove the <!DOCTYPE ...> block; an op config needs no DTD"


@pytest.mark.parametrize(("data", "expected"), [
    (b"", "ops.xml: the op config is empty; an op config is an <OpDefCollection> XML document"),
    (b" \n\t\n", "ops.xml: the op config is empty; an op config is an <OpDefCollection> XML "
                 "document"),
    (b"\xff\xfe\x00<\x00g\x00a\x00r\x00b",
     "ops.xml:1: not valid UTF-8 text (byte 0xff); save the file as UTF-8"),
    (b'<OpDefCollection PackageName="P">\n<OpDefList>\n</OpDefCollection>',
     "ops.xml:3:19: not well-formed XML: Opening and ending tag mismatch: OpDefList line 2 and "
     "OpDefCollection"),
    (b"<OpDefCollection PackageName='P'>&nbsp;</OpDefCollection>",
     "ops.xml:1:40: not well-formed XML: Entity 'nbsp' not defined"),
    (b"<OpDefs/>", "ops.xml:1: the root element is <OpDefs>, not <OpDefCollection>; an op config "
                   "is an <OpDefCollection> without a namespace"),
    (b'<OpDefCollection xmlns="urn:x" PackageName="P"/>',
     "ops.xml:1: the root element is <{urn:x}OpDefCollection>, not <OpDefCollection>; an op "
     "config is an <OpDefCollection> without a namespace"),
])
def test_unreadable_files(here: Path, data: bytes, expected: str) -> None:
    assert errors(data) == [expected]


def test_overflowing_float_default_is_refused(here: Path) -> None:
    with pytest.raises(UserError, match="default inf is not finite"):
        load(doc(IN, OUT, "<Parameter><Name>s</Name><Datatype>FLOAT_32</Datatype>"
                          "<Default>1e999</Default></Parameter>"))


def test_deep_nesting_is_refused(here: Path) -> None:
    [message] = errors(b"<OpDefCollection>" + b"<a>" * 300 + b"</a>" * 300 + b"</OpDefCollection>")
    assert message.startswith("ops.xml:1:") and "not well-formed XML: Excessive depth" in message


def test_over_size_file(here: Path) -> None:
    with open("ops.xml", "wb") as fh:
        fh.truncate(MAX_BYTES + 1)  # sparse: refused by its size, before it is read
    with pytest.raises(UserError) as caught:
        load_xml_config("ops.xml", Diagnostics())
    assert str(caught.value) == (f"ops.xml: op config is {MAX_BYTES + 1} bytes, over the limit of "
                                 f"{MAX_BYTES} bytes; is this the right file?")


def test_missing_file(here: Path) -> None:
    with pytest.raises(UserError, match="op config not found"):
        load_xml_config(Path("absent.xml"), Diagnostics())


# -- canonical form -----------------------------------------------------------------------------


def test_canonical_json_round_trip() -> None:
    for name in ("full_opdef", "relu_supplemental", "no_description", "order_a"):
        pkg = load_xml_config(DATA / f"{name}.xml", Diagnostics())
        back = OpPackageDef.from_json(pkg.to_json())
        assert back == pkg
        assert back.canonical_bytes() == pkg.canonical_bytes()


def test_order_whitespace_comments_and_vocabulary_do_not_matter() -> None:
    a = load_xml_config(DATA / "order_a.xml", Diagnostics())
    b = load_xml_config(DATA / "order_b.xml", Diagnostics())
    assert a == b
    assert a.canonical_bytes() == b.canonical_bytes() and a.digest() == b.digest()
    assert os.path.getsize(DATA / "order_a.xml") != os.path.getsize(DATA / "order_b.xml")
