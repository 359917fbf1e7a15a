"""`udo-build cache push | pull RECIPE [ACTION-ID ...]`: move a recipe's artifacts between the
local store and the remote cache (see udo_build/builder/transfer.py).

Exit codes: 0 when the remote did what was asked (actions not built locally, or not in the
remote cache, are listed, not errors), 1 when uploads or downloads failed, 2 for a user error
(no remote configured; push without a signing key).
"""

from __future__ import annotations

import argparse

from .common import add_remote_arguments, add_store_arguments, human_size, remote_request
from .reporter import Reporter

SUMMARIES = {
    "push": "upload what the local store holds of a recipe's actions to the remote cache",
    "pull": "download a recipe's actions from the remote cache into the local store",
}


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="cache_command", metavar="SUBCOMMAND", required=True)
    for name, summary in SUMMARIES.items():
        cmd = sub.add_parser(name, parents=[common], help=summary, description=summary)
        cmd.add_argument("recipe", metavar="RECIPE", help="the recipe file (YAML)")
        cmd.add_argument("targets", metavar="ACTION-ID", nargs="*",
                         help="only these actions (and what they need); patterns work")
        add_store_arguments(cmd)
        add_remote_arguments(cmd, upload=False)


def run(args: argparse.Namespace, rep: Reporter) -> int:
    from ..builder.session import BuildRequest
    from ..builder.transfer import transfer

    push = args.cache_command == "push"
    request = BuildRequest(args.recipe, tuple(args.targets), store=args.store,
                           remote=remote_request(args))
    report = transfer(request, rep, push=push)
    if rep.mode == "json":
        rep.emit(report.to_json())
        return 0 if report.ok else 1
    counts, remote = report.counts, report.remote
    if push:
        head = (f"pushed {counts.get('pushed', 0)} actions to {remote.url} "
                f"({remote.blobs_uploaded} blobs, {human_size(remote.bytes_uploaded)} "
                f"uploaded)")
        left = [r for r in report.actions if r.status != "pushed"]  # missing or failed
    else:
        head = (f"pulled {counts.get('pulled', 0)} actions from {remote.url} "
                f"({human_size(remote.bytes_downloaded)}); {counts.get('local', 0)} were "
                "already here")
        left = [r for r in report.actions if r.status == "missing"]
    rep.heading(f"{report.recipe}: {head}")
    for row in left:
        rep.line(f"  {row.status:9}  {row.id}" + (f": {row.reason}" if row.reason else ""))
    if left and not push:
        rep.line("  build them with 'udo-build RECIPE' (a CI build with --ci shares them)")
    return 0 if report.ok else 1
