"""`udo-build run BUNDLE --input-list LIST --output-dir DIR [--outputs t1,t2]`: run a bundle on
the emulator's float runtime and write the outputs as the vendor's net-run does
(udo_build.runtime.results): DIR/Result_<i>/<tensor>.raw (float32, tensor names with / and :
replaced by _), plus a .npy beside each raw file so the shape travels with the data."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..errors import UserError, display_path
from .reporter import Reporter


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("bundle", metavar="BUNDLE", help="a bundle (.udb)")
    parser.add_argument("--input-list", metavar="LIST", required=True,
                        help="an SNPE input list (one line per inference)")
    parser.add_argument("--output-dir", metavar="DIR", required=True,
                        help="where Result_<i>/ folders go")
    parser.add_argument("--outputs", metavar="T1,T2",
                        help="tensors to write (default: the list's #/%% lines, else the "
                             "model outputs)")
    parser.add_argument("--kernels", metavar="FILE", action="append", default=[],
                        help="a numpy kernels file for the bundle's custom ops; repeatable")


def run(args: argparse.Namespace, rep: Reporter) -> int:
    from ..kernels.load import packages_for
    from ..model.input_list import feeds, parse_input_list
    from ..model.op_check import load_checked_bundle
    from ..runtime.float_session import Session
    from ..runtime.results import write_result

    bundle = load_checked_bundle(args.bundle)
    graph = bundle.model.graph
    listing = parse_input_list(Path(args.input_list))
    outputs = requested_outputs(graph, args.outputs, listing)
    session = Session(bundle.model, packages_for(bundle, [Path(f) for f in args.kernels]))
    out_dir = Path(args.output_dir)
    count = 0
    for i, feed in enumerate(feeds(listing, list(graph.inputs))):
        write_result(out_dir / f"Result_{i}", session.run(feed, outputs))
        count += 1
    if rep.mode == "json":
        rep.emit({"ok": True, "inferences": count, "outputs": outputs,
                  "output_dir": display_path(out_dir)})
    else:
        rep.line(f"ran {count} inference(s); wrote {', '.join(outputs)} to "
                 f"{display_path(out_dir)}/Result_*/")
    return 0


def requested_outputs(graph: Any, given: str | None, listing: Any) -> list[str]:
    """--outputs, else the list's %tensor and #layer lines, else the graph outputs."""
    producers = {n.name: n for n in graph.nodes}
    known = {o for n in graph.nodes for o in n.outputs} | {t.name for t in graph.inputs}
    names = [t for t in (given or "").split(",") if t] or list(listing.output_tensors)
    for layer in listing.output_layers if not given else ():
        if layer not in producers:
            raise UserError(f"output layer '{layer}' is not a layer of the model",
                            file=listing.file, hint="layers: " + ", ".join(list(producers)[:20]))
        names.extend(producers[layer].outputs)
    for name in names:
        if name not in known:
            raise UserError(f"'{name}' is not a tensor of the model",
                            hint="see 'udo-build info BUNDLE' for the tensor names")
    return list(dict.fromkeys(names)) or [t.name for t in graph.outputs]
