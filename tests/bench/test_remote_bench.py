"""bench/remote.py on a small scale, so that it cannot rot: one SoC at one level (one record),
one round, no throttled run; the ratio target is not checked at this size (start-up
dominates), only that the fresh clone executed nothing and every figure was measured."""

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
    code = remote.main(["--socs", "1", "--levels", "2", "--repeats", "1",
                        "--rate", "", "--keep", str(tmp_path / "work")])
    out = capsys.readouterr().out
    assert code in (0, 1), out
    assert "  PASS  loopback, unthrottled: executed 0: executed [0]" in out
    figures = ["fresh clone + empty store + warm remote", "urllib GETs into memory",
               "downloaded by the build (its GETs)", "fresh clone, empty store, no remote"]
    if shutil.which("curl"):
        figures += ["curl, the same files to disk", "build / curl"]
    for figure in figures:
        assert figure in out, out


def test_remote_bench_grpc_small(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The grpc backend: BuildGrid as the remote, plain REAPI reads as the download, one
    throttled run through bench/_throttle.py."""
    from ..store.buildgrid import bgd_binary

    if bgd_binary() is None:
        pytest.skip("the grpc remote bench needs BuildGrid (python3 -m venv /opt/buildgrid && "
                    "/opt/buildgrid/bin/pip install buildgrid)")
    remote = _script("remote")
    code = remote.main(["--backend", "grpc", "--socs", "1", "--levels", "2", "--repeats", "1",
                        "--rate", "50m", "--keep", str(tmp_path / "work")])
    out = capsys.readouterr().out
    assert code in (0, 1), out
    for name in ("grpc, loopback, unthrottled", "grpc, throttled to 50mB/s per connection"):
        assert f"  PASS  {name}: executed 0: executed [0]" in out, out
    for figure in ("fresh clone + empty store + warm remote", "remote holds (what a fresh "
                   "clone reads)", "plain REAPI reads of the same bytes to disk"):
        assert figure in out, out
