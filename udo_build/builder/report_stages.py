"""The report page's table of the per-layer SQNR before and after each quantization algorithm:
the `stages` of `quant/layers.json` when the recipe lists `quantize.algorithms`
(udo_build.quant.stages), one column per stage and the change from the first to the last."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

from .report_chart import LayerRow, escape

LAYERS = "quant/layers.json"


class Stage(NamedTuple):
    """One quantization stage of a report: its step, whether CLE ran before it, per-layer SQNR
    (read by field: a named tuple, cheap to define for the many pages that have no stages)."""

    step: str  # quantize, adaround, bias_correction
    equalized: bool  # CLE ran before it
    sqnr_db: tuple[float | None, ...]  # per layer, None: exact


def read_stages(out: Path | None) -> list[Stage] | None:
    """The stages in `out`'s layers document; None when there are none or it is not one."""
    if out is None:
        return None
    try:
        found = json.loads((out / LAYERS).read_text(encoding="utf-8"))
        stages = [Stage(str(s["step"]), bool(s.get("equalized", False)),
                        tuple(None if v is None else float(v) for v in s["sqnr_db"]))
                  for s in found["stages"]]
    except (OSError, ValueError, TypeError, KeyError):
        return None
    return stages or None


def stages_section(stages: Sequence[Stage], layers: Sequence[LayerRow]) -> str:
    """A table: each layer's SQNR after each stage, and the gain from the first to the last."""
    if any(len(s.sqnr_db) != len(layers) for s in stages):
        return ""
    heads = "".join(f"<th>{escape(_name(s))} dB</th>" for s in stages)
    rows = []
    for i, layer in enumerate(layers):
        cells = "".join(f"<td>{_db(s.sqnr_db[i])}</td>" for s in stages)
        rows.append(f"<tr><td>{layer.number}</td><td>{escape(layer.node)}</td>{cells}"
                    f"<td>{_gain(stages[0].sqnr_db[i], stages[-1].sqnr_db[i])}</td></tr>")
    return ("<section><h2>SQNR per layer, stage by stage</h2><table id=\"stages\" "
            "class=\"sortable\"><caption>after quantizing and after each algorithm of "
            "quantize.algorithms, in the order they ran</caption><thead><tr><th>#</th>"
            f"<th>node</th>{heads}<th>gain dB</th></tr></thead><tbody>" + "".join(rows) +
            "</tbody></table></section>")


def _name(stage: Stage) -> str:
    return "quantize after CLE" if stage.equalized else stage.step.replace("_", " ")


def _db(value: float | None) -> str:
    return "exact" if value is None else f"{value:.2f}"


def _gain(first: float | None, last: float | None) -> str:
    return "" if first is None or last is None else f"{last - first:+.2f}"
