"""The report page's section on the C++ op bodies against their numpy kernels: what the
`native-check` step published (`native/check.json` in the output folder: per op the nodes, calls,
elements compared, the largest difference and the element nearest to or past its bound), or,
when the step failed, its message (the op, the input and the worst element)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from .report_chart import escape

COMPARISON = "native/check.json"  # in the output folder, published by the native-check step


class NativeFigures(NamedTuple):
    status: str  # the native-check action's
    reason: str  # why it failed (its message), or ""
    comparison: dict[str, Any] | None  # what it published, None when nothing


def read_native(actions: Sequence[Any], out: Path | None) -> NativeFigures | None:
    """The native check of a build (None when it has none)."""
    action = next((a for a in actions if a.kind == "native-check"), None)
    if action is None:
        return None
    found = None
    if out is not None and action.status in ("built", "cached"):
        try:
            found = json.loads((out / COMPARISON).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            found = None
    return NativeFigures(action.status, _why(action), found if isinstance(found, dict) else None)


def _why(action: Any) -> str:
    """The failed step's message (session.ActionOutcome.problems), else its reason."""
    problems = action.problems() if callable(getattr(action, "problems", None)) else []
    return "; ".join(str(p) for p in problems) or action.reason or ""


def native_section(figures: NativeFigures | None) -> str:
    if figures is None:
        return ""
    head = "<section><h2>C++ op bodies against the numpy kernels</h2>"
    if figures.comparison is None:
        what = escape(figures.reason or f"the check is {figures.status}")
        return f"{head}<p class=\"verdict failed\">{what}</p></section>"
    doc = figures.comparison
    tolerance = doc.get("tolerance") or {}
    rows = [_op_row(op) for op in doc.get("ops") or () if isinstance(op, dict)]
    rows += [[escape(str(u.get("op", ""))), "-", "-", "-", "-", "-", "-", "-",
              escape(f"not checked: {u.get('why', '')}")]
             for u in doc.get("unchecked") or () if isinstance(u, dict)]
    caption = (f"over {doc.get('inputs', '-')} calibration inputs; an element fails past "
               f"{tolerance.get('atol', '-')} + {tolerance.get('rtol', '-')} x |numpy|")
    heads = "".join(f"<th>{h}</th>" for h in ("op", "nodes", "calls", "elements",
                                               "max abs error", "worst at", "C++", "numpy",
                                               "verdict"))
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return (f"{head}<table id=\"native\" class=\"sortable\"><caption>{escape(caption)}"
            f"</caption><thead><tr>{heads}</tr></thead><tbody>{body}</tbody></table></section>")


def _op_row(op: dict[str, Any]) -> list[str]:
    worst = op.get("worst") or {}
    index = ", ".join(str(i) for i in worst.get("index") or ())
    where = (f"{worst.get('node', '')} {worst.get('output', '')}[{index}], "
             f"input {worst.get('input', '')}" if worst else "-")
    verdict = "passed" if op.get("passed") else "FAILED"
    return [escape(str(op.get("op", ""))), escape(", ".join(map(str, op.get("nodes") or ()))),
            escape(str(op.get("calls", "-"))), escape(str(op.get("elements", "-"))),
            escape(str(op.get("max_abs_error", "-"))), escape(where),
            escape(str(worst.get("cpp", "-"))), escape(str(worst.get("numpy", "-"))),
            f"<span class=\"st st-{verdict.lower()}\">{verdict}</span>"]
