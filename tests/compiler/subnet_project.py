"""A project whose Softplus op config lists the CPU only: the small CNN of the softplus example
then splits into HTP, CPU and HTP subnets (tests of udo_build.compiler.partition)."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

from udo_build.cli import main

from ..conftest import EXAMPLES

RECIPE = """\
recipe: 1
name: subnets
package:
  name: SoftplusPackage
  ops:
    - config: examples/softplus/ops/{config}
      kernels: examples/softplus/ops/kernels.py{op_runtimes}
    - config: examples/softplus/ops/swish.json
      kernels: examples/softplus/ops/kernels.py
  backends: [CPU, HTP]
model:
  onnx: examples/softplus/model/net.onnx{model_runtimes}
quantize:
  input_list: examples/softplus/data/calib.txt
  per_channel: true
prepare:
  matrix:
    soc: [sm8550, sm8650]
    precision: [int8, fp16]
    outputs: [{{tensors: [logits]}}]
run:
  - name: int8
    soc: sm8550
    input_list: examples/softplus/data/test.txt
    outputs: {{tensors: [logits]}}
    check: {{min_sqnr_db: 20}}
  - name: fp16
    soc: sm8650
    precision: fp16
    input_list: examples/softplus/data/test.txt
    outputs: {{tensors: [logits]}}
"""


def cpu_only(xml: str) -> str:
    """The Softplus op config with every backend but the CPU taken out."""
    xml = re.sub(r"\s*<SupportedBackend>(GPU|DSP|HTP)</SupportedBackend>", "", xml)
    return re.sub(r'\s*<SupplementalOpDefList Backend="(GPU|DSP|HTP)">.*?'
                  r"</SupplementalOpDefList>", "", xml, flags=re.S)


class Project:
    """The softplus example in `root` with a recipe building it for two SoCs."""

    def __init__(self, root: Path, *, config: str = "softplus_cpu.xml",
                 op_runtimes: str = "", model_runtimes: str = "") -> None:
        (root / ".udo-build-root").write_text("")
        shutil.copytree(EXAMPLES / "softplus", root / "examples/softplus")
        ops = root / "examples/softplus/ops"
        (ops / "softplus_cpu.xml").write_text(cpu_only((ops / "softplus.xml").read_text()))
        self.recipe = root / "recipe.yaml"
        self.recipe.write_text(RECIPE.format(config=config, op_runtimes=op_runtimes,
                                             model_runtimes=model_runtimes))
        self.root = root

    def cli(self, *args: str, code: int = 0) -> tuple[dict[str, Any], str]:
        out, err = io.StringIO(), io.StringIO()
        got = main([*args, "--json"], stdout=out, stderr=err, env={})
        assert got == code, err.getvalue() + out.getvalue()
        return json.loads(out.getvalue()), err.getvalue()

    def build(self, code: int = 0) -> tuple[dict[str, Any], str]:
        return self.cli("build", str(self.recipe), "--store", str(self.root / "store"),
                        "--out", str(self.root / "out"), code=code)

    def report(self, run: str) -> dict[str, Any]:
        return json.loads((self.root / "out/runs" / run / "report.json").read_text())
