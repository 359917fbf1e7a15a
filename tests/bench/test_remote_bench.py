"""bench/remote.py on a tiny scale, so that it cannot rot: 1 target, 1 kB outputs, one round,
no throttled run; the ratio target is not checked at this size (start-up dominates), only that
the fresh clone executed nothing and every figure was measured."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from ..store.nginx import nginx_binary
from .test_bench_smoke import _script


def test_remote_bench_small(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    if nginx_binary() is None:
        pytest.skip("the remote bench needs nginx (apt-get install nginx)")
    remote = _script("remote")
    code = remote.main(["--targets", "1", "--output-bytes", "1000", "--repeats", "1",
                        "--rate", "", "--keep", str(tmp_path / "work")])
    out = capsys.readouterr().out
    assert code in (0, 1), out
    assert "  PASS  loopback, unthrottled: executed 0: executed [0]" in out
    figures = ["fresh clone + empty store + warm remote", "urllib GETs into memory"]
    if shutil.which("curl"):
        figures += ["curl, every remote file to disk", "build / curl"]
    for figure in figures:
        assert figure in out, out
