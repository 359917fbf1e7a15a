"""The converted model and each generated package agree on package and op names: every custom
node of the converted softplus example, as an op config, passes the generated package's own
validateOpConfig (compiled with g++ and called through the package's interface provider)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from udo_build.ir.bundle import read_bundle
from udo_build.ir.graph import Node

from ..conftest import EXAMPLES
from .helpers import SOFTPLUS, STANDIN, SWISH, need_gxx, package_files, run_kind, write

MODEL = EXAMPLES / "softplus/model/net.onnx"


def _custom_nodes(tmp: Path) -> list[Node]:
    """The custom nodes of the example as the `convert` action makes them."""
    sources = {"config[0]": SOFTPLUS, "config[1]": SWISH}
    opdef = run_kind("opdef", {"package_name": None, "domain": None, "version": None,
                               "backends": ["HTP"]}, sources)
    (tmp / "semantics.json").write_bytes(opdef["semantics"])  # type: ignore[arg-type]
    out = run_kind("convert", {}, {"model": MODEL, "opdef": tmp / "semantics.json"})
    graph = read_bundle(out["bundle"]).model.graph  # type: ignore[arg-type]
    return [n for n in graph.nodes if n.package != "default"]


def _config(node: Node, package: str, op: str) -> str:
    """One C++ statement validating `node` as an op config (given package and type names)."""
    names = [k for k, _ in node.attrs]
    params = ", ".join(f'param("{n}")' for n in names) or "param(nullptr)"
    return (f'  check("{node.name}", "{package}", "{op}", {{{params}}}, {len(names)}, '
            f'{len(node.inputs)}, {len(node.outputs)});')


DRIVER = """#include <cstdio>
#include <vector>
#include "QnnOpPackage.h"

extern "C" Qnn_ErrorHandle_t {provider}(QnnOpPackage_Interface_t* interface);

// the stand-in headers declare what the SDK's registration does, and implement nothing
namespace udo_standin {{
bool registers(const char*, const char*) {{ return true; }}
}}

static QnnOpPackage_Interface_t iface;

static Qnn_Param_t param(const char* name) {{
  Qnn_Param_t p = QNN_PARAM_INIT;
  p.name = name;
  return p;
}}

static void check(const char* node, const char* package, const char* type,
                  std::vector<Qnn_Param_t> params, uint32_t numParams, uint32_t numInputs,
                  uint32_t numOutputs) {{
  std::vector<Qnn_Tensor_t> inputs(numInputs, Qnn_Tensor_t(QNN_TENSOR_INIT));
  std::vector<Qnn_Tensor_t> outputs(numOutputs, Qnn_Tensor_t(QNN_TENSOR_INIT));
  Qnn_OpConfig_t config;
  config.version = QNN_OPCONFIG_VERSION_1;
  config.v1 = {{node, package, type, numParams, params.data(), numInputs, inputs.data(),
               numOutputs, outputs.data()}};
  std::printf("%s %s %s %d\\n", node, package, type,
              static_cast<int>(iface.v1_4.validateOpConfig(config)));
}}

int main() {{
  if ({provider}(&iface) != QNN_SUCCESS) return 1;
{checks}
  return 0;
}}
"""


@pytest.mark.parametrize("backend", ["HTP", "DSP"])
def test_converted_custom_nodes_pass_the_generated_validate_op_config(
        tmp_path: Path, backend: str) -> None:
    gxx = need_gxx()
    nodes = _custom_nodes(tmp_path)
    assert sorted({n.op for n in nodes}) == ["Softplus", "Swish"]
    files = package_files(tmp_path / "work", [SOFTPLUS, SWISH], backend, ["v73"])
    manifest = json.loads(files["package.json"])
    folder = write(files, tmp_path / "pkg")
    checks = [_config(n, n.package, n.op) for n in nodes]
    # the controls: a renamed package (the old MyPkgHtp) and an unknown op type are refused
    checks += [_config(nodes[0], nodes[0].package + backend.title(), nodes[0].op),
               _config(nodes[0], nodes[0].package, "NoSuchOp")]
    driver = tmp_path / "driver.cpp"
    driver.write_text(DRIVER.format(provider=manifest["provider"], checks="\n".join(checks)))
    exe = tmp_path / "driver"
    built = subprocess.run(
        [gxx, "-std=c++17", f"-I{STANDIN / 'include'}", f"-I{folder / 'include'}", "-o", str(exe),
         str(folder / f"src/{manifest['package']}Interface.cpp"), str(driver)],
        capture_output=True, text=True, timeout=120)
    assert built.returncode == 0, built.stderr
    lines = subprocess.run([str(exe)], capture_output=True, text=True, timeout=30,
                           check=True).stdout.splitlines()
    results = [line.rsplit(" ", 1) for line in lines]
    assert len(results) == len(nodes) + 2
    assert all(code == "0" for _, code in results[:len(nodes)]), results
    assert all(code != "0" for _, code in results[len(nodes):]), results
    assert {n.package for n in nodes} == {manifest["package"]} == {"SoftplusPackage"}
    assert manifest["provider"] == "SoftplusPackageInterfaceProvider"
