"""`udo-build plan-records --devices ...`: the smallest set of (arch, VTCM) records that serves a
fleet under the compatibility rules, so that no more records are prepared than the devices
need."""

from __future__ import annotations

import argparse

from .common import device_arguments, devices
from .reporter import Reporter


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    device_arguments(parser)
    parser.add_argument("--mode", choices=("permissive", "strict"), default="permissive",
                        help="the runtime's mode (default permissive)")


def run(args: argparse.Namespace, rep: Reporter) -> int:
    from ..soc.compat import cover, rejection
    from ..soc.table import soc_table

    fleet = devices(args, soc_table())
    chosen = cover(fleet, args.mode)
    served = {r: [d.name for d in fleet if rejection(r, d, args.mode) is None] for r in chosen}
    if rep.mode == "json":
        rep.emit({"ok": True, "mode": args.mode, "records": [
            {"arch": r.arch, "vtcm_mb": r.vtcm_mb, "serves": served[r]} for r in chosen]})
        return 0
    rep.heading(f"{len(chosen)} record(s) serve {len(fleet)} device(s) ({args.mode}):")
    rep.table("records to prepare", ["arch", "VTCM MB", "serves"],
              [[r.arch, f"{r.vtcm_mb:g}", ", ".join(served[r])] for r in chosen])
    return 0
