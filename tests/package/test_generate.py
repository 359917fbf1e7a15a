"""What the generated sources say: HTP parameter order and defaults, registrations, template
tensor types, validation tables, the one 'write it here' comment and the loud failure; and that
equal inputs give equal bytes."""

from __future__ import annotations

import json
from pathlib import Path

from udo_build.errors import Diagnostics
from udo_build.opdef import recipe_package, resolve_all
from udo_build.package.generate import config_file_names, generate

from .helpers import DATA, SOFTPLUS, SWISH, VENDOR, package_files


def _text(files: dict[str, bytes], rel: str) -> str:
    return files[rel].decode()


def test_generating_twice_gives_the_same_bytes(tmp_path: Path) -> None:
    for backend, archs in (("CPU", []), ("GPU", []), ("DSP", ["v66", "v73"]), ("HTP", ["v73"])):
        first = package_files(tmp_path / "a", [VENDOR, SOFTPLUS], backend, archs)
        again = package_files(tmp_path / "b", [VENDOR, SOFTPLUS], backend, archs)
        assert first == again


def test_the_order_of_the_config_copies_does_not_matter() -> None:
    package = recipe_package(None, None, None, [SOFTPLUS, SWISH], Diagnostics())
    htp = resolve_all(package, ["HTP"])["HTP"]
    ops = {"Softplus": "softplus.xml", "Swish": "swish.json"}
    one = generate(htp, ["v73"], {"softplus.xml": b"a", "swish.json": b"b"}, ops)
    two = generate(htp, ["v73"], {"swish.json": b"b", "softplus.xml": b"a"}, ops)
    assert one == two and list(one) == sorted(one)
    assert "v73" in _text(one, "Makefile") and "htp_v75" not in _text(one, "Makefile")


def test_config_copies_get_unique_safe_names() -> None:
    assert config_file_names(["ops.xml", "ops.xml", None, "../x/ops.xml", ".."],
                             ["xml", "xml", "json", "xml", "json"]) == [
        "ops.xml", "ops-2.xml", "config-2.json", "ops-3.xml", "config-4.json"]


def test_htp_parameter_order_defaults_and_registration(tmp_path: Path) -> None:
    files = package_files(tmp_path, [VENDOR], "HTP", ["v73"])
    op = _text(files, "src/ops/ScaleClamp.cpp")
    assert ('DEF_PACKAGE_PARAM_ORDER("ScaleClamp",\n'
            '                        "scale", false, &sg_scaleClampDefault_scale,\n'
            '                        "steps", false, &sg_scaleClampDefault_steps,\n'
            '                        "lambda", false, &sg_scaleClampDefault_lambda,\n'
            '                        "label", false, &sg_scaleClampDefault_label,\n'
            '                        "rounding", false, &sg_scaleClampDefault_rounding,\n'
            '                        "limits", false, &sg_scaleClampDefault_limits,\n'
            '                        "gain", true, nullptr)\n') in op
    for line in ("param.scalarParam.floatValue = 0.25f;",
                 "param.scalarParam.int32Value = -3;",
                 "param.scalarParam.dataType = QNN_DATATYPE_BOOL_8;",
                 "param.scalarParam.bool8Value = 1;",
                 'param.scalarParam.stringValue = "fast \\\\path";',
                 "param.scalarParam.uint32Value = 1u;  // CEIL (1)",
                 "static float sg_scaleClampDefaultData_limits[] = {-1.5f, 1.5f, 0.0f, 6.0f};",
                 "static uint32_t sg_scaleClampDefaultDims_limits[] = {2, 2};",
                 "param.tensorParam.v1.rank = 2;"):
        assert line in op, line
    assert "enumeration FLOOR=0, CEIL=1, NEAREST=2; default CEIL (1)" in op
    assert "GraphStatus scaleClampImpl(TensorType& out_0,\n" in op  # outputs first
    assert "                           Tensor& clamped,\n" in op  # BOOL_8: the generic tensor
    assert "                           const TensorType& in_0,\n" in op
    assert "                           const PlainFloatTensor& gain) {" in op  # params last
    assert 'DEF_PACKAGE_OP((scaleClampImpl<Tensor>), "ScaleClamp")\n' in op
    assert ('DEF_PACKAGE_OP_AND_COST_AND_FLAGS((scaleClampImpl<QuantUint8Tensor>), "ScaleClamp",'
            " SNAIL, Flags::RESOURCE_HVX)") in op
    assert 'DEF_TENSOR_PROPERTIES(Op("ScaleClamp", "in[0]", "bias"),' in op
    assert "// DEF_PACKAGE_OPTIMIZATION(LATE + 10," in op  # an example, commented out


