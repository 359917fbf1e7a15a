"""`udo-build convert MODEL.onnx [--opdef CONFIG ...] [--kernels FILE ...] [--input-dims ...]
--out BUNDLE`: convert without a recipe. The converters' forms work too: `-i MODEL.onnx
--udo_config_paths A.json B.json -d input 1,3,224,224 -o BUNDLE` (and -opc, --op_package_config).
The shapes after a custom op come from its kernels when --kernels gives them, else from the shapes
the exporter recorded (udo_build.model.shape_fill)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..errors import Diagnostics, UserError, display_path
from .common import CONVERTER_SPELLINGS, add_config_paths, parse_dims, spelled
from .reporter import Reporter


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL.onnx", nargs="?",
                        help="the ONNX model (or --input_network/-i MODEL, as the converters)")
    parser.add_argument(*CONVERTER_SPELLINGS["model"], dest="input_network", metavar="MODEL",
                        help=argparse.SUPPRESS)
    add_config_paths(parser)
    parser.add_argument("--input-dims", metavar="NAME=D0,D1,...", action="append", default=[],
                        help="override an input's dimensions, e.g. input=1,3,224,224 (the "
                             "converters' form: --input_dim/-d NAME D0,D1,...)")
    parser.add_argument(*CONVERTER_SPELLINGS["--input-dims"], dest="input_dim", nargs=2,
                        action="append", default=[], metavar=("NAME", "DIMS"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--kernels", metavar="FILE", action="append", default=[],
                        help="numpy kernels of the custom ops (their output shapes); repeatable")
    parser.add_argument(*spelled("--out", *CONVERTER_SPELLINGS["--out"]), metavar="BUNDLE",
                        required=True, help="the bundle to write (.udb)")


def model_path(args: argparse.Namespace) -> str:
    """The model, given as MODEL.onnx or -i/--input_network (not both)."""
    given = [m for m in (args.model, args.input_network) if m is not None]
    if len(given) == 1:
        return given[0]
    if given:
        raise UserError("the model is given twice: as MODEL.onnx and as --input_network",
                        hint="give it once")
    swallowed = [c for c in args.opdef if Path(c).suffix.lower() == ".onnx"]
    raise UserError("no model given", hint=(
        f"{swallowed[0]} was read as an op config: --opdef/--udo_config_paths take every "
        "value that follows; put the model first, or name it with -i" if swallowed else
        "give MODEL.onnx, or -i/--input_network MODEL.onnx"))


def run(args: argparse.Namespace, rep: Reporter) -> int:
    from ..atomic import AtomicFile
    from ..builder.kinds.convert import CONVERTER
    from ..ir.bundle import Bundle, write_bundle_to
    from ..model.info import describe
    from ..model.onnx_import import import_onnx, load_onnx
    from ..opdef import recipe_package

    model_file = model_path(args)
    dims = parse_dims([*args.input_dims, *(f"{n}={d}" for n, d in args.input_dim)])
    diag = Diagnostics()
    opdefs = recipe_package(None, None, None, [Path(c) for c in args.opdef], diag) \
        if args.opdef else None
    for warning in diag.warnings:
        rep.warning(warning)
    packages = _packages(opdefs.name, args.kernels) if opdefs and args.kernels else None
    model = import_onnx(load_onnx(model_file), file=model_file, opdefs=opdefs,
                        input_dims=dims, packages=packages)
    bundle = Bundle(model, opdefs.to_json() if opdefs else None, {"producer": CONVERTER})
    out = Path(args.out)
    with AtomicFile(out, mode=None) as file:  # streamed: external weights one piece at a time
        size = write_bundle_to(bundle, file)  # type: ignore[arg-type]
    info = describe(bundle)
    if rep.mode == "json":
        rep.emit({"ok": True, "bundle": display_path(out), "bytes": size,
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
