"""The build report page in a real headless browser (Debian's chromium, started here): it loads
without script errors, its tables and the per-layer chart (from the figures the quantize step
published) are in the DOM, and a screenshot has content."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.conftest import RECIPES
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
    for table in ("runs", "matrix", "fleet", "layers", "actions"):
        assert f'<table id="{table}" class="sortable">' in dom
    rows = len(re.findall(r"<tr>", dom))
    prepares = sum(1 for a in built.actions if a.kind == "prepare")
    assert rows >= len(built.actions) + prepares + 2


def test_the_page_charts_the_quantize_steps_layers(built: BuildReport, tmp_path: Path) -> None:
    """The per-layer SQNR the quantize step published: an SVG with a bar per layer (custom ops
    marked), its legend, and the layer table, in the DOM the browser built."""
    assert built.page is not None and built.out is not None
    layers = json.loads((built.out / "quant" / "layers.json").read_text())["layers"]
    dom = browse(built.page, tmp_path, "--dump-dom", "--virtual-time-budget=2000")
    svg = re.findall(r'<svg [^>]*aria-label="SQNR per layer".*?</svg>', dom, re.S)
    assert len(svg) == 1 and svg[0].count('<rect class="bar') == len(layers) > 0
    custom = sum(1 for layer in layers if layer["custom"])
    assert svg[0].count('<rect class="bar custom"') == custom > 0
    assert '<g class="legend">' in svg[0]
    for label in ("default op", "custom op", "exact (no error)"):
        assert f">{label}</text>" in svg[0]
    table = dom[dom.index('<table id="layers"'):]
    table = table[:table.index("</table>")]
    assert table.count("<tr><td>") == len(layers)


def test_the_screenshot_is_not_blank(built: BuildReport, tmp_path: Path) -> None:
    assert built.page is not None
    shot = tmp_path / "page.png"
    browse(built.page, tmp_path, f"--screenshot={shot}", "--window-size=1280,2000",
           "--hide-scrollbars")
    width, height, colors, inked = png_content(shot)
    assert (width, height) == (1280, 2000)
    assert colors >= 8, f"{colors} colours: a blank page?"
    assert inked > 0.02, f"only {inked:.1%} of the pixels are not white"


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
