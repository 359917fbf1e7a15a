"""The build report page: one self-contained HTML file (inline CSS, JS and SVG; no network, no
fonts to fetch) that shows what a build did and what its outputs are worth.

    page = render(report, read_runs(report, out))      # a BuildReport -> str
    write_page(report, out)                            # out/<name>.report.html, atomically

Sections: the actions (status, time, where each result came from), the prepare matrix (SoC x
level x dims x outputs, each record's size, the records several targets share: the same key),
the runs (SQNR, worst absolute error, top-1 agreement against their checks' bounds), each
decode run's SQNR per step (a line per output and a table), the C++ op bodies against their
numpy kernels (report_native.py), the per-layer SQNR chart (see
report_chart.py) when the output folder holds the quantize step's figures (`quant/layers.json`)
or they are given, and the fleet (each run's device, the record it loads and the records it
rejected, with why).

A workspace's build (several recipes) has one page with a section per recipe: see
report_workspace.py.

The page lives BESIDE the output folder (`<out>.report.html`), never in it: the output folder
is a function of the build's keys (byte-identical across machines and shards) and the page
holds times. Every string from the user or the build is escaped. Imports nothing heavy (a no-op
build writes it too).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple, Protocol

from .report_chart import LayerRow, decode_section, escape, layer_rows, layer_section
from .report_generation import generation_sections
from .report_mixed import mixed_section, read_mixed
from .report_native import NativeFigures, native_section, read_native
from .report_stages import Stage, read_stages, stages_section


class ActionOutcome(Protocol):
    """What the page reads of an action's outcome (session.ActionOutcome)."""

    @property
    def id(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def seconds(self) -> float: ...
    @property
    def queued(self) -> float: ...
    @property
    def reason(self) -> str: ...
    @property
    def description(self) -> str | None: ...
    @property
    def key(self) -> str | None: ...
    @property
    def params(self) -> dict[str, Any]: ...
    @property
    def sizes(self) -> dict[str, int]: ...


class BuildReport(Protocol):
    """What the page reads of a build (session.BuildReport; session imports this module)."""

    @property
    def recipe(self) -> str: ...
    @property
    def file(self) -> Path: ...
    @property
    def store(self) -> Path: ...
    @property
    def out(self) -> Path | None: ...
    @property
    def actions(self) -> Sequence[ActionOutcome]: ...
    @property
    def seconds(self) -> float: ...
    @property
    def shard(self) -> str | None: ...
    @property
    def where(self) -> str: ...
    @property
    def counts(self) -> dict[str, int]: ...
    @property
    def hit_rate(self) -> float | None: ...

SUFFIX = ".report.html"
LAYERS = "quant/layers.json"  # in the output folder, published by the quantize step
METRICS = (("sqnr_db", "SQNR dB", "min_sqnr_db", "min"),
           ("max_abs_error", "max abs error", "max_abs_error", "max"),
           ("top1_agreement", "top-1 agreement", "min_top1_agreement", "min"))


class RunFigures(NamedTuple):
    """What one run found (its report.json in the output folder) and its checks."""

    name: str
    soc: str
    status: str  # the run action's
    report: dict[str, Any] | None  # None: the run published nothing (failed, skipped)
    checks: dict[str, float]  # the bounds it states
    verdict: str  # "passed", "FAILED", or the check step's other status, "" without checks


def page_path(out: Path) -> Path:
    """Where the page of a build whose output folder is `out` goes: beside it."""
    return out.with_name(out.name + SUFFIX)


def write_page(report: BuildReport, out: Path,
               layers: Sequence[LayerRow] | None = None) -> Path:
    """Write the page of `report` beside `out` (atomically); its path. Without `layers`, the
    per-layer figures are those the quantize step published in the output folder, if any."""
    from ..atomic import write_atomic

    path = page_path(out)
    path.parent.mkdir(parents=True, exist_ok=True)
    runs = read_runs(report, report.out)
    if layers is None:
        layers = read_layers(report.out)
    native = read_native(report.actions, report.out)
    page = render(report, runs, layers, native, read_stages(report.out),
                  read_mixed(report.out))
    # a name the locale could not decode holds surrogates: written replaced
    write_atomic(path, page.encode("utf-8", "replace"), readonly=False, durable=False)
    return path


def read_layers(out: Path | None) -> list[LayerRow] | None:
    """The per-layer SQNR figures in `out` (quantize's LAYERS file), None when there are none
    (no quantize step, `report_inputs: 0`, or a file that is not the figures)."""
    if out is None:
        return None
    try:
        found = json.loads((out / LAYERS).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    layers = found.get("layers") if isinstance(found, dict) else None
    if not isinstance(layers, list) or not all(isinstance(x, dict) for x in layers):
        return None
    try:
        return layer_rows(layers) or None
    except (TypeError, ValueError):  # a figure that is not a number
        return None


def read_runs(report: BuildReport, out: Path | None) -> list[RunFigures]:
    """Each run of the build with what its report.json (in `out`, when it is there) says."""
    by_id = {a.id: a for a in report.actions}
    runs = []
    for action in report.actions:
        if action.kind != "run":
            continue
        name = str(action.params.get("name", action.id.partition(":")[2]))
        check = by_id.get(f"check:{name}")
        checks = {} if check is None else {k: v for k, v in check.params.items() if k != "run"}
        runs.append(RunFigures(name, str(action.params.get("soc", "")), action.status,
                               _run_report(out, name, action), checks, _verdict(check)))
    return runs


def _run_report(out: Path | None, name: str, action: ActionOutcome) -> dict[str, Any] | None:
    if out is None or action.status not in ("built", "cached"):
        return None
    try:
        found = json.loads((out / "runs" / name / "report.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def _verdict(check: ActionOutcome | None) -> str:
    if check is None:
        return ""
    return {"built": "passed", "cached": "passed", "failed": "FAILED"}.get(check.status,
                                                                         check.status)


# -- the page -------------------------------------------------------------------------------------

def render(report: BuildReport, runs: Sequence[RunFigures],
           layers: Sequence[LayerRow] | None = None, native: NativeFigures | None = None,
           stages: Sequence[Stage] | None = None,
           mixed: dict[str, Any] | None = None) -> str:
    """The whole page (a pure function of its arguments)."""
    return document(f"{report.recipe}: build report",
                    [_summary(report), *sections(report, runs, layers, native, stages, mixed)])


def sections(report: BuildReport, runs: Sequence[RunFigures], layers: Sequence[LayerRow] | None,
             native: NativeFigures | None, stages: Sequence[Stage] | None,
             mixed: dict[str, Any] | None = None) -> list[str]:
    """A build's sections, below its summary (a workspace's page has them per recipe)."""
    return [_runs(runs), *_decodes(runs), *generation_sections(runs, report.actions),
            native_section(native), _matrix(report.actions),
            layer_section(layers) if layers else "",
            stages_section(stages, layers) if stages and layers else "",
            mixed_section(mixed), _fleet(runs), _actions(report.actions)]


def document(title: str, body: Sequence[str]) -> str:
    """A whole page: its head (styles, the error hook), `title`, `body`, its script."""
    return "".join([
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">",
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">",
        f"<title>{escape(title)}</title>", ERROR_HOOK, f"<style>{CSS}</style></head><body>",
        f"<h1>{escape(title)}</h1>", *body, f"<script>{SCRIPT}</script></body></html>\n"])


def _summary(report: BuildReport) -> str:
    counts = report.counts
    facts = [("recipe file", str(report.file)), ("store", str(report.store)),
             ("outputs", "-" if report.out is None else str(report.out)),
             ("actions", f"{counts['built']} built, {counts['cached']} cached "
                         f"({counts['shared']} sharing a key built now), {counts['failed']} "
                         f"failed, {counts['skipped']} skipped"),
             ("ran on", report.where or "-"), ("time", f"{report.seconds:.2f} s")]
    if report.hit_rate is not None:
        facts.append(("cache hit rate", f"{report.hit_rate:.0%}"))
    if report.shard:
        facts.append(("shard", report.shard))
    status = "failed" if counts["failed"] else "ok"
    return (f"<p class=\"verdict {status}\">{'FAILED' if counts['failed'] else 'OK'}</p>"
            + facts_table(facts))


def facts_table(facts: Sequence[tuple[str, str]]) -> str:
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in facts)
    return f"<table class=\"facts\">{rows}</table>"


def _table(caption: str, heads: Sequence[str], rows: Iterable[Sequence[str]],
           table_id: str) -> str:
    """A sortable table; cells are HTML already (escaped by the caller)."""
    head = "".join(f"<th>{escape(h)}</th>" for h in heads)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return (f"<table id=\"{table_id}\" class=\"sortable\"><caption>{escape(caption)}</caption>"
            f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")


def _actions(actions: Sequence[ActionOutcome]) -> str:
    rows = [[escape(a.id), escape(a.kind), _status(a.status), escape(a.source or "-"),
             f"{a.seconds:.2f}", f"{a.queued:.2f}", f"<span title=\"{escape(a.reason)}\">"
             f"{escape(_short(a.reason or a.description or ''))}</span>"] for a in actions]
    return "<section><h2>Actions</h2>" + _table(
        f"{len(actions)} actions", ["action", "kind", "status", "source", "ran s", "queued s",
                                    "note"], rows, "actions") + "</section>"


def _matrix(actions: Sequence[ActionOutcome]) -> str:
    prepares = [a for a in actions if a.kind == "prepare"]
    if not prepares:
        return ""
    by_key: dict[str, list[str]] = {}
    for a in prepares:
        if a.key:
            by_key.setdefault(a.key, []).append(a.id)
    rows = []
    for a in prepares:
        p = a.params
        peers = [i for i in by_key.get(a.key or "", []) if i != a.id]
        size = a.sizes.get("record")
        shared = (f"<span class=\"shared\" title=\"{escape(', '.join(peers))}\">shared with "
                  f"{len(peers)}</span>" if peers else "")
        rows.append([escape(str(p.get("soc", ""))), escape(f"{p.get('arch')} / "
                                                           f"{p.get('vtcm_mb')} MB"),
                     escape(str(p.get("optimization_level", ""))),
                     escape(_dims(p.get("input_dimensions"))), escape(_outputs(p.get("outputs"))),
                     escape(str(p.get("precision", ""))), _status(a.status),
                     "-" if size is None else f"<span title=\"{size} bytes\">{_bytes(size)}</span>",
                     f"<code>{escape((a.key or '-')[:12])}</code>", shared])
    distinct = len(by_key)
    return "<section><h2>Prepare matrix</h2>" + _table(
        f"{len(prepares)} targets, {distinct} distinct records (targets with the same key share "
        "one record)", ["SoC", "arch / VTCM", "level", "input dimensions", "outputs",
                        "precision", "status", "record size", "key", "shared"], rows,
        "matrix") + "</section>"


def _runs(runs: Sequence[RunFigures]) -> str:
    if not runs:
        return ""
    rows = []
    for run in runs:
        metrics = (run.report or {}).get("metrics", {})
        cells = [escape(run.name), escape(run.soc), _status(run.status)]
        for key, _, bound, side in METRICS:
            cells.append(_metric(metrics.get(key), run.checks.get(bound), side))
        cells.append(escape(str((run.report or {}).get("inferences", "-"))))
        cells.append(_status(run.verdict) if run.verdict else "no checks")
        rows.append(cells)
    heads = ["run", "SoC", "status", *(label for _, label, _, _ in METRICS), "inferences",
             "checks"]
    return "<section><h2>Runs against the float model</h2>" + _table(
        "each figure with its check's bound (a figure that misses its bound is marked)",
        heads, rows, "runs") + "</section>"


def _decodes(runs: Sequence[RunFigures]) -> list[str]:
    """The per-step SQNR of each decode run that published its figures."""
    found = []
    for run in runs:
        decode = ((run.report or {}).get("metrics") or {}).get("decode")
        if isinstance(decode, dict):
            found.append(decode_section(run.name, decode))
    return found


def _metric(value: Any, bound: float | None, side: str) -> str:
    shown = "exact" if value is None and side == "min" else (
        "-" if value is None else f"{value:.4g}")
    if bound is None:
        return escape(shown)
    missed = value is not None and (value < bound if side == "min" else value > bound)
    return (f"<span class=\"{'miss' if missed else 'meets'}\">{escape(shown)}</span> "
            f"<small>({side} {bound:g})</small>")


def _fleet(runs: Sequence[RunFigures]) -> str:
    rows = []
    for run in runs:
        if run.report is None:
            continue
        loads = ("online prepare (slow init): " + str(run.report.get("warning", ""))
                 if run.report.get("online_prepare") else str(run.report.get("record", "")))
        loads += _subnets(run.report)
        seen = run.report.get("seen") or []
        why = "\n".join(f"{s.get('record')}: {s.get('rejected')}" for s in seen
                        if isinstance(s, dict))
        rows.append([escape(run.soc), escape(run.name), escape(loads),
                     f"<span title=\"{escape(why)}\">{len(seen)} rejected</span>"])
    if not rows:
        return ""
    return "<section><h2>Fleet</h2>" + _table(
        "the record each device of a run loads (hover: the records it rejected, and why)",
        ["device", "run", "loads", "other records"], rows, "fleet") + "</section>"


def _subnets(report: dict[str, Any]) -> str:
    """A split graph's subnets (udo_build.compiler.partition), after the records it loads."""
    parts = report.get("partition")
    if not isinstance(parts, list):
        return ""
    shown = " | ".join(f"{p.get('runtime')} {p.get('nodes')}" for p in parts)
    cuts = [", ".join(a.get("outputs") or ()) for a, b in zip(parts, parts[1:], strict=False)
            if a.get("runtime") == b.get("runtime")]  # parts (udo_build.compiler.parts)
    tail = f"; boundaries of parts: {' | '.join(cuts)}" if cuts else ""
    return (f" ({len(parts)} subnets: {shown} nodes; {report.get('switches')} runtime "
            f"switches{tail})")


def _status(status: str) -> str:
    return f"<span class=\"st st-{escape(status.lower())}\">{escape(status)}</span>"


def _short(text: str, limit: int = 90) -> str:
    return text if len(text) <= limit else text[:limit - 1] + "\u2026"


def _bytes(size: int) -> str:
    for unit in ("B", "KiB", "MiB"):
        if size < 1024 or unit == "MiB":
            return f"{size} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024  # type: ignore[assignment]
    return ""


def _dims(dims: Any) -> str:
    if not dims:
        return "the model's"
    return ", ".join(f"{k}={'x'.join(str(d) for d in v)}" for k, v in sorted(dims.items()))


def _outputs(outputs: Any) -> str:
    if isinstance(outputs, dict):
        return "; ".join(f"{k}: {', '.join(str(v) for v in vals)}"
                         for k, vals in sorted(outputs.items()))
    return str(outputs or "default")


# collects script errors in the page itself (the headless browser test reads them back)
ERROR_HOOK = ("<script>window.onerror=function(m,s,l){var d=document.documentElement;"
              "d.setAttribute('data-errors',(d.getAttribute('data-errors')||'')+m+' @'+l+';');"
              "};</script>")

SCRIPT = """
document.querySelectorAll('table.sortable th').forEach(function (th) {
  th.title = 'sort'; th.addEventListener('click', function () {
    var table = th.closest('table'), body = table.tBodies[0];
    var i = Array.prototype.indexOf.call(th.parentNode.children, th);
    var up = th.getAttribute('data-up') !== '1'; th.setAttribute('data-up', up ? '1' : '0');
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = a.cells[i].textContent, y = b.cells[i].textContent;
      var nx = parseFloat(x), ny = parseFloat(y);
      var c = (!isNaN(nx) && !isNaN(ny)) ? nx - ny : x.localeCompare(y);
      return up ? c : -c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
  });
});
document.documentElement.setAttribute('data-ready', '1');
"""

CSS = """
body{font:14px/1.4 system-ui,-apple-system,'Segoe UI',sans-serif;margin:24px;color:#1d2430;
background:#fff}
h1{font-size:22px;margin:0 0 8px}
h2{font-size:17px;margin:28px 0 8px;border-bottom:2px solid #dde3ea}
table{border-collapse:collapse;margin:6px 0 12px}caption{text-align:left;color:#556;padding:4px 0}
th,td{border:1px solid #dde3ea;padding:3px 8px;text-align:left;vertical-align:top}
thead th{background:#eef2f7;cursor:pointer}table.facts th{background:#f6f8fb;font-weight:600}
tbody tr:nth-child(even){background:#fafbfd}code{font-size:12px}
.verdict{display:inline-block;padding:2px 10px;border-radius:4px;color:#fff;font-weight:700}
.verdict.ok{background:#2e7d32}.verdict.failed{background:#c62828}
.st{padding:0 6px;border-radius:3px;background:#e0e0e0}.st-built{background:#c8e6c9}
.st-cached{background:#bbdefb}.st-failed{background:#ffcdd2}.st-skipped{background:#eeeeee}
.st-passed{background:#c8e6c9}.shared{color:#6a1b9a;font-weight:600}
.miss{color:#c62828;font-weight:700}.meets{color:#2e7d32;font-weight:600}
svg text{font:11px system-ui,sans-serif;fill:#1d2430}
"""
