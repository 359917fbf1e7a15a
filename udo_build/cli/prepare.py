"""`udo-build prepare BUNDLE --soc S | --arch A --vtcm-mb N [--level L] [--input-dims NAME=D,...]
[--outputs default|layers=a,b|tensors=x,y] [--precision int8|fp16] [--kernels FILE ...]
--out RECORD [--trace] [--why RULE ...]`: prepares one record without a recipe. `--trace`
prints which rules fired in which pass and how often; `--why RULE` also says, for each op the
rule was tried at, why it did not match (the pattern's first mismatch, the false constraint, or
a declining replacement).
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import UserError, display_path
from .reporter import Reporter

if TYPE_CHECKING:
    from ..soc.table import Soc

def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("bundle", metavar="BUNDLE", help="a bundle (.udb)")
    parser.add_argument("--soc", help="a SoC of the built-in table (gives arch and VTCM)")
    parser.add_argument("--arch", help="hexagon arch, e.g. v73 (instead of --soc)")
    parser.add_argument("--vtcm-mb", type=float, help="VTCM size in MB (instead of --soc)")
    parser.add_argument("--level", type=int, default=2, choices=(1, 2, 3))
    parser.add_argument("--input-dims", metavar="NAME=D0,D1,...", action="append", default=[])
    parser.add_argument("--outputs", default="default",
                        help="default, layers=NAME,NAME or tensors=NAME,NAME")
    parser.add_argument("--precision", choices=("int8", "fp16"),
                        help="default: the bundle's (int8 when it is quantized, else fp16)")
    parser.add_argument("--kernels", metavar="FILE", action="append", default=[],
                        help="numpy kernels (and rules) of the custom ops; repeatable")
    parser.add_argument("--out", metavar="RECORD", required=True, help="the record to write")
    parser.add_argument("--trace", action="store_true", help="show which rules fired")
    parser.add_argument("--why", metavar="RULE", action="append", default=[],
                        help="say why this rule did not match, op by op; repeatable")


def parse_outputs(text: str) -> Any:
    if text == "default":
        return "default"
    kind, sep, names = text.partition("=")
    if not sep or kind not in ("layers", "tensors") or not names:
        raise UserError(f"--outputs {text!r} is not default, layers=NAME,... or tensors=NAME,...")
    return {kind: names.split(",")}


def run(args: argparse.Namespace, rep: Reporter) -> int:
    from ..atomic import write_atomic
    from ..compiler import Trace, compile_bundle
    from ..ir.qmodel import ENCODINGS_PART
    from ..kernels.load import packages_for
    from ..model.op_check import load_checked_bundle
    from ..recipe.model import Dims, Outputs, RecordTarget
    from .common import parse_dims

    soc = _soc(args)
    bundle = load_checked_bundle(args.bundle)
    packages = packages_for(bundle, [Path(k) for k in args.kernels]) if args.kernels else {}
    trace = Trace(why=frozenset(args.why), events=False)
    precision = args.precision or ("int8" if ENCODINGS_PART in bundle.parts else "fp16")
    target = RecordTarget(soc, args.level, Dims.of(parse_dims(args.input_dims)),
                          Outputs.of(parse_outputs(args.outputs)), precision)
    compiled = compile_bundle(bundle, target.compile_target(), packages, trace)
    data = compiled.record()
    write_atomic(Path(args.out), data, readonly=False)
    lines = trace.lines() if args.trace or args.why else []
    if rep.mode == "json":
        rep.emit({"ok": True, "record": display_path(args.out), "bytes": len(data),
                  "key": compiled.key(), "memory": compiled.memory.summary(),
                  "rules": trace.counts(), "why": trace.misses})
        return 0
    rep.heading(f"prepared {compiled.key()['name']} -> {display_path(args.out)}")
    rep.facts([("ops", str(len(compiled.graph.ops))), ("bytes", f"{len(data):,}"),
               ("peak VTCM", f"{compiled.memory.peak:,} bytes")])
    for line in lines:
        rep.line(line)
    return 0


def _soc(args: argparse.Namespace) -> Soc:
    """The SoC of the built-in table named by --soc, else the one --arch and --vtcm-mb give."""
    from ..soc.table import Soc

    if args.soc:
        from .common import known_soc

        soc: Soc = known_soc(args.soc)
        return soc
    if not args.arch or not args.vtcm_mb:
        raise UserError("give --soc, or --arch and --vtcm-mb")
    return Soc(args.arch, args.arch, args.vtcm_mb, "command line")
