"""The charts of the build report page: the per-layer SQNR (an inline SVG bar chart and its
table) and a decode run's SQNR per step (a line per output and its table).

Bars are numbered as the table's rows (1, 2, ...: the x axis and the table agree), custom-op
layers have their own colour, a legend says which is which, and each bar's <title> names its
layer (shown on hover). Layers whose integer path is exact have no finite SQNR: they are drawn
to the top of the axis, hatched, and say "exact".
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NamedTuple

# html.escape's replacements (quote=True), without importing the html package (its entity
# table is loaded with it, and every build that writes the report page would pay for it)
_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#x27;"})


def escape(text: str) -> str:
    """`text` with &, <, >, " and ' as HTML character references (as html.escape)."""
    return text.translate(_ESCAPES)

WIDTH, HEIGHT = 1180, 320
LEFT, RIGHT, TOP, BOTTOM = 56, 12, 34, 40
MAX_TICKS = 40  # numbered bars on the x axis at most (every k-th beyond)
COLORS = {"default": "#4a78b5", "custom": "#e07b00", "exact": "#9e9e9e"}


class LayerRow(NamedTuple):
    number: int  # 1-based, as in the table and on the x axis
    node: str
    op: str
    tensor: str
    sqnr_db: float | None  # None: exact
    custom: bool  # made by a custom op (an op package's, not the default's)


def layer_rows(layers: Iterable[Mapping[str, Any]]) -> list[LayerRow]:
    """Rows of the per-layer figures as `quant-report --json` and the quantize step's
    `quant/layers.json` give them (LayerSqnr.to_json): `custom` says whether a custom op made
    the layer (without it, a custom op is the one named `<package>::<op>`)."""
    rows = []
    for number, layer in enumerate(layers, 1):
        op = str(layer.get("op", ""))
        sqnr = layer.get("sqnr_db")
        rows.append(LayerRow(number, str(layer.get("node", "")), op,
                             str(layer.get("tensor", "")),
                             None if sqnr is None else float(sqnr),
                             bool(layer.get("custom", "::" in op))))
    return rows


def layer_section(layers: Sequence[LayerRow]) -> str:
    """The chart and the table of the layers, as one page section."""
    mark = " <b class=\"custom\">custom</b>"
    table = "".join(
        f"<tr><td>{r.number}</td><td>{escape(r.node)}</td><td>{escape(r.op)}"
        f"{mark if r.custom else ''}</td>"
        f"<td>{escape(r.tensor)}</td><td>{_db(r.sqnr_db)}</td></tr>" for r in layers)
    worst = min((r for r in layers if r.sqnr_db is not None), key=lambda r: r.sqnr_db or 0.0,
                default=None)
    note = "" if worst is None else (f"<p>worst: #{worst.number} {escape(worst.node)} "
                                     f"({escape(worst.op)}) at {_db(worst.sqnr_db)} dB</p>")
    return ("<section><h2>SQNR per layer</h2>" + chart(layers) + note +
            "<table id=\"layers\" class=\"sortable\"><caption>layers by number (as on the "
            "chart's x axis)</caption><thead><tr><th>#</th><th>node</th><th>op</th>"
            "<th>tensor</th><th>SQNR dB</th></tr></thead><tbody>" + table +
            "</tbody></table></section>")


def chart(layers: Sequence[LayerRow]) -> str:
    """The SVG bar chart of the layers' SQNR (dB)."""
    finite = [r.sqnr_db for r in layers if r.sqnr_db is not None]
    top = _nice_top(max(finite, default=10.0))
    bottom = min(0.0, math.floor(min(finite, default=0.0) / 10) * 10)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    step = plot_w / max(1, len(layers))

    def y(value: float) -> float:
        return TOP + plot_h * (top - value) / (top - bottom)

    parts = [f"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\"{HEIGHT}\" "
             f"viewBox=\"0 0 {WIDTH} {HEIGHT}\" role=\"img\" aria-label=\"SQNR per layer\">",
             "<defs><pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\""
             " patternTransform=\"rotate(45)\"><rect width=\"6\" height=\"6\" fill=\"#e0e0e0\"/>"
             f"<line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"{COLORS['exact']}\" "
             "stroke-width=\"3\"/></pattern></defs>"]
    parts += _y_axis(top, bottom, y)
    for i, row in enumerate(layers):
        parts.append(_bar(row, LEFT + i * step, step, y, top, bottom))
    parts += _x_axis(layers, step, y(bottom))
    parts += _legend()
    parts.append("</svg>")
    return "".join(parts)