def test_several_datatype_lists_give_several_template_parameters(tmp_path: Path) -> None:
    op = _text(package_files(tmp_path, [VENDOR], "HTP", ["v73"]), "src/ops/Requantize.cpp")
    assert "template <typename TensorType0, typename TensorType1>" in op
    assert "GraphStatus requantizeImpl(TensorType0& y,\n" in op
    assert "DEF_PACKAGE_OP((requantizeImpl<Tensor, Tensor>), \"Requantize\")" in op
    assert "(requantizeImpl<QuantUint16Tensor, QuantUint8Tensor>)" in op
    assert "(requantizeImpl<PlainFloatTensor, PlainFloat16Tensor>)" in op
    assert "DEF_PACKAGE_PARAM_ORDER" not in op  # no parameters


def test_single_datatypes_give_one_typed_implementation(tmp_path: Path) -> None:
    op = _text(package_files(tmp_path, [SWISH], "HTP", ["v73"]), "src/ops/Swish.cpp")
    assert "template" not in op.split("BEGIN_PKG_OP_DEFINITION")[1]
    assert 'DEF_PACKAGE_OP((swishImpl), "Swish")' in op  # UINT_8: the generic tensor type


def test_skeletons_say_where_to_write_and_fail_loudly(tmp_path: Path) -> None:
    checks = {
        "CPU": {"src/ops/Softplus.cpp": "return QNN_OP_PACKAGE_ERROR_GENERAL;"},
        "GPU": {"src/ops/Softplus.cpp": "return QNN_OP_PACKAGE_ERROR_GENERAL;",
                "src/kernels/Softplus.cl": 'printf("Softplus: the kernel is not implemented'},
        "DSP": {"src/ops/Softplus.cpp": "return GraphStatus::ErrorFatal;",
                "src/dsp_v65_v66/ops/Softplus.cpp": 'FARF(ERROR, "Softplus is not implemented'},
        "HTP": {"src/ops/Softplus.cpp": 'errlog("Softplus is not implemented'},
    }
    for backend, sources in checks.items():
        files = package_files(tmp_path / backend, [SOFTPLUS], backend, ["v66", "v73"])
        for rel, failure in sources.items():
            text = _text(files, rel)
            assert text.count("// udo-build: write the Softplus") == 1, (backend, rel)
            assert failure in text, (backend, rel)
        marked = [f for f in files if "udo-build: write" in _text(files, f)]
        assert sorted(marked) == sorted(sources), backend


def test_validation_tables_follow_the_definitions(tmp_path: Path) -> None:
    cpu = _text(package_files(tmp_path, [VENDOR], "CPU"), "src/VendorOpsInterface.cpp")
    assert '{"ScaleClamp", 1, 2, 1, 2, kScaleClampParams, 7},' in cpu  # optional bias, clamped
    assert '{"SumAll", 1, kAnyNumber, 1, 1, nullptr, 0},' in cpu  # Repeated input
    assert '    {"gain", true},\n' in cpu and '    {"label", false},\n' in cpu
    assert "qnn::custom::findOp(cpuNode->typeName)" in cpu  # ops register themselves


def test_cpu_reads_parameters_with_their_defaults(tmp_path: Path) -> None:
    files = package_files(tmp_path, [VENDOR], "CPU")
    op = _text(files, "src/ops/ScaleClamp.cpp")
    for line in ("  float scale = 0.25f;", "  bool lambda = true;",
                 '  std::string label = "fast \\\\path";', "  uint32_t rounding = 1u;",
                 "  std::vector<float> limits = {-1.5f, 1.5f, 0.0f, 6.0f};", "  float gain{};",
                 "const QnnCpuOpPackage_Tensor_t* bias = operation->getInput(1);",
                 "QnnCpuOpPackage_Tensor_t* clamped = operation->getOutput(1);"):
        assert line in op, line
    repeated = _text(files, "src/ops/SumAll.cpp")
    assert "const QnnCpuOpPackage_Tensor_t* const* inputs = operation->inputs();" in repeated
    assert "const uint32_t inputs_count = operation->numInput();" in repeated


