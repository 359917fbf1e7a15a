"""`udo-build run BUNDLE --input-list LIST --output-dir DIR [--outputs t1,t2] [--soc SOC
[--precision int8|fp16] [--optimization-level L] [--input-dims NAME=D0,D1,...]]`: run a bundle
on the emulator and write the outputs as the vendor's net-run does (udo_build.runtime.results):
DIR/Result_<i>/<tensor>.raw (float32, tensor names with / and : replaced by _), plus a .npy
beside each raw file so the shape travels with the data.

Without --soc the float runtime runs the model itself (the reference). With --soc it runs like
a recipe's run entry: on the record a deployable bundle holds for that device (chosen by
udo_build.runtime.records.choose_record), else on one prepared here, in memory, for the device,
the level, the input dimensions and the precision (default: the bundle's, int8 when it is
quantized: the integer path; fp16 otherwise).

The inferences spread over the machine's cores (udo_build.runtime.pool): the files are the same
bits whatever the worker count."""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import Any

from ..errors import UserError, display_path
from .common import parse_dims, spelled
from .reporter import Reporter


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("bundle", metavar="BUNDLE", help="a bundle (.udb)")
    parser.add_argument(*spelled("--input-list"), metavar="LIST", required=True,
                        help="an SNPE input list (one line per inference)")
    parser.add_argument(*spelled("--output-dir"), metavar="DIR", required=True,
                        help="where Result_<i>/ folders go")
    parser.add_argument("--outputs", metavar="T1,T2",
                        help="tensors to write (default: the list's #/%% lines, else the "
                             "model outputs)")
    parser.add_argument("--kernels", metavar="FILE", action="append", default=[],
                        help="a numpy kernels file for the bundle's custom ops; repeatable")
    parser.add_argument("--soc", help="run as on this device (a SoC of the built-in table): on "
                                      "a record, as a recipe's run does")
    parser.add_argument("--precision", choices=("int8", "fp16"),
                        help="with --soc: the record's precision (default: the bundle's)")
    parser.add_argument("--optimization-level", type=int, choices=(1, 2, 3),
                        help="with --soc: the record's level (default 2)")
    parser.add_argument("--input-dims", metavar="NAME=D0,D1,...", action="append", default=[],
                        help="run at other input dimensions, e.g. input=4,3,224,224")


def run(args: argparse.Namespace, rep: Reporter) -> int:
    from ..atomic import Confined
    from ..kernels.load import packages_for
    from ..model.input_list import feeds, parse_input_list
    from ..model.op_check import load_checked_bundle
    from ..runtime.pool import Each, available_cores, labels, ordered
    from ..runtime.results import write_result

    if args.soc is None and (args.precision or args.optimization_level):
        raise UserError("--precision and --optimization-level choose a record: give --soc too",
                        hint="without --soc the float runtime runs the model itself")
    dims = parse_dims(args.input_dims)
    bundle = load_checked_bundle(args.bundle)
    graph = bundle.model.graph
    _check_dims(graph, bundle.model.weights, dims)
    listing = parse_input_list(Path(args.input_list))
    outputs = requested_outputs(graph, args.outputs, listing)
    packages = packages_for(bundle, [Path(f) for f in args.kernels])
    explicit = bool(args.outputs or listing.output_tensors or listing.output_layers)
    runner, where = _runner(args, bundle, dims, outputs if explicit else None, packages)
    out_dir = Path(args.output_dir)
    count = len(listing.inferences)
    lines = [inference[0].line if inference else 0 for inference in listing.inferences]
    with Confined(out_dir) as folder:  # a link planted in it is refused, never followed
        def infer(i: int, feed: dict[str, Any]) -> None:
            write_result(folder, runner(feed, outputs), f"Result_{i}")

        for _ in ordered(Each(infer), feeds(listing, list(graph.inputs), dims),
                         available_cores(), count, labels("inference", listing.file, lines)):
            pass
    if rep.mode == "json":
        rep.emit({"ok": True, "inferences": count, "outputs": outputs, **where,
                  "output_dir": display_path(out_dir)})
    else:
        on = "the float runtime" if where["record"] is None and not where["online_prepare"] \
            else (f"record {where['record']}" if where["record"] else "a record prepared here")
        rep.line(f"ran {count} inference(s) on {on}; wrote {', '.join(outputs)} to "
                 f"{display_path(out_dir)}/Result_*/")
    return 0


def _runner(args: argparse.Namespace, bundle: Any, dims: dict[str, list[int]],
            outputs: list[str] | None, packages: Any) -> tuple[Any, dict[str, Any]]:
    """What runs each inference, and where it ran (the record, or none). `outputs`: the
    tensors asked for (None: the default ones)."""
    if args.soc is None:
        from ..runtime.float_session import Session

        if dims:  # the float model at other dimensions: a float preparation, as a recipe
            settings = _settings(args, dims, outputs, "fp16", 1)  # run's reference is
            reference = replace(settings, target=settings.reference_target)
            return _on_record(bundle, reference, packages, choose=False)
        return Session(bundle.model, packages).run, {"record": None, "online_prepare": False}
    from ..ir.qmodel import ENCODINGS_PART

    precision = args.precision or ("int8" if ENCODINGS_PART in bundle.parts else "fp16")
    settings = _settings(args, dims, outputs, precision, args.optimization_level or 2)
    return _on_record(bundle, settings, packages, choose=True)


def _settings(args: argparse.Namespace, dims: dict[str, list[int]], outputs: list[str] | None,
              precision: str, level: int) -> Any:
    from ..runtime.records import RunSettings
    from ..soc.target import CompileTarget
    from .common import known_soc

    soc = known_soc(args.soc or "sm8550")  # no --soc: a float reference, on any arch
    wanted = {"tensors": outputs} if outputs else "default"
    return RunSettings(None, soc.name, CompileTarget(soc.arch, soc.vtcm_mb, level, dims,
                                                     wanted, precision))


def _on_record(bundle: Any, settings: Any, packages: Any,
               choose: bool) -> tuple[Any, dict[str, Any]]:
    """The deployable bundle's record for the run, else one prepared here (as a recipe's run
    step does)."""
    from ..compiler.serve import record_for_run

    record, where, _ = record_for_run(bundle, settings, packages, choose=choose)
    runner = record.runner(packages)
    return (lambda feed, names: runner.run(feed)), where


def _check_dims(graph: Any, weights: Any, dims: dict[str, list[int]]) -> None:
    inputs = {t.name: t for t in graph.inputs if t.name not in weights}
    for name, shape in dims.items():
        info = inputs.get(name)
        if info is None:
            raise UserError(f"--input-dims names '{name}', which is not an input of the model",
                            hint="its inputs: " + ", ".join(inputs))
        if info.shape is not None and len(info.shape) != len(shape):
            raise UserError(f"--input-dims {name}: the input has rank {len(info.shape)}, "
                            f"these dimensions have {len(shape)}")


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
