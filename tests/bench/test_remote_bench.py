"""bench/remote.py on a small scale, so that it cannot rot: one SoC at one level (one record),
one round, no throttled run (`--smoke`); the time targets are not checked at this size, only
that the fresh clone executed nothing and every figure was measured (a peer checkout's too,
`--peer`: this one)."""

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
    peer = Path(remote.__file__).resolve().parents[1]  # this checkout as its own peer
    code = remote.main(["--smoke", "--keep", str(tmp_path / "work"), "--peer", str(peer)])
    out = capsys.readouterr().out
    assert code in (0, 1), out
    assert "  PASS  loopback, unthrottled: executed 0: executed [0]" in out
    assert "  PASS  loopback, unthrottled: the peer's fresh clone executed 0" in out
    figures = ["fresh clone + empty store + warm remote", "urllib GETs into memory",
               "downloaded by the build (its GETs)", "fresh clone, empty store, no remote",
               f"peer {peer}: fresh clone", "peer: ratio, cost over the download"]
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


def test_the_real_size_project_is_resnet50_with_the_udo(tmp_path: Path) -> None:
    """`--model resnet50`: its matrix defaults, the model with a Softplus UDO before each
    bottleneck's 3x3 convolution, and a recipe that plans a record per SoC x level."""
    import io
    import json

    import onnx

    from udo_build.cli import main

    remote = _script("remote")
    args = remote.parse_args(["--model", "resnet50"])
    assert (args.socs, args.levels) == (3, "1,3")
    assert (remote.parse_args([]).socs, remote.parse_args([]).levels) == (5, "1,2,3")
    recipe = remote.make_project(tmp_path / "project", 2, "1,3", "resnet50")
    model = onnx.load(str(tmp_path / "project/examples/resnet50/model/resnet50_softplus.onnx"))
    udos = [n for n in model.graph.node if n.op_type == "Softplus"]
    assert len(udos) == 16 and {n.domain for n in udos} == {"aisw"}  # 3 + 4 + 6 + 3 blocks
    assert sum(n.op_type == "Relu" for n in model.graph.node) == 49 - 16
    assert sum(i.dims[0] * i.dims[1] * i.dims[2] * i.dims[3] for i in model.graph.initializer
               if len(i.dims) == 4) > 23_000_000  # ResNet-50's convolution weights
    out = io.StringIO()
    code = main([str(recipe), "--dry-run", "--json", "--store", str(tmp_path / "store")],
                stdout=out)
    actions = [a["id"] for a in json.loads(out.getvalue())["actions"]]
    assert code == 0 and sum(a.startswith("prepare") for a in actions) == 4, actions
    assert remote.fresh_clone(tmp_path / "project", tmp_path / "clone").name == "resnet50.yaml"
