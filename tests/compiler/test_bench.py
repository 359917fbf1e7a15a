"""bench/prepare.py on a tiny scale, so that it cannot rot."""

from __future__ import annotations

import importlib.util
import sys

import pytest

from .helpers import REPO


def test_prepare_bench_small(capsys: pytest.CaptureFixture[str]) -> None:
    spec = importlib.util.spec_from_file_location("bench_prepare", REPO / "bench" / "prepare.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    code = module.main(["--sizes", "60,120", "--repeats", "1", "--levels", "1,3",
                        "--models", "squeezenet", "--int8", "squeezenet", "--no-timing"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert out.count("bit-exact") == 2 and "| squeezenet | 3 |" in out and "| dense | 3 |" in out
