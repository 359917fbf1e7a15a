"""bench/cores.py on its smoke scale (squeezenet, 4 inputs, 1 and 2 workers), so that it cannot
rot: every phase runs at both worker counts and gives the same bits at both."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def test_cores_bench_smoke(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("bench_cores", BENCH / "cores.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    code = module.main(["--smoke"])
    out = capsys.readouterr().out
    assert code == 0, out
    for phase in ("calibration:", "quant report:", "run:"):
        assert phase in out
    assert out.count("  2 workers ") == 3 and "FAIL" not in out
