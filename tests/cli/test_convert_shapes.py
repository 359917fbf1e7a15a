"""`convert --input-dims` keeps static shapes past the custom ops, from the exporter's records or
from `--kernels`, and `info` counts the MACs after them."""

from __future__ import annotations

import io
import json
from pathlib import Path

import onnx

from udo_build.cli import main

from ..conftest import EXAMPLES

OPS = EXAMPLES / "softplus/ops"
OPDEFS = ["--opdef", str(OPS / "softplus.xml"), "--opdef", str(OPS / "swish.json")]


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err, env={})
    return code, out.getvalue(), err.getvalue()


def info(bundle: Path) -> dict:
    code, out, err = cli("info", str(bundle), "--json")
    assert code == 0, err
    return json.loads(out)


def test_convert_at_batch_4_counts_every_mac(tmp_path: Path) -> None:
    bare = tmp_path / "bare.onnx"
    model = onnx.load(EXAMPLES / "softplus/model/net.onnx")
    del model.graph.value_info[:]  # no exporter records: the kernels must tell
    onnx.save(model, bare)
    for source, extra in ((EXAMPLES / "softplus/model/net.onnx", []),
                          (bare, ["--kernels", str(OPS / "kernels.py")])):
        out = tmp_path / f"{source.stem}.udb"
        code, _, err = cli("convert", str(source), *OPDEFS, *extra, "--input-dims",
                           "input=4,3,32,32", "--out", str(out))
        assert code == 0, err
        facts = info(out)
        assert all(None not in (d or [None]) for layer in facts["layers"]
                   for d in layer["output_dims"]), facts["layers"]
        assert facts["total_macs"] == 884_736 + 1_179_648 + 640
