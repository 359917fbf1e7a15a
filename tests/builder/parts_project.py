"""A small residual stack (standard ops only) and a recipe that cuts it into parts: the model
of the parts tests (udo_build.compiler.parts)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from udo_build.cli import main

WIDTH = 64
LAYERS = 3
# an fp16 record of one layer holds its 64x64 weight (8 KiB) and bias; two layers do not fit
FP16_LIMIT = 20_000

RECIPE = """\
recipe: 1
name: parts
model:
  onnx: model/stack.onnx
{quantize}prepare:
{limit}  matrix:
    soc: [{socs}]
    precision: [{precision}]
run:
  - name: smoke
    soc: sm8550
    precision: {precision}
    input_list: data/test.txt
"""

QUANTIZE = """\
quantize:
  input_list: data/test.txt
"""


def stack_model(layers: int = LAYERS, seed: int = 0) -> onnx.ModelProto:
    """x -> x + Relu(x @ W_i + b_i), `layers` times -> y: between two layers only the hidden
    state is live."""
    rng = np.random.default_rng(seed)
    nodes, weights = [], []
    h = "x"
    for i in range(layers):
        w = (rng.standard_normal((WIDTH, WIDTH)) / np.sqrt(WIDTH)).astype(np.float32)
        b = (rng.standard_normal(WIDTH) * 0.1).astype(np.float32)
        weights += [numpy_helper.from_array(w, f"w{i}"), numpy_helper.from_array(b, f"b{i}")]
        out = "y" if i == layers - 1 else f"h{i}"
        nodes += [helper.make_node("MatMul", [h, f"w{i}"], [f"mm{i}"], name=f"mm{i}"),
                  helper.make_node("Add", [f"mm{i}", f"b{i}"], [f"lin{i}"], name=f"bias{i}"),
                  helper.make_node("Relu", [f"lin{i}"], [f"act{i}"], name=f"relu{i}"),
                  helper.make_node("Add", [h, f"act{i}"], [out], name=f"res{i}")]
        h = out
    graph = helper.make_graph(
        nodes, "stack", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, WIDTH])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, WIDTH])], weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


class PartsProject:
    """The stack model in `root`, with its recipe (the limit, the precision) and test data."""

    def __init__(self, root: Path, limit: str | int | None = FP16_LIMIT,
                 precision: str = "fp16", socs: str = "sm8550, qcs9100, sm8650") -> None:
        self.socs = socs
        root.mkdir(parents=True, exist_ok=True)
        (root / ".udo-build-root").write_text("")
        (root / "model").mkdir()
        (root / "data").mkdir()
        onnx.save(stack_model(), str(root / "model/stack.onnx"))
        rng = np.random.default_rng(7)
        lines = []
        for i in range(3):
            rng.standard_normal((1, WIDTH)).astype(np.float32).tofile(root / f"data/x{i}.raw")
            lines.append(f"x{i}.raw")
        (root / "data/test.txt").write_text("\n".join(lines) + "\n")
        self.root = root
        self.recipe = root / "recipe.yaml"
        self.write(limit, precision)

    def write(self, limit: str | int | None, precision: str = "fp16") -> None:
        self.recipe.write_text(RECIPE.format(
            quantize=QUANTIZE if precision == "int8" else "", precision=precision,
            socs=self.socs,
            limit="" if limit is None else f"  max_record_bytes: {limit}\n"))

    def cli(self, *args: str, code: int = 0) -> tuple[dict[str, Any], str]:
        out, err = io.StringIO(), io.StringIO()
        got = main([*args, "--json"], stdout=out, stderr=err, env={})
        assert got == code, err.getvalue() + out.getvalue()
        return json.loads(out.getvalue()), err.getvalue()

    def build(self, code: int = 0) -> tuple[dict[str, Any], str]:
        return self.cli("build", str(self.recipe), "--store", str(self.root / "store"),
                        "--out", str(self.root / "out"), code=code)

    def report(self, run: str = "smoke") -> dict[str, Any]:
        return json.loads((self.root / "out/runs" / run / "report.json").read_text())
