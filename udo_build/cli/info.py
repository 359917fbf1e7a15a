"""`udo-build info BUNDLE`: what a bundle holds (layers, inputs, parameters, MACs, UDOs,
cache records, each tensor's encoding), like the vendor's dlc-info; `udo-build info RECORD`: one
cache record (its row of the "Cache Info" table, its key, sizes, memory plan, the passes that
ran and the rules that fired)."""

from __future__ import annotations

import argparse
import json
from typing import Any

from .reporter import Reporter


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("bundle", metavar="BUNDLE",
                        help="a bundle (.udb), or a cache record (.udr)")


def run(args: argparse.Namespace, rep: Reporter) -> int:
    from ..model.info import describe
    from ..model.op_check import load_checked_bundle
    if is_record(args.bundle):
        return show_record(args.bundle, rep)
    info = describe(load_checked_bundle(args.bundle))
    if rep.mode == "json":
        rep.emit({"ok": True, **info})
        return 0
    rep.heading(f"bundle {args.bundle}: model {info['name']}")
    rep.table("inputs", ["name", "dims", "type"],
              [[t["name"], _dims(t["dims"]), t["type"]] for t in info["inputs"]])
    rep.table("layers", ["id", "name", "type", "inputs", "outputs", "output dims",
                         "parameters"],
              [[layer["id"], layer["name"], layer["type"], layer["inputs"], layer["outputs"],
                " ".join(_dims(d) for d in layer["output_dims"]), _params(layer["parameters"])]
               for layer in info["layers"]])
    rep.facts([("total parameters", f"{info['total_parameters']:,}"),
               ("total MACs", f"{info['total_macs']:,}"),
               ("UDOs", ", ".join(info["udos"]) or "none"),
               ("cache records", str(len(info["records"])))])
    if info["records"]:
        rep.table("Cache Info", ["name", "identifier", "size", "level", "arch", "VTCM MB",
                                 "dims", "outputs"],
                  [[r.get(k) for k in ("name", "identifier", "size", "level", "arch", "vtcm_mb",
                                        "dims", "outputs")] for r in info["records"]])
    _partition(info["partition"], rep)
    if info["encodings"]:
        rep.table("encodings", ["tensor", "kind", "bits", "signed", "channels", "scale",
                                "offset", "range"],
                  [_encoding_cells(e) for e in info["encodings"]])
    return 0


def _partition(found: dict[str, object], rep: Reporter) -> None:
    """The subnets the runtimes run, as a table when the graph is split."""
    if "error" in found:
        rep.facts([("partition", str(found["error"]))])
        return
    subnets: list[dict[str, object]] = found["subnets"]  # type: ignore[assignment]
    if len(subnets) == 1 and subnets[0]["runtime"] == "HTP":
        rep.facts([("subnets", "1, HTP: every node runs on the HTP")])
        return
    rep.table(f"subnets ({found['switches']} runtime switches)",
              ["subnet", "runtime", "nodes", "first .. last", "inputs", "outputs"],
              [[s["index"], s["runtime"], len(s["nodes"]),  # type: ignore[arg-type]
                _span(s["nodes"]), ", ".join(s["inputs"]),  # type: ignore[arg-type]
                ", ".join(s["outputs"])] for s in subnets])  # type: ignore[arg-type]


def _span(nodes: list[str]) -> str:
    return nodes[0] if len(nodes) == 1 else f"{nodes[0]} .. {nodes[-1]}"


def _encoding_cells(row: dict[str, object]) -> list[object]:
    lo, hi = row["scale"]  # type: ignore[misc]
    low, high = row["range"]  # type: ignore[misc]
    return [row["tensor"], row["kind"], row["bitwidth"], "yes" if row["signed"] else "no",
            row["channels"], f"{lo:.6g}" if lo == hi else f"{lo:.6g}..{hi:.6g}",
            "varies" if row["offset"] is None else row["offset"], f"[{low:.6g}, {high:.6g}]"]


COLUMNS = ("name", "identifier", "size", "level", "arch", "vtcm_mb", "dims", "outputs")


def is_record(path: str) -> bool:
    from ..compiler.record import MAGIC

    try:
        with open(path, "rb") as fh:
            return fh.read(len(MAGIC)) == MAGIC
    except OSError:
        return False


def show_record(path: str, rep: Reporter) -> int:
    """A record's facts; of a multi-graph record (prepare.matrix.graphs), each graph's."""
    from ..compiler.record import read_header, record_keys
    from ..source import read_limited

    data = read_limited(path, 16 << 30, "cache record")
    graphs = [graph for graph, _ in record_keys(read_header(data, path)[0])]
    shown = [_record_facts(data, path, graph) for graph in graphs]
    if rep.mode == "json":
        rep.emit({"ok": True, **shown[0]} if graphs == [None] else
                 {"ok": True, "graphs": shown})
        return 0
    rep.heading(f"cache record {path}")
    for facts in shown:
        _show_graph(facts, rep)
    return 0


def _record_facts(data: bytes, path: str, graph: str | None) -> dict[str, Any]:
    from ..compiler import read_record, summary

    record = read_record(data, path, graph)
    body = record.body
    row = {**summary({"key": record.key}, len(data)), **({"graph": graph} if graph else {})}
    return {"record": row, "key": record.key, "sizes": record.sizes,
            "memory": body.get("memory"), "log": body.get("log"),
            "notes": body.get("notes", [])}


def _show_graph(facts: dict[str, Any], rep: Reporter) -> None:
    row, key, sizes = facts["record"], facts["key"], facts["sizes"]
    title = f"Cache Info (graph {row['graph']})" if "graph" in row else "Cache Info"
    rep.table(title, ["name", "identifier", "size", "level", "arch", "VTCM MB", "dims",
                      "outputs"], [[row[k] for k in COLUMNS]])
    memory = facts["memory"] or {}
    rep.facts([("precision", str(key.get("precision"))),
               ("compiler", str(key.get("compiler"))),
               ("ops", str(sizes.get("ops"))),
               ("constants", f"{sizes.get('constant_bytes', 0):,} bytes"),
               ("peak VTCM", f"{memory.get('peak_vtcm_bytes', 0):,} bytes"),
               ("tensors in TCM / DDR", f"{memory.get('tcm_tensors')} / "
                                        f"{memory.get('ddr_tensors')}")])
    rules = (facts["log"] or {}).get("rules", [])
    if rules:
        rep.table("rules fired", ["pass", "rule", "count"],
                  [[r["pass"], r["rule"], r["count"]] for r in rules])
    for note in facts["notes"]:
        rep.note(note)


def _dims(dims: list[object] | None) -> str:
    return "?" if dims is None else "x".join(str(d) for d in dims)


def _params(params: dict[str, object]) -> str:
    text = ", ".join(f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in params.items())
    return text if len(text) <= 60 else text[:57] + "..."
