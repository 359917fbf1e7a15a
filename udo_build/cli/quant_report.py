"""`udo-build quant-report BUNDLE --input-list LIST [--png OUT.png]`: per-layer SQNR of a
quantized bundle's integer path against its float model, as a table and a PNG plot. The inputs
spread over the machine's cores (udo_build.runtime.pool); the figures do not depend on how many."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from ..errors import display_path
from .common import spelled
from .reporter import Reporter


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("bundle", metavar="BUNDLE", help="a quantized bundle (.udb)")
    parser.add_argument(*spelled("--input-list"), metavar="LIST", required=True,
                        help="the inputs to measure on (the calibration list, or held-out ones)")
    parser.add_argument("--kernels", metavar="FILE", action="append", default=[],
                        help="numpy kernels of the bundle's custom ops; repeatable")
    parser.add_argument("--png", metavar="OUT.png", help="also plot the SQNR per layer")


def run(args: argparse.Namespace, rep: Reporter) -> int:
    from ..ir.qmodel import from_bundle
    from ..kernels.load import packages_for
    from ..model.input_list import feeds, parse_input_list
    from ..model.op_check import load_checked_bundle
    from ..quant.report import layer_sqnr, plot, require_plotting
    from ..runtime.pool import available_cores, labels

    if args.png:
        require_plotting()
    bundle = load_checked_bundle(args.bundle)
    qmodel = from_bundle(bundle, args.bundle)
    packages = packages_for(bundle, [Path(f) for f in args.kernels])
    listing = parse_input_list(Path(args.input_list))
    lines = [inference[0].line if inference else 0 for inference in listing.inferences]
    layers = layer_sqnr(qmodel, packages, feeds(listing, list(qmodel.model.graph.inputs)),
                        cores=available_cores(), count=len(listing.inferences),
                        label=labels("input", listing.file, lines))
    if args.png:
        plot(layers, Path(args.png), f"{qmodel.model.graph.name}: SQNR per layer")
    if rep.mode == "json":
        rep.emit({"ok": True, "bundle": display_path(args.bundle),
                  "inferences": len(listing.inferences),
                  "layers": [layer.to_json() for layer in layers],
                  "png": display_path(args.png) if args.png else None})
        return 0
    rep.table(f"SQNR per layer over {len(listing.inferences)} input(s)",
              ["#", "node", "op", "tensor", "SQNR dB"],
              [[layer.index, layer.node, layer.op, layer.tensor, _db(layer.sqnr_db)]
               for layer in layers])
    worst = min(layers, key=lambda layer: layer.sqnr_db, default=None)
    if worst is not None:
        rep.line(f"worst: {worst.node} ({worst.op}) at {_db(worst.sqnr_db)} dB")
    if args.png:
        rep.line(f"plot: {display_path(args.png)}")
    return 0


def _db(value: float) -> str:
    return "exact" if math.isinf(value) else f"{value:.1f}"