def _bar(row: LayerRow, x: float, step: float, y: Any, top: float, bottom: float) -> str:
    value = top if row.sqnr_db is None else row.sqnr_db
    y0, y1 = y(max(0.0, bottom)), y(value)
    fill = ("url(#hatch)" if row.sqnr_db is None
            else COLORS["custom"] if row.custom else COLORS["default"])
    width = max(1.0, step * 0.8)
    tip = (f"#{row.number} {row.node} ({row.op}) {row.tensor}: "
           f"{'exact' if row.sqnr_db is None else f'{row.sqnr_db:.1f} dB'}")
    return (f"<rect class=\"bar{' custom' if row.custom else ''}\" x=\"{x + step * 0.1:.1f}\" "
            f"y=\"{min(y0, y1):.1f}\" width=\"{width:.1f}\" height=\"{abs(y0 - y1):.1f}\" "
            f"fill=\"{fill}\"><title>{escape(tip)}</title></rect>")


def _y_axis(top: float, bottom: float, y: Any) -> list[str]:
    parts = [f"<text x=\"14\" y=\"{TOP - 12}\">SQNR (dB)</text>"]
    tick = 10.0 if top - bottom <= 120 else 20.0
    value = bottom
    while value <= top + 1e-9:
        py = y(value)
        parts.append(f"<line x1=\"{LEFT}\" x2=\"{WIDTH - RIGHT}\" y1=\"{py:.1f}\" y2=\"{py:.1f}\""
                     f" stroke=\"#e3e7ed\"/><text x=\"{LEFT - 6}\" y=\"{py + 4:.1f}\" "
                     f"text-anchor=\"end\">{value:g}</text>")
        value += tick
    return parts


def _x_axis(layers: Sequence[LayerRow], step: float, base: float) -> list[str]:
    every = max(1, math.ceil(len(layers) / MAX_TICKS))
    parts = [f"<line x1=\"{LEFT}\" x2=\"{WIDTH - RIGHT}\" y1=\"{base:.1f}\" y2=\"{base:.1f}\" "
             "stroke=\"#556\"/>"]
    for i, row in enumerate(layers):
        if row.number % every and row.number != 1:
            continue
        x = LEFT + (i + 0.5) * step
        parts.append(f"<text x=\"{x:.1f}\" y=\"{base + 14:.1f}\" text-anchor=\"middle\">"
                     f"{row.number}</text>")
    parts.append(f"<text x=\"{LEFT + (WIDTH - LEFT - RIGHT) / 2:.0f}\" y=\"{HEIGHT - 6}\" "
                 "text-anchor=\"middle\">layer # (as in the table below)</text>")
    return parts


def _legend() -> list[str]:
    items = [("default op", COLORS["default"]), ("custom op", COLORS["custom"]),
             ("exact (no error)", "url(#hatch)")]
    parts = ["<g class=\"legend\">"]
    x = WIDTH - RIGHT - 420
    for label, fill in items:
        parts.append(f"<rect x=\"{x}\" y=\"8\" width=\"12\" height=\"12\" fill=\"{fill}\"/>"
                     f"<text x=\"{x + 16}\" y=\"18\">{escape(label)}</text>")
        x += 135
    parts.append("</g>")
    return parts


def _nice_top(value: float) -> float:
    return max(10.0, math.ceil(value / 10) * 10 + (10 if value % 10 == 0 else 0))


def _db(value: float | None) -> str:
    return "exact" if value is None else f"{value:.1f}"


# -- the per-step SQNR of decode runs --------------------------------------------------------------

