"""`udo-build init MODEL.onnx`: a starting project for a model with custom nodes: an XML op
config of the ops the emulator does not know, a numpy kernels stub, placeholder calibration and
test inputs (random values of the model's input shapes) and a recipe that converts, quantizes,
prepares, runs and checks (udo_build.builder.scaffold). Refuses to overwrite any file."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import Problem, display_path
from .reporter import Reporter


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("model", metavar="MODEL.onnx", help="an ONNX model with custom nodes")
    parser.add_argument("--out", metavar="DIR", default=".",
                        help="the folder to write the recipe and ops/ into (default: the "
                             "current folder; it stays in the model's project)")
    parser.add_argument("--package", metavar="NAME",
                        help="the op package's name (default: <Model>OpPackage)")


def run(args: argparse.Namespace, rep: Reporter) -> int:
    from ..builder.scaffold import plan, write

    scaffold = plan(Path(args.model), Path(args.out), args.package)
    write(scaffold)
    files = sorted(str(p) for p in scaffold.files)
    placeholders = ("the inputs under data/ are PLACEHOLDERS: random values of the model's "
                    "input shapes (" + ", ".join(f"{i.name} {list(i.shape)}"
                                                 for i in scaffold.inputs)
                    + ("; symbolic dimensions as 1, as the recipe's input_dimensions say"
                       if any(None in i.dims for i in scaffold.inputs) else "")
                    + "); replace them with real calibration and test data")
    if rep.mode == "json":
        rep.emit({"ok": True, "package": scaffold.package, "domain": scaffold.domain,
                  "ops": [{"name": op.name, "nodes": list(op.nodes)} for op in scaffold.ops],
                  "files": files, "placeholders": placeholders})
        return 0
    rep.heading(f"package {scaffold.package} (domain {scaffold.domain}): "
                f"{len(scaffold.ops)} ops the emulator does not know")
    rep.table("ops", ["op", "nodes", "inputs", "outputs", "parameters"],
              [[op.name, len(op.nodes), len(op.inputs), len(op.outputs),
                ", ".join(p.name for p in op.params) or "-"] for op in scaffold.ops])
    for path in files:
        rep.note(f"wrote {path}")
    rep.warning(Problem(placeholders))
    recipe = next(p for p in files if p.endswith(".yaml"))
    rep.note(f"next: check the op config, write the numpy kernels, then "
             f"'udo-build {display_path(recipe)}': "
             "convert, quantize, prepare, run and check (a kernel not written fails the "
             "first step that runs it)")
    return 0
