"""The report page's section of each generate run (kinds/generate.py): what it generated, the
record's pick against the float model's token at every step with the logits' SQNR, and the
tokens per second of both chains.

    sections = generation_sections(runs, actions)   # report_page.render adds them

The figures come from the run's report.json (`metrics.generate`, `metrics.decode`); the speeds
from the run step's description (an artifact holds no time: `Speed.describe` of
udo_build.runtime.generate writes them there), measured when the step ran, which for a cached
step was an earlier build. Every string is escaped. Imports nothing heavy.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from .report_chart import escape

# as udo_build.runtime.generate.Speed.describe writes them, after the chain's name
SPEED = re.compile(r"\b(record|float) prefill (\S+) tok/s, decode (\S+) tok/s")


def generation_sections(runs: Sequence[Any], actions: Sequence[Any]) -> list[str]:
    """One section per generate run that published its figures (`runs`: the page's
    RunFigures; `actions`: the build's outcomes, for the run steps' descriptions)."""
    described = {a.id: a for a in actions if a.kind == "run"}
    found = []
    for run in runs:
        metrics = (run.report or {}).get("metrics") or {}
        generated = metrics.get("generate")
        if not isinstance(generated, dict):
            continue
        action = described.get(f"run:{run.name}")
        speeds = speeds_of(getattr(action, "description", None) or "")
        cached = getattr(action, "status", "") == "cached"
        found.append(section(run.name, generated, metrics.get("decode") or {}, speeds, cached))
    return found


def speeds_of(description: str) -> dict[str, tuple[str, str]]:
    """(prefill, decode) tokens per second by chain, as the description says them."""
    return {m.group(1): (m.group(2), m.group(3)) for m in SPEED.finditer(description)}


def section(name: str, generated: Mapping[str, Any], decode: Mapping[str, Any],
            speeds: Mapping[str, tuple[str, str]], cached: bool) -> str:
    """The section of one generate run (a pure function of its arguments)."""
    return (f"<section><h2>Generation: {escape(name)}</h2>" + _facts(generated, speeds, cached)
            + _steps(name, generated, decode) + "</section>")


def _facts(g: Mapping[str, Any], speeds: Mapping[str, tuple[str, str]], cached: bool) -> str:
    match = g.get("token_match")
    first = g.get("first_mismatch")
    facts = [("prompt", f"{g.get('prompt_tokens')} tokens in {g.get('prompt_steps')} step(s) "
                        f"of the AR-{g.get('prefill')} graph"),
             ("new tokens", f"{g.get('new_tokens')} (greedy; the record is fed the float "
                            "model's tokens)"),
             ("token match", "-" if match is None else f"{match:.0%}"),
             ("first mismatch", "none" if first is None else f"step {first} (a free-running "
                                                               "record generates the same "
                                                               "tokens before it)")]
    when = " (measured when the step ran: an earlier build)" if cached else ""
    for chain in ("record", "float"):
        if chain in speeds:
            prefill, decode = speeds[chain]
            facts.append((f"{chain} tokens/s", f"prefill {prefill}, decode {decode}{when}"))
    rows = "".join(f"<tr><th>{escape(k)}</th><td>{escape(str(v))}</td></tr>" for k, v in facts)
    return f"<table class=\"facts\">{rows}</table>"


def _steps(name: str, g: Mapping[str, Any], decode: Mapping[str, Any]) -> str:
    tokens, picks = list(g.get("tokens") or []), list(g.get("record_tokens") or [])
    matches = list(g.get("match") or [])
    sqnrs = [s.get("logits") if isinstance(s, dict) else None
             for s in decode.get("sqnr_db") or []]
    rows = []
    for t, token in enumerate(tokens):
        pick = picks[t] if t < len(picks) else "-"
        ok = matches[t] if t < len(matches) else None
        db = sqnrs[t] if t < len(sqnrs) else None
        mark = "meets" if ok else "miss"
        rows.append(f"<tr><td>{t}</td><td>{escape(str(token))}</td><td><span class=\"{mark}\">"
                    f"{escape(str(pick))}</span></td><td>{'yes' if ok else 'NO'}</td><td>"
                    f"{'exact' if db is None else f'{db:.2f}'}</td></tr>")
    return (f"<table id=\"generated-{escape(name)}\" class=\"sortable\"><caption>each step's "
            "greedy token: the float model's, the record's pick, and the SQNR of the record's "
            "logits against the float model's</caption><thead><tr><th>step</th><th>float "
            "token</th><th>record token</th><th>match</th><th>logits SQNR dB</th></tr></thead>"
            f"<tbody>{''.join(rows)}</tbody></table>")
