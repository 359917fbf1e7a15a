"""Identifiers and literals of generated code."""

from __future__ import annotations

import pytest

from udo_build.package.names import (
    SNPE,
    c_literal,
    c_string,
    cpp_names,
    docstring,
    library,
    one_line,
    op_library,
    package_folder,
    provider,
    py_literal,
    py_names,
    snake,
)
from udo_build.package.tables import DTYPES


def test_identifiers_are_valid_unique_and_no_keywords() -> None:
    assert cpp_names(["in[0]", "in_0", "out[0]", "class", "9x", "", "global"]) == [
        "in_0", "in_0_2", "out_0", "class_", "t_9x", "t", "global_"]
    assert py_names(["in[0]", "lambda", "np", "package", "x-y"]) == [
        "in_0", "lambda_", "np_", "package_", "x_y"]
    assert [snake(n) for n in ("Softplus", "ScaleBias", "Conv2D", "HTPRelu")] == [
        "softplus", "scale_bias", "conv2_d", "htp_relu"]


@pytest.mark.parametrize(("value", "dtype", "literal"), [
    (1.0, "FLOAT_32", "1.0f"), (2e-3, "FLOAT_32", "0.002f"), (3, "FLOAT_32", "3.0f"),
    (True, "FLOAT_32", "1.0f"), (1e-30, "FLOAT_64", "1e-30"), (1.0, "FLOAT_16", "0x3c00 /* 1.0 */"),
    (-3, "INT_32", "-3"), (7, "UINT_32", "7u"),
    (-(1 << 63), "INT_64", "(-9223372036854775807LL - 1)"),
    ((1 << 64) - 1, "UINT_64", "18446744073709551615ULL"), (False, "BOOL_8", "0"),
    ('a "b" \\ ?\n\u00e9', "STRING", '"a \\"b\\" \\\\ \\?\\012\\303\\251"'),
])
def test_c_literals(value: object, dtype: str, literal: str) -> None:
    assert c_literal(value, DTYPES[dtype]) == literal


def test_text_in_comments_docstrings_and_python() -> None:
    assert one_line("a */ b\n  c \\") == "a * / b c"
    assert docstring('say """hi""" \\') == 'say \\"\\"\\"hi\\"\\"\\" \\\\'
    assert c_string("\u00e91") == '"\\303\\2511"'
    assert py_literal(((1, 2.5), (True, "x"))) == "[[1, 2.5], [True, 'x']]"


def test_vendor_library_names_keep_the_package_name() -> None:
    assert library("ExampleOpPackage", "HTP", "v73") == (
        "build/hexagon-v73/libQnnExampleOpPackage.so")
    assert library("ExampleOpPackage", "DSP", "x86") == (
        "build/x86_64-linux-clang/libQnnExampleOpPackage.so")
    assert library("ExampleOpPackage", "CPU", "aarch64") == (
        "libs/aarch64-android/libExampleOpPackage.so")
    assert library("Udo", "HTP", "v68", SNPE) == "libs/dsp_v68/libUdoUdoImplDsp.so"
    assert library("Udo", "CPU", "x86", SNPE) == "libs/x86-64_linux_clang/libUdoUdoImplCpu.so"
    assert op_library("P", "Relu", "v66") == "build/hexagon-v66/libP_Relu.so"
    assert provider("ExampleOpPackage") == "ExampleOpPackageInterfaceProvider"
    assert package_folder("HTP", "ExampleOpPackage") == "HTP/ExampleOpPackage"