LINES = ("#4a78b5", "#e07b00", "#2e8b57", "#8e44ad", "#c0392b", "#555555")
STEP_HEIGHT = 240


def decode_section(name: str, decode: Mapping[str, Any]) -> str:
    """A decode run's per-step SQNR (udo_build.runtime.metrics.decode_metrics): a line per
    output and a table, one row per step."""
    steps = [dict(s) for s in decode.get("sqnr_db") or []]
    names = sorted({n for s in steps for n in s})
    if not steps or not names:
        return ""
    rows = "".join(f"<tr><td>{t}</td>" + "".join(f"<td>{_db(s.get(n))}</td>" for n in names)
                   + "</tr>" for t, s in enumerate(steps))
    drift = decode.get("drift_db")
    note = (f"<p>worst step: {_db(decode.get('min_sqnr_db'))} dB "
            f"(step {escape(str((decode.get('min_at') or ['-'])[0]))}); drift "
            f"{'-' if drift is None else f'{drift:.2f}'} dB ({escape(str(decode.get('drift_of')))}"
            f": the mean of the first {decode.get('window')} steps less that of the last)</p>")
    heads = "".join(f"<th>{escape(n)}</th>" for n in names)
    return (f"<section><h2>SQNR per decode step: {escape(name)}</h2>"
            + step_chart(name, steps, names) + note
            + f"<table id=\"steps-{escape(name)}\" class=\"sortable\"><caption>each step's "
            f"outputs against the float model's own chain</caption><thead><tr><th>step</th>"
            f"{heads}</tr></thead><tbody>{rows}</tbody></table></section>")


def step_chart(name: str, steps: Sequence[Mapping[str, float | None]],
               names: Sequence[str]) -> str:
    """The SVG line chart: x the step, y the SQNR (dB), a line per output (exact: the top)."""
    finite = [v for s in steps for v in s.values() if v is not None]
    top = _nice_top(max(finite, default=10.0))
    bottom = max(0.0, math.floor(min(finite, default=0.0) / 10) * 10 - 10)
    plot_w, plot_h = WIDTH - LEFT - RIGHT, STEP_HEIGHT - TOP - BOTTOM
    dx = plot_w / max(1, len(steps) - 1)

    def y(value: float) -> float:
        return TOP + plot_h * (top - value) / (top - bottom)

    parts = [f"<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{WIDTH}\" height=\""
             f"{STEP_HEIGHT}\" viewBox=\"0 0 {WIDTH} {STEP_HEIGHT}\" role=\"img\" "
             f"aria-label=\"SQNR per decode step of {escape(name)}\">"]
    parts += _y_axis(top, bottom, y)
    for i, output in enumerate(names):
        color = LINES[i % len(LINES)]
        points = " ".join(f"{LEFT + t * dx:.1f},{y(_or_top(s[output], top)):.1f}"
                          for t, s in enumerate(steps) if output in s)
        parts.append(f"<polyline class=\"step-line\" fill=\"none\" stroke=\"{color}\" "
                     f"stroke-width=\"2\" points=\"{points}\"><title>{escape(output)}</title>"
                     "</polyline>")
        parts.append(f"<rect x=\"{WIDTH - RIGHT - 160 * (len(names) - i)}\" y=\"8\" width=\"12\""
                     f" height=\"12\" fill=\"{color}\"/><text x=\""
                     f"{WIDTH - RIGHT - 160 * (len(names) - i) + 16}\" y=\"18\">"
                     f"{escape(output)}</text>")
    base = y(bottom)
    every = max(1, math.ceil(len(steps) / MAX_TICKS))
    parts += [f"<text x=\"{LEFT + t * dx:.1f}\" y=\"{base + 14:.1f}\" text-anchor=\"middle\">"
              f"{t}</text>" for t in range(0, len(steps), every)]
    parts.append(f"<text x=\"{LEFT + plot_w / 2:.0f}\" y=\"{STEP_HEIGHT - 6}\" "
                 "text-anchor=\"middle\">decode step</text></svg>")
    return "".join(parts)


def _or_top(value: float | None, top: float) -> float:
    return top if value is None else value
