"""`udo-build convert MODEL.onnx [--opdef CONFIG ...] [--kernels FILE ...] [--input-dims ...]
--out BUNDLE`: convert without a recipe. The shapes after a custom op come from its kernels when
--kernels gives them, else from the shapes the exporter recorded (udo_build.model.shape_fill)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..errors import Diagnostics, display_path
from .common import parse_dims, spelled
from .reporter import Reporter


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL.onnx", help="the ONNX model")
    parser.add_argument(*spelled("--opdef"), metavar="CONFIG", action="append", default=[],
                        help="an op config (XML or JSON) defining custom ops; repeatable")
    parser.add_argument("--input-dims", metavar="NAME=D0,D1,...", action="append", default=[],
                        help="override an input's dimensions, e.g. input=1,3,224,224")
    parser.add_argument("--kernels", metavar="FILE", action="append", default=[],
                        help="numpy kernels of the custom ops (their output shapes); repeatable")
    parser.add_argument(*spelled("--out", "--output_path"), metavar="BUNDLE", required=True,
                        help="the bundle to write (.udb)")


def run(args: argparse.Namespace, rep: Reporter) -> int:
    from ..atomic import write_atomic
    from ..builder.kinds.convert import CONVERTER
    from ..ir.bundle import Bundle
    from ..model.info import describe
    from ..model.onnx_import import import_onnx, load_onnx
    from ..opdef import recipe_package

    diag = Diagnostics()
    opdefs = recipe_package(None, None, None, [Path(c) for c in args.opdef], diag) \
        if args.opdef else None
    for warning in diag.warnings:
        rep.warning(warning)
    packages = _packages(opdefs.name, args.kernels) if opdefs and args.kernels else None
    model = import_onnx(load_onnx(args.model), file=args.model, opdefs=opdefs,
                        input_dims=parse_dims(args.input_dims), packages=packages)
    bundle = Bundle(model, opdefs.to_json() if opdefs else None, {"producer": CONVERTER})
    data = bundle.to_bytes()
    out = Path(args.out)
    write_atomic(out, data, readonly=False)
    info = describe(bundle)
    if rep.mode == "json":
        rep.emit({"ok": True, "bundle": display_path(out), "bytes": len(data),
                  "layers": len(info["layers"]), "udos": info["udos"],
                  "total_parameters": info["total_parameters"], "total_macs": info["total_macs"]})
    else:
        rep.line(f"wrote {display_path(out)}: {len(info['layers'])} layers, "
                 f"{info['total_parameters']:,} parameters, {info['total_macs']:,} MACs"
                 + (f"; custom ops {', '.join(info['udos'])}" if info["udos"] else ""))
    return 0


def _packages(name: str, files: list[str]) -> dict[str, Any]:
    from ..kernels.load import load_kernels, merged

    modules = [f"udo_build_kernels_{name}_{i}" for i in range(len(files))]
    return {name: merged(name, [p for f, module in zip(files, modules, strict=True)
                                for p in load_kernels(Path(f), module)])}
