"""The SNPE JSON UDO config loader: the model it builds, and one test per rule it enforces."""

from __future__ import annotations

import json
import sys
from importlib import resources
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator

from udo_build import source
from udo_build.errors import Diagnostics, Problem, UserError
from udo_build.opdef import vocab
from udo_build.opdef.json_config import load_json_config
from udo_build.opdef.model import (
    BackendOverride,
    Default,
    OpDef,
    OpPackageDef,
    ParamDef,
    TensorDef,
    resolve_backend,
)

DATA = Path(__file__).parent / "data" / "json"
BS = vocab.BACKEND_SPECIFIC
BACKENDS = vocab.BACKENDS

# An op config whose operator text starts on line 5 (see `config`).
HEAD = '{\n  "UdoPackage_0": {\n    "UDO_PACKAGE_NAME": "P",\n    "Operators": [\n'
TAIL = "\n    ]\n  }\n}\n"
IO = '"inputs": [{"name": "x", "data_type": "FLOAT_32"}], ' \
     '"outputs": [{"name": "y", "data_type": "FLOAT_32"}]'


def config(*op_lines: str) -> str:
    return HEAD + "\n".join(op_lines) + TAIL


def write(tmp_path: Path, text: str | bytes, name: str = "ops.json") -> Path:
    path = tmp_path / name
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return path


def load(path: Path) -> tuple[tuple[OpPackageDef, ...], Diagnostics]:
    diag = Diagnostics()
    return load_json_config(path, diag), diag


def problems(tmp_path: Path, text: str | bytes) -> list[Problem]:
    path = write(tmp_path, text)
    with pytest.raises(UserError) as info:
        load(path)
    return info.value.problems


def only(tmp_path: Path, text: str | bytes) -> Problem:
    found = problems(tmp_path, text)
    assert len(found) == 1, found
    return found[0]


def column(text: str, line: int, needle: str) -> int:
    return text.splitlines()[line - 1].index(needle) + 1


def per_core(cpu: str, gpu: str, dsp: str) -> tuple[BackendOverride, ...]:
    return (BackendOverride("CPU", (cpu,)), BackendOverride("GPU", (gpu,)),
            BackendOverride("DSP", (dsp,)), BackendOverride("HTP", (dsp,)))


# -- the vendor template and the model ----------------------------------------------------------


SOFTMAX = OpPackageDef(
    name="SoftmaxUdoPackage", domain="", version="1.0.0", source_format="json",
    ops=(OpDef(
        name="Softmax",
        inputs=(TensorDef("input", (BS,), "ND", "NHWC", mandatory=True, static=False,
                          overrides=per_core("FLOAT_32", "FLOAT_32", "UINT_8")),),
        outputs=(TensorDef("output", (BS,), "ND", "UNDEFINED", mandatory=True,
                           overrides=per_core("FLOAT_32", "FLOAT_32", "UINT_8")),),
        params=(ParamDef("beta", ("FLOAT_32",), "SCALAR", "UNDEFINED", mandatory=False,
                         default=Default("scalar", 1.0)),
                ParamDef("weights", ("FLOAT_32",), "ND", "NHWC", mandatory=True)),
        backends=BACKENDS,
        dsp_arch_types=("v68", "v73"),
    ),),
)


def test_softmax_template_parses_to_the_model() -> None:
    packages, diag = load(DATA / "softmax.json")
    assert packages == (SOFTMAX,)
    assert packages[0].source_format == "json"
    assert diag.warnings == []


def test_origins_name_file_line_and_field() -> None:
    (package,), _ = load(DATA / "softmax.json")
    op = package.ops[0]
    assert (op.origin.file, op.origin.line, op.origin.field) == (
        str(DATA / "softmax.json"), 4, "UdoPackage_0.Operators[0]")
    assert (op.inputs[0].origin.line, op.inputs[0].origin.field) == (
        7, "UdoPackage_0.Operators[0].inputs[0]")
    assert (op.params[1].origin.line, op.params[1].origin.field) == (
        14, "UdoPackage_0.Operators[0].tensor_params[0]")


