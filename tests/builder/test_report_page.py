"""The build report page: written beside the output folder by every build (not by dry runs),
its sections filled from the build, user strings escaped, the per-layer chart."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tests.conftest import RECIPES
from udo_build.builder.report_chart import chart, layer_rows, layer_section
from udo_build.builder.report_page import page_path, read_layers, read_runs, render
from udo_build.builder.session import BuildReport, BuildRequest, Quiet, run_build


@pytest.fixture(scope="module")
def softplus(tmp_path_factory: pytest.TempPathFactory) -> BuildReport:
    where = tmp_path_factory.mktemp("softplus")
    request = BuildRequest(str(RECIPES / "softplus.yaml"), store=str(where / "store"),
                           out=str(where / "out" / "softplus"), jobs=1)
    return run_build(request, Quiet())


def test_every_build_writes_its_page_beside_the_output_folder(softplus: BuildReport) -> None:
    assert softplus.out is not None and softplus.page == page_path(softplus.out)
    assert softplus.page.name == "softplus.report.html" and softplus.page.parent == \
        softplus.out.parent
    manifest = json.loads((softplus.out / ".udo-build-manifest.json").read_text())
    assert not any(name.endswith(".html") for name in manifest)
    page = softplus.page.read_text()
    for table in ("runs", "matrix", "fleet", "actions"):
        assert f'<table id="{table}"' in page
    assert page.count("<tr><td>") >= len(softplus.actions) + 26  # actions + matrix + run


def test_the_matrix_marks_records_that_share_a_key(softplus: BuildReport) -> None:
    assert softplus.page is not None
    page = softplus.page.read_text()
    matrix = page[page.index('<table id="matrix"'):]
    matrix = matrix[:matrix.index("</table>")]
    prepares = [a for a in softplus.actions if a.kind == "prepare"]
    keys = [a.key for a in prepares]
    shared = sum(1 for k in keys if keys.count(k) > 1)
    assert shared and matrix.count('class="shared"') == shared
    assert f"{len(prepares)} targets, {len(set(keys))} distinct records" in matrix
    size = prepares[0].sizes["record"]
    assert f'title="{size} bytes"' in matrix


def test_runs_show_their_figures_against_the_check_bounds(softplus: BuildReport) -> None:
    assert softplus.out is not None
    (run,) = read_runs(softplus, softplus.out)
    assert (run.name, run.soc, run.verdict, run.checks) == ("smoke", "sm8550", "passed",
                                                            {"min_sqnr_db": 25})
    assert run.report is not None
    sqnr = run.report["metrics"]["sqnr_db"]
    page = render(softplus, [run])
    assert f'<span class="meets">{sqnr:.4g}</span> <small>(min 25)</small>' in page
    missed = run._replace(checks={"min_sqnr_db": 90.0}, verdict="FAILED")
    assert f'<span class="miss">{sqnr:.4g}</span> <small>(min 90)</small>' in render(
        softplus, [missed])


def test_a_dry_run_writes_no_page(tmp_path: Path) -> None:
    request = BuildRequest(str(RECIPES / "softplus.yaml"), store=str(tmp_path / "store"),
                           out=str(tmp_path / "out"), dry_run=True)
    report = run_build(request, Quiet())
    assert report.page is None and not page_path(tmp_path / "out").exists()


def test_user_strings_are_escaped(softplus: BuildReport) -> None:
    evil = "<script>alert(1)</script>"
    actions = tuple(a._replace(reason=evil, id=a.id + evil) for a in softplus.actions)
    page = render(softplus._replace(recipe=evil, actions=actions), [])
    assert evil not in page and "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert page.count("<script>") == 2  # the error hook and the sorting script


def test_the_page_charts_the_layers_the_quantize_step_measured(softplus: BuildReport) -> None:
    assert softplus.out is not None and softplus.page is not None
    published = json.loads((softplus.out / "quant" / "layers.json").read_text())["layers"]
    page = softplus.page.read_text()
    assert len(published) == 7 and page.count('<rect class="bar') == len(published)
    assert page.count('<rect class="bar custom"') == sum(x["custom"] for x in published) == 2
    assert '<table id="layers" class="sortable">' in page and ">custom op</text>" in page
    for layer in published:
        assert f"<td>{layer['node']}</td>" in page


def test_layers_are_read_only_from_the_figures_file(tmp_path: Path) -> None:
    assert read_layers(None) is None and read_layers(tmp_path) is None
    (tmp_path / "quant").mkdir()
    figures = tmp_path / "quant" / "layers.json"
    for broken in ("{", "[]", '{"layers": {}}', '{"layers": [1]}',
                   '{"layers": [{"sqnr_db": "high"}]}', '{"inputs": 1, "layers": []}'):
        figures.write_text(broken)
        assert read_layers(tmp_path) is None, broken
    figures.write_text('{"inputs": 1, "layers": [{"index": 0, "node": "n", "op": "Mine", '
                       '"tensor": "t", "sqnr_db": null, "custom": true}]}')
    assert read_layers(tmp_path) == [(1, "n", "Mine", "t", None, True)]


def test_the_layer_chart_numbers_bars_like_the_table_and_marks_custom_ops() -> None:
    layers = layer_rows([
        {"index": 0, "node": "conv", "op": "Conv", "tensor": "a", "sqnr_db": 41.5},
        {"index": 1, "node": "sp<1>", "op": "SoftplusPackage::Softplus", "tensor": "b",
         "sqnr_db": 28.25},
        {"index": 1, "node": "relu", "op": "Relu", "tensor": "c", "sqnr_db": None}])
    assert [(r.number, r.custom, r.sqnr_db) for r in layers] == [
        (1, False, 41.5), (2, True, 28.25), (3, False, None)]
    svg = chart(layers)
    assert svg.count("<rect class=\"bar") == 3 and svg.count('class="bar custom"') == 1
    assert "<title>#2 sp&lt;1&gt; (SoftplusPackage::Softplus) b: 28.2 dB</title>" in svg
    assert "<title>#3 relu (Relu) c: exact</title>" in svg
    for label in ("default op", "custom op", "exact (no error)"):
        assert f">{label}</text>" in svg
    ticks = re.findall(r'text-anchor="middle">(\d+)</text>', svg)
    assert ticks == ["1", "2", "3"]
    section = layer_section(layers)
    rows = re.findall(r"<tr><td>(\d+)</td><td>([^<]*)</td>", section)
    assert rows == [("1", "conv"), ("2", "sp&lt;1&gt;"), ("3", "relu")]
    assert "worst: #2 sp&lt;1&gt;" in section


def test_a_decode_run_gets_its_sqnr_per_step(softplus: BuildReport) -> None:
    from udo_build.builder.report_chart import decode_section
    from udo_build.runtime.metrics import decode_metrics

    assert softplus.out is not None
    (run,) = read_runs(softplus, softplus.out)
    assert run.report is not None
    steps = [{"y": 40.0 - t * 0.1, "present_key": 45.0, "<cache>": None} for t in range(8)]
    metrics = {**run.report["metrics"], "decode": decode_metrics(steps)}
    page = render(softplus, [run._replace(report={**run.report, "metrics": metrics})])
    section = page[page.index("<section><h2>SQNR per decode step: smoke</h2>"):]
    section = section[:section.index("</section>") + len("</section>")]
    assert section == decode_section("smoke", metrics["decode"])
    assert section.count("<polyline") == 3 and section.count("<tr><td>") == 8
    assert "<th>&lt;cache&gt;</th>" in section and "<cache>" not in section  # escaped
    assert "<tr><td>7</td><td>exact</td><td>45.0</td><td>39.3</td></tr>" in section
    assert "worst step: 39.3 dB (step 7); drift 0.70 dB (y" in section  # 40.0 - 39.3
    assert "SQNR per decode step" not in render(softplus, [run])  # a plain run: none


def test_the_page_escapes_as_html_escape_does() -> None:
    import html

    from udo_build.builder.report_chart import escape

    for text in ("", "plain", "<a href=\"x\">'&amp;'</a>", "&&<<>>\"\"''", "é ✓ \x00 \n",
                 "".join(map(chr, range(0, 300)))):
        assert escape(text) == html.escape(text)
