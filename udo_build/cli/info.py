"""`udo-build info BUNDLE`: what a bundle holds (layers, inputs, parameters, MACs, UDOs,
cache records), like the vendor's dlc-info; `udo-build info RECORD`: one cache record."""

from __future__ import annotations

import argparse
import json

from .reporter import Reporter


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("bundle", metavar="BUNDLE",
                        help="a bundle (.udb), or a cache record (.udr)")


def run(args: argparse.Namespace, rep: Reporter) -> int:
    from ..ir.bundle import load_bundle
    from ..model.info import describe
    from .prepare import is_record, show_record

    if is_record(args.bundle):
        return show_record(args.bundle, rep)
    info = describe(load_bundle(args.bundle))
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
    return 0


def _dims(dims: list[object] | None) -> str:
    return "?" if dims is None else "x".join(str(d) for d in dims)


def _params(params: dict[str, object]) -> str:
    text = ", ".join(f"{k}={json.dumps(v, separators=(',', ':'))}" for k, v in params.items())
    return text if len(text) <= 60 else text[:57] + "..."