def test_softmax_resolves_per_backend() -> None:
    (package,), _ = load(DATA / "softmax.json")
    htp = resolve_backend(package, "HTP")
    assert htp.name == "SoftmaxUdoPackage"  # every backend keeps the name
    assert htp.backend == "HTP"
    op = htp.ops[0]
    assert (op.inputs[0].datatypes, op.outputs[0].datatypes) == (("UINT_8",), ("UINT_8",))
    assert op.param("beta").datatypes == ("FLOAT_32",)
    cpu = resolve_backend(package, "CPU")
    assert cpu.name == "SoftmaxUdoPackage"
    op = cpu.ops[0]
    assert (op.inputs[0].datatypes, op.outputs[0].datatypes) == (("FLOAT_32",), ("FLOAT_32",))


def test_data_type_params_defaults_and_dsp_archs() -> None:
    packages, diag = load(DATA / "conv.json")
    f32, i32 = ("FLOAT_32",), ("INT_32",)
    expected = OpPackageDef(
        name="ConvUdoPackage", domain="aisw", version="2.1.0", source_format="json",
        ops=(OpDef(
            name="MyConv",
            inputs=(TensorDef("input", f32, "ND", "NHWC"),
                    TensorDef("bias", f32, "ND", "UNDEFINED", mandatory=True, static=True,
                              default=Default("tensor", (0.0, 0.5)))),
            outputs=(TensorDef("output", ("UFIXED_POINT_8",), "ND", "NCHW"),),
            params=(ParamDef("groups", i32, "SCALAR", mandatory=False,
                             default=Default("scalar", 1)),
                    ParamDef("relu", ("BOOL_8",), "SCALAR", mandatory=False,
                             default=Default("boolean", False)),
                    ParamDef("mode", ("STRING",), "SCALAR", mandatory=False,
                             default=Default("string", "same")),
                    ParamDef("stride", ("UINT_32",), "SCALAR", mandatory=True),
                    ParamDef("weights", f32, "ND", "NHWC", mandatory=False,
                             default=Default("tensor", ((1, 2), (3, 4))))),
            backends=("CPU", "DSP", "HTP"),
            dsp_arch_types=("v68", "v73"),
        ),),
    )
    assert packages == (expected,)
    assert diag.warnings == []
    assert resolve_backend(packages[0], "DSP").ops[0].outputs[0].datatypes == ("UFIXED_POINT_8",)


def test_dsp_only_datatype_takes_the_vendor_float_on_cpu_with_one_warning() -> None:
    # the SNPE UDO tools read a missing data_type as FLOAT_32: the CPU build types the tensors
    # so, with one warning naming the op and the backend (and how to choose otherwise)
    (package,), _ = load(DATA / "dsp_only.json")
    assert package.ops[0].backends == BACKENDS  # no core_types: every backend
    diag = Diagnostics()
    assert resolve_backend(package, "HTP", diag).ops[0].inputs[0].datatypes == ("UINT_8",)
    assert diag.warnings == []
    cpu = resolve_backend(package, "CPU", diag).ops[0]
    assert (cpu.inputs[0].datatypes, cpu.outputs[0].datatypes) == (("FLOAT_32",), ("FLOAT_32",))
    (first,) = diag.warnings
    assert first.message == ("op Clip: BACKEND_SPECIFIC with no datatype for backend CPU; taken "
                             "as the vendor's generators take it: 'in', 'out' FLOAT_32")
    assert first.hint == ("to choose, give them a data_type, or a per_core_data_types entry for "
                          "CPU")
    assert (first.file, first.line, first.field) == (
        str(DATA / "dsp_only.json"), 5, "UdoPackage_0.Operators[0]")


