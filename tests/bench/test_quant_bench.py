"""bench/quant.py on a tiny scale, so that it cannot rot: SqueezeNet, 2 calibration and 2
held-out inputs, one udo-build quantizer and one onnxruntime calibration, one timed round and
its profile."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"

pytest.importorskip("onnxruntime")


def test_quant_bench_small(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("bench_quant", BENCH / "quant.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    code = module.main(["--models", "squeezenet", "--calibration", "2", "--held-out", "2",
                        "--quantizers", "enhanced", "--methods", "MinMax", "--repeats", "1",
                        "--warmup", "0", "--threads", "1", "--profile"])
    out = capsys.readouterr().out
    assert code in (0, 1), out  # 1: a target missed (meaningless on 2 inputs), not a crash
    rows = [line.split() for line in out.splitlines() if line.startswith("squeezenet ")]
    labels = {" ".join(r[1:3]) for r in rows}
    assert {"udo-build enhanced", "ORT MinMax"} <= labels, out
    sqnr = [float(r[3]) for r in rows if r[1] in ("udo-build", "ORT")]
    assert all(10 < s < 80 for s in sqnr), out  # the int8 logits track the float ones
    assert any(r[1] == "1" and float(r[2]) > 0 for r in rows), out  # a timed row
    assert "squeezenet: enhanced SQNR" in out
    assert "cProfile of 3 int8 runs" in out
    parts = out.split("the integer path's own work")[1].split("cProfile of 3")[0]
    assert any(line.split()[0] == "requantization" and float(line.split()[-2]) > 0
               for line in parts.splitlines()[1:] if line.strip()), out  # found, timed
