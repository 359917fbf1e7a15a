"""`udo-build quant-report`: per-layer SQNR as a table, JSON and a PNG."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from udo_build.cli import main

from ..conftest import EXAMPLES

OPS = EXAMPLES / "softplus/ops"


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), stdout=out, stderr=err, env={}), out.getvalue(), err.getvalue()


def test_report_of_the_example(tmp_path: Path) -> None:
    recipe = tmp_path / "r.yaml"
    (tmp_path / ".udo-build-root").write_text("")
    import shutil

    shutil.copytree(EXAMPLES / "softplus", tmp_path / "ex")
    recipe.write_text(
        "recipe: 1\nname: q\npackage:\n  ops:\n"
        "    - {config: ex/ops/softplus.xml, kernels: ex/ops/kernels.py}\n"
        "    - {config: ex/ops/swish.json, kernels: ex/ops/kernels.py}\n"
        "model: {onnx: ex/model/net.onnx}\nquantize: {input_list: ex/data/calib.txt}\n")
    code, out, err = cli("build", str(recipe), "quantize", "--store", str(tmp_path / "s"),
                         "--out", str(tmp_path / "out"), "-j", "1")
    assert code == 0, err
    bundle = tmp_path / "out/model/net_quantized.udb"
    png = tmp_path / "sqnr.png"
    code, out, err = cli("quant-report", str(bundle), "--input-list",
                         str(tmp_path / "ex/data/test.txt"), "--kernels",
                         str(tmp_path / "ex/ops/kernels.py"), "--png", str(png), "--json")
    assert code == 0, err
    layers = json.loads(out)["layers"]
    assert [layer["tensor"] for layer in layers] == [
        "conv1_out", "softplus1_out", "conv2_out", "swish1_out", "pool_out", "flat_out",
        "logits"]
    assert all(20 < layer["sqnr_db"] < 60 for layer in layers)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 10_000
    code, out, err = cli("quant-report", str(tmp_path / "out/model/net.udb"), "--input-list",
                         str(tmp_path / "ex/data/test.txt"))
    assert code == 2 and "the bundle is not quantized (it has no encodings)" in err


def test_the_quantize_step_publishes_the_figures_quant_report_finds(tmp_path: Path) -> None:
    """quant/layers.json of a build: the SQNR of every layer over the first `report_inputs`
    calibration inputs, as quant-report measures it over those inputs; 0 publishes none and
    leaves the quantized bundle as it was."""
    import shutil

    (tmp_path / ".udo-build-root").write_text("")
    shutil.copytree(EXAMPLES / "softplus", tmp_path / "ex")
    calib = (tmp_path / "ex/data/calib.txt").read_text().splitlines()
    (tmp_path / "ex/data/first.txt").write_text("\n".join(calib[:2]) + "\n")
    bundles = []
    for count in (2, 0):
        recipe = tmp_path / f"r{count}.yaml"
        recipe.write_text(
            "recipe: 1\nname: q\npackage:\n  ops:\n"
            "    - {config: ex/ops/softplus.xml, kernels: ex/ops/kernels.py}\n"
            "    - {config: ex/ops/swish.json, kernels: ex/ops/kernels.py}\n"
            "model: {onnx: ex/model/net.onnx}\n"
            f"quantize: {{input_list: ex/data/calib.txt, report_inputs: {count}}}\n")
        out = tmp_path / f"out{count}"
        code, _, err = cli("build", str(recipe), "quantize", "--store", str(tmp_path / "s"),
                           "--out", str(out), "-j", "1")
        assert code == 0, err
        bundles.append((out / "model/net_quantized.udb").read_bytes())
    assert bundles[0] == bundles[1]
    assert not (tmp_path / "out0/quant").exists()
    published = json.loads((tmp_path / "out2/quant/layers.json").read_text())
    code, out, err = cli("quant-report", str(tmp_path / "out2/model/net_quantized.udb"),
                         "--input-list", str(tmp_path / "ex/data/first.txt"), "--kernels",
                         str(tmp_path / "ex/ops/kernels.py"), "--json")
    assert code == 0, err
    assert published == {"inputs": 2, "layers": json.loads(out)["layers"]}
    assert [layer["node"] for layer in published["layers"] if layer["custom"]] == [
        "softplus1", "swish1"]


def test_a_plot_without_matplotlib_is_a_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import importlib.util

    from udo_build.errors import UserError
    from udo_build.quant.report import require_plotting

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "matplotlib" else real(name, *a))
    with pytest.raises(UserError) as info:
        require_plotting()
    assert "needs matplotlib" in info.value.problem.message
    assert "udo-build[report]" in (info.value.problem.hint or "")