def test_multi_package_config_in_order_of_i() -> None:
    packages, _ = load(DATA / "multi.json")
    assert [(p.name, p.version) for p in packages] == [
        ("FirstPackage", "0.3.0"), ("SecondPackage", "1.0.0")]
    assert [op.name for op in packages[0].ops] == ["Gelu", "Silu"]
    assert [op.backends for op in packages[0].ops] == [("CPU",), BACKENDS]
    assert packages[1].ops[0].backends == ("GPU",)


def test_package_index_is_numeric(tmp_path: Path) -> None:
    op = f'{{"type": "A", {IO}}}'
    text = json.dumps({f"UdoPackage_{i}": {"UDO_PACKAGE_NAME": f"P{i}", "Operators": [
        json.loads(op)]} for i in (10, 2)})
    packages, _ = load(write(tmp_path, text))
    assert [p.name for p in packages] == ["P2", "P10"]


# -- canonical form -----------------------------------------------------------------------------


def test_canonical_json_round_trip() -> None:
    for name in ("softmax.json", "conv.json", "multi.json"):
        for package in load(DATA / name)[0]:
            back = OpPackageDef.from_json(package.to_json())
            assert back == package
            assert back.canonical_bytes() == package.canonical_bytes()


def test_key_order_whitespace_and_spelling_do_not_change_canonical_bytes() -> None:
    (a,), _ = load(DATA / "softmax.json")
    (b,), _ = load(DATA / "softmax_reordered.json")
    assert a.canonical_bytes() == b.canonical_bytes()
    assert a.digest() == b.digest()


def test_a_real_change_changes_canonical_bytes(tmp_path: Path) -> None:
    text = (DATA / "softmax.json").read_text().replace('"DSP": "UINT_8"}}', '"DSP": "UINT_16"}}')
    (a,), _ = load(DATA / "softmax.json")
    (b,), _ = load(write(tmp_path, text))
    assert a.canonical_bytes() != b.canonical_bytes()


# -- schema errors ------------------------------------------------------------------------------


def test_missing_type(tmp_path: Path) -> None:
    p = only(tmp_path, config(f"      {{{IO}}}"))
    assert p.message == "missing required field 'type'"
    assert (p.line, p.column, p.field) == (5, 7, "UdoPackage_0.Operators[0].type")
    assert p.hint == 'add "type": "<OpName>", the op type the model uses'


def test_missing_package_name(tmp_path: Path) -> None:
    text = '{\n  "UdoPackage_0": {\n    "Operators": [{"type": "A", ' + IO + '}]\n  }\n}\n'
    p = only(tmp_path, text)
    assert p.message == "missing required field 'UDO_PACKAGE_NAME'"
    assert (p.line, p.field) == (2, "UdoPackage_0.UDO_PACKAGE_NAME")
    assert p.hint == 'add "UDO_PACKAGE_NAME": "<PackageName>"'


def test_every_missing_field_is_named(tmp_path: Path) -> None:
    found = problems(tmp_path, '{"UdoPackage_0": {}}')
    assert [(p.message, p.field) for p in found] == [
        ("missing required field 'Operators'", "UdoPackage_0.Operators"),
        ("missing required field 'UDO_PACKAGE_NAME'", "UdoPackage_0.UDO_PACKAGE_NAME"),
    ]


