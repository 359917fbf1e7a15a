"""The report page's section on mixed precision (`quantize.target`): what the search published
(`quant/mixed.json`, udo_build.quant.mixed_search.document): the target, the SQNR the chosen
widths reach over the held-out inputs against the quantize settings' widths everywhere (the
reference), the record's constant bytes and the activations' bytes of both, and each unit
(activation or weight) with its width and its sensitivity: the output SQNR with that unit
alone at its low width, every other at its high width (the highest)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from .report_chart import escape

MIXED = "quant/mixed.json"  # in the output folder, published by the mixed-search step


def read_mixed(out: Path | None) -> dict[str, Any] | None:
    """The search's document in `out`; None when there is none or it is not one."""
    if out is None:
        return None
    try:
        found = json.loads((out / MIXED).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    ok = isinstance(found, dict) and all(isinstance(found.get(k), dict) for k in
                                          ("reference", "chosen", "activations", "weights"))
    return found if ok and isinstance(found.get("units"), list) else None


def mixed_section(doc: dict[str, Any] | None) -> str:
    if doc is None:
        return ""
    try:
        return _section(doc)
    except (TypeError, ValueError, KeyError, AttributeError):  # not the search's document
        return ""


def _section(doc: dict[str, Any]) -> str:
    ref, chosen = doc["reference"], doc["chosen"]
    acts, weights = doc["activations"], doc["weights"]
    facts = [
        ("target", f"{float(doc['target_db']):g} dB over {int(doc['inputs'])} held-out inputs"),
        ("SQNR reached", f"{_db(chosen['sqnr_db'])} (predicted {_db(chosen['predicted_db'])}; "
                         f"quantize settings' widths everywhere: {_db(ref['sqnr_db'])}; every "
                         f"unit at its high width: {_db(doc['highest']['sqnr_db'])})"),
        ("activations", _census(acts)), ("weights", _census(weights)),
        ("record constants", _versus(int(chosen["record_bytes"]), int(ref["record_bytes"]))),
        ("activation bytes", _versus(int(chosen["activation_bytes"]),
                                     int(ref["activation_bytes"]))),
    ]
    table = "".join(f"<tr><th>{escape(k)}</th><td>{escape(v)}</td></tr>" for k, v in facts)
    rows = "".join(_unit_row(u) for u in doc["units"] if isinstance(u, dict))
    heads = "".join(f"<th>{h}</th>" for h in ("#", "node", "op", "kind", "tensor", "elements",
                                               "bits", "quantize's bits",
                                               "SQNR alone at its low width dB"))
    return ("<section><h2>Mixed precision</h2>"
            f"<table class=\"facts\">{table}</table><table id=\"mixed\" class=\"sortable\">"
            "<caption>each unit's width, and the output SQNR with it alone at its low width "
            f"(every other at its high width)</caption><thead><tr>{heads}"
            f"</tr></thead><tbody>{rows}</tbody></table></section>")


def _unit_row(unit: dict[str, Any]) -> str:
    bits, reference = int(unit["bits"]), int(unit["reference_bits"])
    changed = " class=\"changed\"" if bits != reference else ""
    index = int(unit["index"])
    cells = ["input" if index < 0 else str(index), escape(str(unit["node"]) or "-"),
             escape(str(unit["op"]) or "-"), escape(str(unit["kind"])), escape(str(unit["name"])),
             str(int(unit["elements"])), f"<b>{bits}</b>" if changed else str(bits),
             str(reference), _db(unit["low_alone_sqnr_db"])]
    return f"<tr{changed}>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


def _db(value: Any) -> str:
    return "exact" if value is None else f"{float(value):.2f} dB"


def _census(found: dict[str, Any]) -> str:
    total = int(found["units"])
    parts = [f"{int(n)} at {int(bits)} bits" + (f" ({int(n) / total:.0%})" if total else "")
             for bits, n in found["bits"].items()]
    return f"{total}: " + ", ".join(parts) if parts else "none"


def _versus(chosen: int, reference: int) -> str:
    ratio = f" ({chosen / reference:.2f}x)" if reference else ""
    return f"{chosen} bytes, against {reference} at quantize's widths{ratio}"