def test_cpu_ops_are_written_in_the_vendors_custom_op_style(tmp_path: Path) -> None:
    """Each op: execute, finalize, free, populateFromNode and validateOpConfig in a namespace of
    its own, registered by REGISTER_OP; mandatory parameters are required when populating."""
    files = package_files(tmp_path, [VENDOR], "CPU")
    op = _text(files, "src/ops/ScaleClamp.cpp")
    for line in ("namespace scale_clamp_op {", "Qnn_ErrorHandle_t execute(CustomOp* operation) {",
                 "Qnn_ErrorHandle_t finalize(const CustomOp* operation) {",
                 "Qnn_ErrorHandle_t free(CustomOp& operation) {",
                 "Qnn_ErrorHandle_t populateFromNode(const QnnOpPackage_Node_t node,",
                 "Qnn_ErrorHandle_t validateOpConfig(Qnn_OpConfig_t opConfig) {",
                 "CustomOpRegistration_t* register_ScaleClampCustomOp() {",
                 "REGISTER_OP(ScaleClamp, register_ScaleClampCustomOp);",
                 'QNN_CUSTOM_BE_ENSURE(getParam(node, "gain").first, '
                 "QNN_OP_PACKAGE_ERROR_INVALID_ARGUMENT)",
                 "QNN_CUSTOM_BE_ENSURE(operation->numInput() <= 2, "):
        assert line in op, line
    assert '"label").first' not in op  # optional: its default stands
    header = _text(files, "include/VendorOps.hpp")
    assert "inline namespace VendorOpsOps {" in header and "#define REGISTER_OP(" in header


def test_manifest_is_canonical(tmp_path: Path) -> None:
    files = package_files(tmp_path, [SOFTPLUS, SWISH], "HTP", ["v73"], [True, False])
    text = _text(files, "package.json")
    doc = json.loads(text)
    assert text == json.dumps(doc, indent=2, sort_keys=True) + "\n"
    assert doc["configs"] == ["config/softplus.xml", "config/swish.json"]
    stubs = {op["name"]: op["kernels_stub"] for op in doc["ops"]}
    assert stubs == {"Softplus": None, "Swish": "emulator/SoftplusPackage_kernels.py"}
    package = recipe_package(None, None, None, [SOFTPLUS, SWISH], Diagnostics())
    assert doc["opdef_digest"] == resolve_all(package, ["HTP"])["HTP"].digest()


def test_odd_names_and_defaults(tmp_path: Path) -> None:
    odd = DATA / "odd_names.json"
    htp = _text(package_files(tmp_path / "h", [odd], "HTP", ["v73"]), "src/ops/Odd.cpp")
    assert "GraphStatus oddImpl(PlainFloatTensor& class_,\n" in htp  # keywords renamed
    assert "const PlainFloatTensor& global_,\n" in htp  # an OpenCL keyword too
    assert "//   input x y * / \\ (FLOAT_16; rank ND)\n" in htp  # one line, no comment end
    assert "param.scalarParam.floatValue = 0.5f;" in htp  # a FLOAT_16 scalar is a float
    assert "param.scalarParam.int64Value = (-9223372036854775807LL - 1);" in htp
    assert "param.scalarParam.uint64Value = 18446744073709551615ULL;" in htp
    assert 'param.scalarParam.stringValue = "say \\"hi\\"";' in htp
    assert "param.tensorParam.v1.clientBuf.data = nullptr;  // an empty tensor" in htp
    assert "static uint16_t sg_oddDefaultData_halves[] = {0x3e00 /* 1.5 */, 0xc000" in htp
    real = htp.split("// quant ")[1].split("static Qnn_Param_t sg_")[0]
    assert "QNN_DATATYPE_FLOAT_32" in real and "floatValue = 0.75f;" in real  # not quantized
    gpu = _text(package_files(tmp_path / "g", [odd], "GPU"), "src/ops/Odd.cpp")
    assert "constexpr float kDefault_half_value = 0.5f;" in gpu
    assert "// (its default is an empty tensor)" in gpu