def test_bad_datatype(tmp_path: Path) -> None:
    line = ('      {"type": "A", "inputs": [{"name": "x", "data_type": "FLOAT_33"}], '
            '"outputs": [{"name": "y", "data_type": "FLOAT_32"}]}')
    text = config(line)
    p = only(tmp_path, text)
    assert p.message == "'FLOAT_33' is not a known datatype"
    assert p.hint == (
        "allowed: INT_8, INT_16, INT_32, INT_64, UINT_8, UINT_16, UINT_32, UINT_64, FLOAT_16, "
        "FLOAT_32, FLOAT_64, SFIXED_POINT_4, SFIXED_POINT_8, SFIXED_POINT_16, SFIXED_POINT_32, "
        "UFIXED_POINT_4, UFIXED_POINT_8, UFIXED_POINT_16, UFIXED_POINT_32, BOOL_8, STRING, "
        "BACKEND_SPECIFIC, FIXED_4, FIXED_8, FIXED_16, FIXED_32 "
        "(QNN_DATATYPE_ and SNPE_UDO_DATATYPE_ forms too)")
    assert (p.line, p.column) == (5, column(text, 5, '"FLOAT_33"'))
    assert p.field == "UdoPackage_0.Operators[0].inputs[0].data_type"
    assert p.file == str(tmp_path / "ops.json")


def test_bad_per_core_datatype_and_unknown_core(tmp_path: Path) -> None:
    line = ('      {"type": "A", "inputs": [{"name": "x", '
            '"per_core_data_types": {"TPU": "FLOAT_32", "CPU": "float32"}}], '
            '"outputs": [{"name": "y", "data_type": "FLOAT_32"}]}')
    text = config(line)
    found = problems(tmp_path, text)
    assert [(p.message, p.field, p.column) for p in found] == [
        ("'float32' is not a known datatype",
         "UdoPackage_0.Operators[0].inputs[0].per_core_data_types.CPU",
         column(text, 5, '"float32"')),
    ]
    path = tmp_path / "ops.json"
    path.write_text(text.replace("float32", "FLOAT_32"))
    diag = Diagnostics()
    load_json_config(path, diag)
    assert [(w.message, w.field) for w in diag.warnings] == [
        ("op A, input 'x': backend TPU is not one udo-build builds; what the file says for it is "
         "ignored", "UdoPackage_0.Operators[0].inputs[0].per_core_data_types.TPU")]


def test_unknown_core_type_is_a_warning(tmp_path: Path) -> None:
    text = config(f'      {{"type": "A", {IO},', '       "core_types": ["CPU", "TPU"]}')
    path = tmp_path / "ops.json"
    path.write_text(text)
    diag = Diagnostics()
    (package,) = load_json_config(path, diag)
    assert package.ops[0].backends == ("CPU",)
    (w,) = diag.warnings
    assert w.message == ("op A: backend TPU is not one udo-build builds; what the file says for "
                         "it is ignored")
    assert (w.line, w.field) == (6, "UdoPackage_0.Operators[0].core_types")


def test_empty_core_types(tmp_path: Path) -> None:
    p = only(tmp_path, config(f'      {{"type": "A", {IO}, "core_types": []}}'))
    assert p.message == "expected at least 1 item, got none"
    assert p.field == "UdoPackage_0.Operators[0].core_types"


def test_no_operators(tmp_path: Path) -> None:
    p = only(tmp_path, config(""))
    assert p.message == "expected at least 1 item, got none"
    assert (p.line, p.field, p.hint) == (
        4, "UdoPackage_0.Operators", "a package needs at least one op")


def test_bad_dsp_arch(tmp_path: Path) -> None:
    text = config(f'      {{"type": "A", {IO},', '       "dsp_arch_types": ["v73", "v60"]}')
    p = only(tmp_path, text)
    assert p.message == "'v60' is not one of v65, v66, v68, v69, v73, v75, v79, v81"
    assert (p.line, p.column, p.field) == (
        6, column(text, 6, '"v60"'), "UdoPackage_0.Operators[0].dsp_arch_types[1]")


def test_bad_tensor_layout(tmp_path: Path) -> None:
    line = ('      {"type": "A", "inputs": [{"name": "x", "tensor_layout": "NCWH"}], '
            '"outputs": [{"name": "y"}]}')
    p = only(tmp_path, config(line))
    assert p.message == "'NCWH' is not one of NHWC, NCHW"
    assert (p.line, p.field) == (5, "UdoPackage_0.Operators[0].inputs[0].tensor_layout")


