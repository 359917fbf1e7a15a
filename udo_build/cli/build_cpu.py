"""`udo-build build-cpu PACKAGE_FOLDER [--out LIB.so] [--include DIR ...]`: compile a generated CPU
op package, with the op bodies you wrote, into a host library the emulator runs in place of the
numpy kernels (`package.cpu_library:` in a recipe, or `--kernels LIB.so` with `run`; see
udo_build/package/cpu_build.py)."""

from __future__ import annotations

import argparse
from pathlib import Path

from ..errors import Problem, display_path
from .reporter import Reporter


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("folder", metavar="PACKAGE_FOLDER",
                        help="a generated CPU op package (holding package.json)")
    parser.add_argument("--out", metavar="LIB.so",
                        help="where to write the library (default: "
                             "PACKAGE_FOLDER/build/host-emulator/lib<Package>.so)")
    parser.add_argument("--include", metavar="DIR", action="append", default=[],
                        help="compile against these headers (the QNN SDK's include/QNN) instead "
                             "of udo-build's stand-in headers (repeatable)")


def run(args: argparse.Namespace, rep: Reporter) -> int:
    from ..package.cpu_build import build_cpu_library

    lib = build_cpu_library(Path(args.folder), Path(args.out) if args.out else None,
                            [Path(i) for i in args.include])
    if lib.unwritten:
        rep.warning(Problem(f"no C++ body written yet: {', '.join(lib.unwritten)}; the emulator "
                            "keeps their numpy kernels"))
    if rep.mode == "json":
        rep.emit({"ok": True, **lib.to_json(), "library": display_path(lib.path)})
        return 0
    rep.heading(f"{lib.package} -> {display_path(lib.path)}")
    rep.facts([("native ops", ", ".join(lib.ops)),
               ("use it", f"package.cpu_library: {display_path(lib.path)} (recipe), or "
                          f"--kernels {display_path(lib.path)} (run)")])
    return 0
