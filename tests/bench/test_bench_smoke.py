"""The benchmark scripts on a tiny scale, so that they cannot rot: bench/noop.py (5 targets, 2
no-op runs, no timing targets, no DVC) and bench/stress.py (5 targets, 2 processes, 2 kills).

Both run udo-build as separate processes with the stand-in kinds of bench/_cheap_kinds.py; this
test process never imports that plugin (it would register kinds for the other tests).
"""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"

pytestmark = pytest.mark.skipif(sys.platform != "linux", reason="the kill test reads /proc")


def _script(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"bench_{name}", BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_noop_bench_small(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    noop = _script("noop")
    code = noop.main(["--smoke", "--keep", str(tmp_path / "work")])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "FAIL" not in out
    passed = [line for line in out.splitlines() if line.startswith("  PASS")]
    for target in ("no-op executes nothing", "exactly one action executed",
                   "no-op imports no onnx", "loads the recipe once",
                   "no-op on a terminal imports no rich"):
        assert any(target in line for line in passed), out


def test_stress_small(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    stress = _script("stress")
    work = tmp_path / "work"
    code = stress.main(["--targets", "5", "--processes", "2", "--kills", "2",
                        "--sleep-ms", "20", "--keep", str(work)])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.count("PASS") == 7, out
    store = work / "store-concurrent"
    assert stress.check_store(store).clean
    blob = next(p for p in sorted((store / "cas").glob("*/*")) if p.suffix == ".zst")
    blob.chmod(0o644)
    blob.write_bytes(blob.read_bytes()[:-1] + b"\0")  # the check must see a corrupt blob
    problems = stress.check_store(store).problems
    assert any(blob.name in p for p in problems), problems