@pytest.mark.parametrize(("op", "message", "field"), [
    ('{"type": "A", "inputs": {"name": "x"}, "outputs": [{"name": "y"}]}',
     "expected a list, got an object", "inputs"),
    ('{"type": "A", "inputs": [{"name": "x", "static": "yes"}], "outputs": [{"name": "y"}]}',
     "expected true or false, got 'yes'", "inputs[0].static"),
    ('{"type": 7, "inputs": [{"name": "x"}], "outputs": [{"name": "y"}]}',
     "expected a string, got 7", "type"),
    ('{"type": "A", "inputs": [{"name": "x", "default_value": {}}], "outputs": [{"name": "y"}]}',
     "expected a number, true or false, a string or a list, got an object",
     "inputs[0].default_value"),
    ('{"type": "A", "inputs": [{"name": ""}], "outputs": [{"name": "y"}]}',
     "must not be empty", "inputs[0].name"),
    ('"Softmax"', "expected an object, got 'Softmax'", ""),
])
def test_wrong_json_type(tmp_path: Path, op: str, message: str, field: str) -> None:
    p = only(tmp_path, config(f"      {op}"))
    assert p.message == message
    assert p.field == "UdoPackage_0.Operators[0]" + (f".{field}" if field else "")
    assert p.line == 5


def test_wrong_type_hint_and_whole_document(tmp_path: Path) -> None:
    p = only(tmp_path, "[]")
    assert (p.message, p.line, p.field) == ("expected an object, got a list", 1, None)
    assert p.hint == "write a JSON object: {...}"


def test_errors_are_collected_in_file_order(tmp_path: Path) -> None:
    text = config(
        '      {"type": "A", "inputs": [{"name": "x", "data_type": "F"}],',
        '       "outputs": [{"name": "y", "tensor_layout": "nhwc"}],',
        '       "core_types": "CPU"}')
    found = problems(tmp_path, text)
    assert [(p.line, p.message) for p in found] == [
        (5, "'F' is not a known datatype"),
        (6, "'nhwc' is not one of NHWC, NCHW"),
        (7, "expected a list, got 'CPU'"),
    ]


def test_problem_count_is_capped(tmp_path: Path) -> None:
    inputs = ", ".join(f'{{"name": "x{i}", "data_type": "BAD"}}' for i in range(150))
    found = problems(tmp_path, config(f'      {{"type": "A", "inputs": [{inputs}]}}'))
    assert len(found) == 100
    assert found[-1].message == "... and 51 more problems"


def test_no_package_key(tmp_path: Path) -> None:
    found = problems(tmp_path, '{\n  "Operators": []\n}')
    assert [(p.message, p.line) for p in found] == [
        ("no UdoPackage_<i> key: this is not a SNPE UDO config", 1)]


def test_schema_enums_follow_the_vocabulary() -> None:
    text = resources.files("udo_build.opdef").joinpath("udo-config.schema.json").read_text()
    schema = json.loads(text)
    Draft202012Validator.check_schema(schema)
    defs = schema["$defs"]
    assert tuple(defs["datatype"]["enum"]) == vocab.accepted_datatype_spellings()
    assert tuple(defs["dsp_arch"]["enum"]) == vocab.DSP_ARCHS
    assert tuple(defs["layout"]["enum"]) == vocab.JSON_LAYOUTS


# -- semantic errors ----------------------------------------------------------------------------


def test_output_with_default(tmp_path: Path) -> None:
    text = config('      {"type": "A", "inputs": [{"name": "x"}],',
                  '       "outputs": [{"name": "y", "data_type": "FLOAT_32", "default_value": 0}]}')
    p = only(tmp_path, text)
    assert p.message == "op A, output 'y': outputs cannot have a default"
    assert (p.line, p.column, p.field) == (
        6, column(text, 6, "0}"), "UdoPackage_0.Operators[0].outputs[0].default_value")
    assert p.hint == "remove the default_value"


