"""The build report page in a real headless browser (Debian's chromium, started here): it loads
without script errors, its tables and chart are in the DOM, and a screenshot has content."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import EXAMPLES, RECIPES
from udo_build.builder.session import BuildReport, BuildRequest, Quiet, run_build

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync")
TIMEOUT = 120  # seconds for one chromium run


def chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("chromium is not installed (apt-get install chromium)")
    return found


def browse(page: Path, tmp: Path, *args: str) -> str:
    """Run chromium on the page with `args`; its stdout."""
    done = subprocess.run([chromium(), *FLAGS, f"--user-data-dir={tmp / 'profile'}", *args,
                           page.resolve().as_uri()], capture_output=True, text=True,
                          timeout=TIMEOUT, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def build(recipe: str, where: Path) -> BuildReport:
    request = BuildRequest(str(RECIPES / recipe), store=str(where / "store"),
                           out=str(where / "out" / Path(recipe).stem))
    report = run_build(request, Quiet())
    assert report.exit_code == 0 and report.page is not None
    return report


@pytest.fixture(scope="module", params=["softplus.yaml", "squeezenet.yaml"])
def built(request: pytest.FixtureRequest,
          tmp_path_factory: pytest.TempPathFactory) -> BuildReport:
    return build(request.param, tmp_path_factory.mktemp("browser"))


def test_the_page_loads_without_errors_and_holds_its_tables(built: BuildReport,
                                                            tmp_path: Path) -> None:
    assert built.page is not None
    dom = browse(built.page, tmp_path, "--dump-dom", "--virtual-time-budget=2000")
    assert 'data-ready="1"' in dom, "the page's script did not run to its end"
    assert errors(dom) == []
    for table in ("runs", "matrix", "fleet", "actions"):
        assert f'<table id="{table}" class="sortable">' in dom
    rows = len(re.findall(r"<tr>", dom))
    prepares = sum(1 for a in built.actions if a.kind == "prepare")
    assert rows >= len(built.actions) + prepares + 2


def test_the_screenshot_is_not_blank(built: BuildReport, tmp_path: Path) -> None:
    assert built.page is not None
    shot = tmp_path / "page.png"
    browse(built.page, tmp_path, f"--screenshot={shot}", "--window-size=1280,2000",
           "--hide-scrollbars")
    width, height, colors, inked = png_content(shot)
    assert (width, height) == (1280, 2000)
    assert colors >= 8, f"{colors} colours: a blank page?"
    assert inked > 0.02, f"only {inked:.1%} of the pixels are not white"


def test_the_layer_chart_renders(tmp_path: Path) -> None:
    """A page with the per-layer chart of the softplus model (figures measured here)."""
    from udo_build.builder.report_chart import layer_rows
    from udo_build.builder.report_page import read_runs, render

    report = build("softplus.yaml", tmp_path)
    assert report.out is not None
    layers = layer_rows(measure_layers(report.out / "model" / "net_quantized.udb"))
    assert any(r.custom for r in layers) and any(not r.custom for r in layers)
    page = tmp_path / "with-layers.html"
    page.write_text(render(report, read_runs(report, report.out), layers))
    dom = browse(page, tmp_path, "--dump-dom", "--virtual-time-budget=2000")
    assert 'data-ready="1"' in dom and errors(dom) == []
    assert dom.count('<rect class="bar') == len(layers) and '<table id="layers"' in dom
    shot = tmp_path / "layers.png"
    browse(page, tmp_path, f"--screenshot={shot}", "--window-size=1280,2000")
    assert png_content(shot)[2] >= 8


def test_a_script_error_is_caught(built: BuildReport, tmp_path: Path) -> None:
    """The error hook the checks above rely on does report an error."""
    assert built.page is not None
    page = tmp_path / "broken.html"
    page.write_text(built.page.read_text().replace(
        "</body>", "<script>no_such_function();</script></body>"))
    dom = browse(page, tmp_path, "--dump-dom", "--virtual-time-budget=2000")
    assert len(errors(dom)) == 1 and "no_such_function" in errors(dom)[0]


def errors(dom: str) -> list[str]:
    """The script errors the page's hook wrote into the DOM."""
    found = re.findall(r'<html[^>]* data-errors="([^"]*)"', dom)
    return [e for e in found[0].split(";") if e] if found else []


def measure_layers(bundle_path: Path) -> list[dict[str, object]]:
    from udo_build.ir.qmodel import from_bundle
    from udo_build.kernels.load import packages_for
    from udo_build.model.input_list import feeds, parse_input_list
    from udo_build.model.op_check import load_checked_bundle
    from udo_build.quant.report import layer_sqnr

    softplus = EXAMPLES / "softplus"
    bundle = load_checked_bundle(str(bundle_path))
    qmodel = from_bundle(bundle, str(bundle_path))
    packages = packages_for(bundle, [softplus / "ops" / "kernels.py"])
    listing = parse_input_list(softplus / "data" / "calib.txt")
    found = layer_sqnr(qmodel, packages, feeds(listing, list(qmodel.model.graph.inputs)))
    return [layer.to_json() for layer in found]


def png_content(path: Path) -> tuple[int, int, int, float]:
    """(width, height, distinct colours, share of pixels that are not white) of a PNG."""
    import numpy as np
    from PIL import Image

    with Image.open(path) as image:
        pixels = np.asarray(image.convert("RGB"))
    height, width, _ = pixels.shape
    flat = pixels.reshape(-1, 3)
    colors = len(np.unique(flat[:: max(1, len(flat) // 200_000)], axis=0))
    inked = float(np.mean(np.any(flat < 245, axis=1)))
    return width, height, colors, inked
