"""The loading rules of `udo_build.opdef.rules`, one test each, and the real vendor configs.

Every vendor config under data/vendor/ loads and keeps each op on every backend it declares
(README.md there says where each file came from).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from udo_build.cli import main
from udo_build.errors import Diagnostics, UserError
from udo_build.opdef import declared_backends, load_config, resolve_all
from udo_build.opdef.model import Default, OpPackageDef

VENDOR = Path(__file__).parent / "data" / "vendor"
LLAMA_OPS = 17
IN = "<Input><Name>x</Name><Datatype>FLOAT_32</Datatype></Input>"
OUT = "<Output><Name>y</Name><Datatype>FLOAT_32</Datatype></Output>"


def doc(*body: str, extra: str = "") -> str:
    """An op config with one op named Op; each body part on its own line, from line 5 on."""
    lines = ['<OpDefCollection PackageName="Pkg">', "<OpDefList>", "<OpDef>", "<Name>Op</Name>",
             *body, "</OpDef>", "</OpDefList>", extra, "</OpDefCollection>", ""]
    return "\n".join(lines)


@pytest.fixture
def here(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    return tmp_path


def load(text: str, name: str = "ops.xml") -> tuple[OpPackageDef, list[str]]:
    Path(name).write_text(text)
    diag = Diagnostics()
    (package,) = load_config(Path(name), diag)
    return package, [str(w) for w in diag.warnings]


def problems(text: str, name: str = "ops.xml") -> list[str]:
    Path(name).write_text(text)
    with pytest.raises(UserError) as caught:
        load_config(Path(name), Diagnostics())
    return [str(p) for p in caught.value.problems]


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err, env={})
    return code, out.getvalue(), err.getvalue()


SUPPLEMENT = ('<SupplementalOpDefList Backend="HTP"><SupportedOps><OpName>Other</OpName>'
              "</SupportedOps><SupplementalOpDef><Name>Op</Name><Input><Name>x</Name>"
              "<Datatype>UFIXED_POINT_8</Datatype></Input></SupplementalOpDef>"
              "</SupplementalOpDefList>")
TWO_OPS = doc(IN, OUT, "<SupportedBackend>HTP</SupportedBackend></OpDef>\n<OpDef>"
              "<Name>Other</Name>", IN, OUT, "<SupportedBackend>HTP</SupportedBackend>",
              extra=SUPPLEMENT)


# -- op_backends and supported_ops_scope --------------------------------------------------------


def test_supported_backend_says_where_an_op_runs(here: Path) -> None:
    package, warnings = load(TWO_OPS)
    assert [(op.name, op.backends) for op in package.ops] == [("Op", ("HTP",)),
                                                              ("Other", ("HTP",))]
    assert warnings == []
    htp = resolve_all(package, ["HTP"])["HTP"]
    assert [op.name for op in htp.ops] == ["Op", "Other"]  # Op is not in SupportedOps: kept
    assert htp.ops[0].inputs[0].datatypes == ("FLOAT_32", "UFIXED_POINT_8")  # supplement applies


def test_supported_ops_adds_its_backend(here: Path) -> None:
    text = doc(IN, OUT, "<SupportedBackend>CPU</SupportedBackend>", extra=(
        '<SupplementalOpDefList Backend="HTP"><SupportedOps><OpName>Op</OpName><OpName>Ghost'
        "</OpName></SupportedOps></SupplementalOpDefList>"))
    package, warnings = load(text)
    assert package.ops[0].backends == ("CPU", "HTP")
    assert warnings == [
        "ops.xml:10: SupplementalOpDefList[HTP].SupportedOps.OpName[#2]: SupportedOps names op "
        "Ghost, which no OpDef defines; ignored; check the spelling, or remove the OpName"]


# -- supplement_datatypes -----------------------------------------------------------------------


def test_a_supplement_adds_datatypes(here: Path) -> None:
    text = doc(IN, "<Output><Name>y</Name><Datatype>BACKEND_SPECIFIC</Datatype></Output>",
               extra=('<SupplementalOpDefList Backend="HTP"><SupplementalOpDef><Name>Op</Name>'
                      "<Input><Name>x</Name><Datatype>FLOAT_16</Datatype></Input>"
                      "<Output><Name>y</Name><Datatype>FLOAT_16</Datatype></Output>"
                      "</SupplementalOpDef></SupplementalOpDefList>"))
    package, _ = load(text)
    htp = resolve_all(package, ["HTP"])["HTP"].ops[0]
    assert htp.inputs[0].datatypes == ("FLOAT_32", "FLOAT_16")  # FLOAT_32 of the OpDef kept
    assert htp.outputs[0].datatypes == ("FLOAT_16",)  # BACKEND_SPECIFIC dropped


# -- stray_supplement ---------------------------------------------------------------------------


def test_supplement_of_an_undefined_op_is_a_warning(here: Path) -> None:
    package, warnings = load(doc(IN, OUT, extra=(
        '<SupplementalOpDefList Backend="HTP"><SupplementalOpDef><Name>Attention</Name>'
        "<Input><Name>in[0]</Name><Datatype>FLOAT_16</Datatype></Input>"
        "</SupplementalOpDef></SupplementalOpDefList>")))
    assert [op.name for op in package.ops] == ["Op"]
    assert warnings == [
        "ops.xml:9: SupplementalOpDefList[HTP].SupplementalOpDef[Attention]: SupplementalOpDef "
        "names op Attention, which no OpDef defines; ignored; the ops are: Op"]


# -- unknown_backend ----------------------------------------------------------------------------


def test_unknown_backends_are_warnings_and_the_rest_loads(here: Path) -> None:
    text = doc(IN, OUT, "<SupportedBackend>HTP</SupportedBackend>"
                        "<SupportedBackend>LPAI</SupportedBackend>", extra=(
        '<SupplementalOpDefList Backend="LPAI"><SupplementalOpDef><Name>Op</Name>'
        "<Input><Name>x</Name><Datatype>INT_8</Datatype></Input></SupplementalOpDef>"
        "</SupplementalOpDefList>"))
    package, warnings = load(text)
    assert package.ops[0].backends == ("HTP",)
    assert package.ops[0].inputs[0].overrides == ()
    assert warnings == [
        "ops.xml:3: OpDef[Op]: op Op: backend LPAI is not one udo-build builds; what the file "
        "says for it is ignored; udo-build builds CPU, GPU, DSP, HTP",
        "ops.xml:10: SupplementalOpDefList[LPAI]: SupplementalOpDefList: backend LPAI is not one "
        "udo-build builds; what the file says for it is ignored; udo-build builds CPU, GPU, DSP, "
        "HTP"]
    code, out, err = cli("opdef", "show", "ops.xml", "--backend", "HTP", "--json")
    assert code == 0, err
    assert json.loads(out)["packages"][0]["ops"][0]["backends"] == ["HTP"]


def test_an_op_only_for_an_unknown_backend_is_in_no_package(here: Path) -> None:
    package, warnings = load(doc(IN, OUT, "<SupportedBackend>LPAI</SupportedBackend>"))
    assert package.ops[0].backends == ()
    assert warnings == [
        "ops.xml:3: OpDef[Op]: op Op runs only on LPAI, which udo-build does not build: it is in "
        "no package; list one of CPU, GPU, DSP, HTP to build it"]
    with pytest.raises(UserError, match="package Pkg has no op for backend HTP"):
        resolve_all(package, ["HTP"])
    code, _, err = cli("opdef", "show", "ops.xml", "--backend", "HTP")
    assert code == 2
    assert err.index("runs only on LPAI") < err.index("has no op for backend HTP")


# -- default_is_real ----------------------------------------------------------------------------

QUANTIZED = """{"UdoPackage_0": {"UDO_PACKAGE_NAME": "P", "Operators": [{"type": "A",
 "inputs": [{"name": "x", "data_type": "FLOAT_32"},
            {"name": "w", %s, "static": true %s, "default_value": [1.0]}],
 "outputs": [{"name": "y", "data_type": "FLOAT_32"}], "core_types": ["CPU", "DSP"]}]}}"""
BY_DATA_TYPE = '"data_type": "UINT_8"'
BY_CORE = '"per_core_data_types": {"CPU": "UINT_8", "DSP": "UINT_8"}'


@pytest.mark.parametrize("typed", [BY_DATA_TYPE, BY_CORE], ids=["data_type", "per_core"])
def test_a_quantized_tensor_default_is_a_real_value(here: Path, typed: str) -> None:
    package, warnings = load(QUANTIZED % (typed, ', "quantization_mode": "TF"'), "ops.json")
    assert package.ops[0].inputs[1].default == Default("tensor", (1.0,))
    assert warnings == []


@pytest.mark.parametrize("typed", [BY_DATA_TYPE, BY_CORE], ids=["data_type", "per_core"])
def test_an_unquantized_integer_default_must_be_whole(here: Path, typed: str) -> None:
    (problem,) = problems((QUANTIZED % (typed, "")).replace("[1.0]", "[1.5]"), "ops.json")
    assert "op A, input 'w': default 1.5 is not a whole number, as type UINT_8 needs" in problem


# -- read_default -------------------------------------------------------------------------------


def param(mandatory: str, datatype: str, default: str, rank: str = "SCALAR") -> str:
    return doc(IN, OUT, f"<Parameter><Name>p</Name><Mandatory>{mandatory}</Mandatory>"
                        f"<Datatype>{datatype}</Datatype><Shape><Rank>{rank}</Rank></Shape>"
                        f"<Default>{default}</Default></Parameter>")


def test_a_mandatory_default_is_kept_as_text(here: Path) -> None:
    package, warnings = load(param("true", "QNN_DATATYPE_FLOAT_32", "N-1"))
    assert package.ops[0].params[0].default == Default("string", "N-1")
    assert warnings == [
        "ops.xml:7: OpDef[Op].Parameter[p].Default: default 'N-1' is kept as text: default "
        "'N-1' is not a value of type FLOAT_32; the item is mandatory, so its default is never "
        "used"]


def test_a_mandatory_default_that_reads_is_read_without_warning(here: Path) -> None:
    package, warnings = load(param("true", "FLOAT_32", "2"))
    assert (package.ops[0].params[0].default, warnings) == (Default("scalar", 2.0), [])


def test_an_optional_default_must_fit_unless_rank_relative(here: Path) -> None:
    package, warnings = load(param("false", "UINT_32", "N-1"))
    assert package.ops[0].params[0].default == Default("string", "N-1")
    assert warnings[0].endswith("a rank-relative default is not evaluated by udo-build")
    assert problems(param("false", "UINT_32", "last")) == [
        "ops.xml:7: OpDef[Op].Parameter[p].Default: default 'last' is not a value of type "
        "UINT_32; give a default that fits the Datatype and Rank"]


# -- check_declared_backends: `opdef show` without --backend ------------------------------------


def test_show_checks_every_declared_backend(here: Path) -> None:
    repeated = doc("<Input><Name>x</Name><Datatype>FLOAT_32</Datatype><Repeated>true</Repeated>"
                   "</Input>", OUT, "<SupportedBackend>CPU</SupportedBackend>"
                   "<SupportedBackend>HTP</SupportedBackend>")
    Path("ops.xml").write_text(repeated)
    code, out, err = cli("opdef", "show", "ops.xml")
    assert code != 0 and "Repeated inputs are not supported on HTP" in err
    unresolved = doc("<Input><Name>x</Name><Datatype>BACKEND_SPECIFIC</Datatype></Input>", OUT,
                     "<SupportedBackend>HTP</SupportedBackend>")
    Path("ops.xml").write_text(unresolved)
    code, out, err = cli("opdef", "show", "ops.xml")  # the vendor's typing, with a warning
    assert code == 0, err
    assert [line for line in err.splitlines() if "BACKEND_SPECIFIC" in line] == [
        "warning: ops.xml:3: OpDef[Op]: op Op: BACKEND_SPECIFIC with no datatype for backend "
        "HTP; taken as the vendor's generators take it: 'x' FLOAT_32; to choose, give them a "
        'Datatype in a SupplementalOpDef for Op under <SupplementalOpDefList Backend="HTP">']
    Path("ops.xml").write_text(repeated.replace("<SupportedBackend>HTP</SupportedBackend>", ""))
    assert cli("opdef", "show", "ops.xml")[0] == 0  # CPU takes Repeated inputs


# -- the real vendor configs --------------------------------------------------------------------

# file -> (package, {op: backends it declares})
VENDOR_FILES = {
    "example_op_package_htp.xml": ("ExampleOpPackage", {"ExampleCustomOp": ("HTP",)}),
    "split_custom_op_package.xml": ("SplitCustomOpPackage", {"SplitCustomOp": ("HTP",)}),
    "example_op_package_lpai.xml": ("ExampleLpaiOpPackage", {"ExampleCustomOp": ()}),
    "conv2d_udo.json": ("Conv2DPackage", {"Conv": ("CPU", "GPU", "DSP", "HTP")}),
    "qidk_input_pack.xml": ("qhci", {"InputPack": ("HTP",)}),
    "qidk_selu.json": ("SeluUdoPackage", {"Selu": ("CPU",)}),
}


@pytest.mark.parametrize("name", sorted(VENDOR_FILES))
def test_vendor_config_keeps_every_op_on_every_backend(name: str) -> None:
    package_name, declared = VENDOR_FILES[name]
    (package,) = load_config(VENDOR / name, Diagnostics())
    assert package.name == package_name
    assert {op.name: op.backends for op in package.ops} == declared
    for backend, resolved in resolve_all(package, declared_backends(package)).items():
        assert [op.name for op in resolved.ops] == [
            op for op, backends in declared.items() if backend in backends]


def test_llama_package_keeps_all_17_ops_on_htp() -> None:
    diag = Diagnostics()
    (package,) = load_config(VENDOR / "llama_package_htp.xml", diag)
    assert len(package.ops) == LLAMA_OPS
    assert all(op.backends == ("HTP",) for op in package.ops)
    assert [w.message for w in diag.warnings if "Attention" in w.message] == [
        "SupplementalOpDef names op Attention, which no OpDef defines; ignored"]
    linear = package.op("LLaMALinear")  # not in SupportedOps: its supplement still applies
    assert linear is not None and linear.inputs[0].overrides[0].datatypes == (
        "UFIXED_POINT_8", "SFIXED_POINT_8")
    rope = package.op("RoPE")
    assert rope is not None and rope.params[0].default == Default("string", "N-1")
    # RoPESimple is the one op the file gives no HTP datatypes (its BACKEND_SPECIFIC tensors
    # have no SupplementalOpDef): it takes the vendor's typing (mllm ships the RoPESimple.cpp the
    # vendor's generator made of it), with one warning naming it and the backend
    diag = Diagnostics()
    htp = resolve_all(package, ["HTP"], diag)["HTP"]
    assert len(htp.ops) == LLAMA_OPS
    (warning,) = diag.warnings
    assert warning.field == "OpDef[RoPESimple]" and "for backend HTP" in warning.message
    simple = htp.op("RoPESimple")
    assert simple is not None and {t.datatypes for t in (*simple.inputs, *simple.outputs)} == {
        ("FLOAT_32",)}
    assert htp.op("RoPE") == resolve_all(replace_rope_simple(package), ["HTP"])["HTP"].op("RoPE")
    fixed = resolve_all(replace_rope_simple(package), ["HTP"], diag)["HTP"]
    assert fixed == htp and len(diag.warnings) == 1  # a supplement typing it: no warning


def replace_rope_simple(package: OpPackageDef) -> OpPackageDef:
    """The package with RoPESimple's tensors given FLOAT_32 for HTP, as a supplement would."""
    from dataclasses import replace

    from udo_build.opdef.model import BackendOverride

    def typed(items: tuple) -> tuple:
        return tuple(replace(t, overrides=(BackendOverride("HTP", ("FLOAT_32",)),))
                     for t in items)

    ops = tuple(replace(op, inputs=typed(op.inputs), outputs=typed(op.outputs))
                if op.name == "RoPESimple" else op for op in package.ops)
    return replace(package, ops=ops)