def test_no_inputs(tmp_path: Path) -> None:
    p = only(tmp_path, config('      {"type": "A", "outputs": [{"name": "y"}]}'))
    assert p.message == "op A has no input"
    assert (p.line, p.field, p.hint) == (
        5, "UdoPackage_0.Operators[0]", "an op needs at least one input")


def test_bad_default_for_int32(tmp_path: Path) -> None:
    text = config(f'      {{"type": "A", {IO},',
                  '       "scalar_params": [{"name": "k", "data_type": "INT_32", '
                  '"default_value": 1.5}]}')
    p = only(tmp_path, text)
    assert p.message == ("op A, parameter 'k': default 1.5 is not a whole number, "
                         "as type INT_32 needs")
    assert p.hint == "give a default_value that fits type INT_32 and rank SCALAR"
    assert (p.line, p.column, p.field) == (
        6, column(text, 6, "1.5"), "UdoPackage_0.Operators[0].scalar_params[0].default_value")


def test_tensor_default_for_scalar_param(tmp_path: Path) -> None:
    text = config(f'      {{"type": "A", {IO}, "scalar_params": [{{"name": "k", '
                  '"default_value": [1, 2]}]}')
    p = only(tmp_path, text)
    assert p.message == ("op A, parameter 'k': a SCALAR takes a single value as default, "
                         "not a tensor")


def test_duplicate_op_types(tmp_path: Path) -> None:
    text = config(f'      {{"type": "A", {IO}}},', f'      {{"type": "A", {IO}}}')
    p = only(tmp_path, text)
    assert p.message == "op type 'A' is given twice (first at UdoPackage_0.Operators[0])"
    assert (p.line, p.field) == (6, "UdoPackage_0.Operators[1].type")


def test_duplicate_tensor_names_and_bad_op_name(tmp_path: Path) -> None:
    text = config('      {"type": "my-op", "inputs": [{"name": "x"}, {"name": "x"}],',
                  '       "outputs": [{"name": "y"}]}')
    assert [(p.message, p.field) for p in problems(tmp_path, text)] == [
        ("op name 'my-op' is not a valid identifier", "UdoPackage_0.Operators[0]"),
        ("op my-op: input name 'x' is given twice", "UdoPackage_0.Operators[0].inputs[1]"),
    ]


def test_bad_package_name(tmp_path: Path) -> None:
    text = config(f'      {{"type": "A", {IO}}}').replace('"P"', '"my-pkg"')
    p = only(tmp_path, text)
    assert p.message == "package name 'my-pkg' is not a valid identifier"
    assert (p.line, p.field) == (3, "UdoPackage_0.UDO_PACKAGE_NAME")


def test_unpaired_surrogate_escape(tmp_path: Path) -> None:
    p = only(tmp_path, config('      {"type": "A", "inputs": [{"name": "\\ud800"}], '
                              '"outputs": [{"name": "y"}]}'))
    assert p.message == ("this string holds an unpaired surrogate escape (\\ud800-\\udfff), "
                         "which is not text")
    # YAML refuses the escape too, so source.load_json has no positions for this file
    assert p.field == "UdoPackage_0.Operators[0].inputs[0].name"


# -- warnings -----------------------------------------------------------------------------------


def test_unknown_keys_are_warnings_and_the_config_still_loads(tmp_path: Path) -> None:
    text = config(f'      {{"type": "A", {IO}, "foo": 1,',
                  '       "scalar_params": [{"name": "k", "data_typ": "INT_32"}]}')
    text = text.replace("{\n", '{\n  "comment": "made by hand",\n', 1)
    packages, diag = load(write(tmp_path, text))
    assert packages[0].ops[0].params[0].datatypes == (BS,)
    assert [(p.message, p.line, p.field, p.hint) for p in diag.warnings] == [
        ("unknown field 'comment' ignored", 2, "comment",
         "packages are keys UdoPackage_0, UdoPackage_1, ..."),
        ("unknown field 'foo' ignored", 6, "UdoPackage_0.Operators[0].foo",
         "allowed: type, inputs, outputs, scalar_params, tensor_params, core_types, "
         "dsp_arch_types"),
        ("unknown field 'data_typ' ignored", 7,
         "UdoPackage_0.Operators[0].scalar_params[0].data_typ", "did you mean 'data_type'?"),
    ]
    assert diag.warnings[1].column == column(text, 6, '"foo"')


def test_per_core_entry_outside_core_types_is_a_warning(tmp_path: Path) -> None:
    text = config('      {"type": "A", "core_types": ["CPU"], "inputs": [{"name": "x", '
                  '"per_core_data_types": {"CPU": "FLOAT_32", "GPU": "FLOAT_16"}}],',
                  '       "outputs": [{"name": "y", "data_type": "FLOAT_32"}]}')
    packages, diag = load(write(tmp_path, text))
    assert packages[0].ops[0].inputs[0].overrides == (BackendOverride("CPU", ("FLOAT_32",)),)
    (w,) = diag.warnings
    assert w.message == ("op A, input 'x': per_core_data_types names GPU, which is not in the "
                         "op's core_types; ignored")
    assert (w.line, w.field) == (5, "UdoPackage_0.Operators[0].inputs[0].per_core_data_types.GPU")


# -- reading the file ---------------------------------------------------------------------------


def test_invalid_json_syntax(tmp_path: Path) -> None:
    p = only(tmp_path, '{\n  "UdoPackage_0": {\n    "Operators": [,]\n  }\n}\n')
    assert p.message == "not valid JSON: Expecting value"
    assert (p.line, p.column) == (3, 19)
    assert p.hint.startswith("strict JSON: keys in double quotes")


def test_duplicate_key(tmp_path: Path) -> None:
    text = config('      {"type": "A",', f'       "type": "B", {IO}}}')
    p = only(tmp_path, text)
    assert p.message == "duplicate key 'type' (first given at line 5)"
    assert (p.line, p.field) == (6, "UdoPackage_0.Operators[0].type")
    assert p.hint == "give each key once"


def test_non_utf8_bytes(tmp_path: Path) -> None:
    p = only(tmp_path, b'{\n  "UdoPackage_0": "\xff"\n}')
    assert (p.message, p.line, p.hint) == (
        "not valid UTF-8 text (byte 0xff)", 2, "save the file as UTF-8")


def test_file_over_the_size_limit(tmp_path: Path) -> None:
    p = only(tmp_path, b" " * (source.MAX_JSON_BYTES + 1))
    assert p.message == (f"op config is {source.MAX_JSON_BYTES + 1} bytes, over the limit of "
                         f"{source.MAX_JSON_BYTES} bytes")
    assert p.file == str(tmp_path / "ops.json")


def test_a_folder_instead_of_a_file(tmp_path: Path) -> None:
    with pytest.raises(UserError) as info:
        load(tmp_path)
    assert info.value.problem.message == "op config is a folder, not a file"
    assert info.value.problem.file == str(tmp_path)
    assert info.value.problem.hint == "name the file itself"


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UserError) as info:
        load(tmp_path / "nope.json")
    assert (info.value.problem.message, info.value.problem.hint) == (
        "op config not found", "check the path")
    assert info.value.problem.file == str(tmp_path / "nope.json")


@pytest.mark.skipif(not hasattr(sys, "get_int_max_str_digits"),
                    reason="this Python has no limit on the digits of an integer")
def test_integer_with_too_many_digits(tmp_path: Path) -> None:
    p = only(tmp_path, '{"UdoPackage_0": ' + "9" * 5000 + "}")
    assert p.message.startswith("not valid JSON: Exceeds the limit (4300 digits)")
    assert p.hint == "write numbers with at most 4300 digits"
