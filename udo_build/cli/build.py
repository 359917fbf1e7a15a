"""`udo-build [build] RECIPE [ACTION-ID ...]`: build what is stale, reuse what is cached.

Prints a summary (built / cached / failed / skipped, hit rate, time); with --json exactly one
JSON object. --dry-run plans and says what would run and why, running nothing; --check does the
same and exits 1 when anything would run (0 when everything is cached). With a remote
cache (--remote, or configured: see udo_build/builder/settings.py) local misses are looked up
there, and with --remote-upload or --ci what this build makes is uploaded. The build itself is
`udo_build.builder.session.run_build`; this module parses and prints.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ..errors import UserError, display_path
from .common import (
    add_remote_arguments,
    add_store_arguments,
    add_strict_argument,
    download_line,
    remote_line,
    remote_request,
)
from .reporter import Reporter

EXIT_STALE = 1  # --check: some action would run

if TYPE_CHECKING:
    from ..builder.plan import Shard
    from ..builder.session import BuildReport


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("recipe", metavar="RECIPE", help="the recipe file (YAML)")
    parser.add_argument("targets", metavar="ACTION-ID", nargs="*",
                        help="build only these actions (and what they need); shell-style "
                             "patterns work, e.g. 'prepare:sm8550/*'")
    add_store_arguments(parser)
    parser.add_argument("--out", metavar="DIR",
                        help="the output folder (default: ./out/<recipe name>)")
    parser.add_argument("-j", "--jobs", type=_jobs, default=0, metavar="N",
                        help="run N actions at once (default: the number of cores)")
    parser.add_argument("-k", "--keep-going", action="store_true",
                        help="after a failure, build everything that does not depend on it")
    parser.add_argument("-n", "--dry-run", action="store_true",
                        help="say what would run and why; run nothing, write nothing")
    parser.add_argument("--check", action="store_true",
                        help="like --dry-run, then exit 1 when anything would run and 0 when "
                             "everything is cached (is the build up to date?)")
    parser.add_argument("--shard", type=_shard, metavar="K/N",
                        help="build the K-th of N shards of the selected actions (split by "
                             "key) and upload them (needs a remote and a signing key); no output "
                             "folder: a build without --shard joins them (see README, Sharded "
                             "CI)")
    parser.add_argument("--shard-wait", type=float, default=1800.0, metavar="SECONDS",
                        help="how long the last shard (N/N) waits for the other shards' work "
                             "in the remote (and the others for the first shard's upstream "
                             "work) (default: 1800)")
    parser.add_argument("--remote-optional", action="store_true",
                        help="a shard whose results could not all be uploaded exits 0 all the "
                             "same (default: 1, with their count)")
    parser.add_argument("--executor", metavar="WHERE",
                        help="where actions run: dask://HOST:PORT for a Dask cluster (see "
                             "README 'Distributed builds'; default: $UDO_BUILD_EXECUTOR, the "
                             "config files' `executor`, else this machine)")
    add_strict_argument(parser, "override encodings naming tensors the model lacks")
    add_remote_arguments(parser, upload=True, download=True)


def _jobs(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _shard(text: str) -> Shard:
    from ..builder.plan import Shard

    try:
        return Shard.parse(text)
    except UserError as exc:
        raise argparse.ArgumentTypeError(f"{exc.problem.message}; {exc.problem.hint}") from None


def run(args: argparse.Namespace, rep: Reporter) -> int:
    from ..builder.session import BuildRequest, run_build

    request = BuildRequest(args.recipe, tuple(args.targets), store=args.store, out=args.out,
                           jobs=args.jobs, keep_going=args.keep_going,
                           dry_run=args.dry_run or args.check, remote=remote_request(args),
                           shard=args.shard, shard_wait=args.shard_wait,
                           remote_optional=args.remote_optional, executor=args.executor,
                           strict=args.strict, download=args.download)
    report = run_build(request, rep)
    _failures(rep, report, args.debug)
    if report.unpublished:
        rep.failure(f"{report.unpublished} result{'s' * (report.unpublished != 1)} of this "
                    "shard could not be uploaded to the remote cache, so the join build would "
                    "build them again", [])
        rep.note("fix the remote's write access or the signing key (see the warnings above); "
                 "--remote-optional exits 0 all the same")
    if rep.mode == "json":
        rep.emit(report.to_json())
    elif report.dry_run:
        _dry_summary(rep, report, check=args.check)
    else:
        _summary(rep, report)
    if args.check and report.exit_code == 0 and report.stale:
        return EXIT_STALE
    return report.exit_code


def _failures(rep: Reporter, report: BuildReport, debug: bool) -> None:
    for action in report.actions:
        if action.status != "failed":
            continue
        rep.failure(f"{action.id} ({action.label})"
                    + (": a bug of udo-build, please report it" if action.internal else ""),
                    action.problems())
        if action.internal and debug and action.trace is not None:
            rep.note(action.trace)
        elif action.internal and not debug:
            rep.note("rerun with --debug for the traceback")


def _summary(rep: Reporter, report: BuildReport) -> None:
    for line in _run_lines(report):
        rep.line(line)
    counts = report.counts
    shared = (f" ({counts['shared']} of them the same key as an action built now)"
              if counts["shared"] else "")
    parts = [f"{counts['built']} built", f"{counts['cached']} cached{shared}",
             f"{counts['failed']} failed", f"{counts['skipped']} skipped"]
    rate = report.hit_rate
    rep.heading(f"{_name(report)}: {', '.join(parts)} in {round(report.seconds, 4):.2f} s"
                + (f"; cache hit rate {rate:.0%}" if rate is not None else ""))
    rep.line(f"  {_where(report)}")
    _details(rep, report)


def _where(report: BuildReport) -> str:
    """What ran where: the actions built (and on what), the hits of each cache tier."""
    counts = report.counts
    origins = [a.source for a in report.actions]
    hits = [f"{origins.count(tier)} {tier} hit{'s' if origins.count(tier) != 1 else ''}"
            for tier in ("local", "remote") if origins.count(tier)]
    where = "in this process" if report.where == "inline" else f"on {report.where}"
    ran = f"{counts['built']} ran {where}" if counts["built"] else "nothing ran"
    return "; ".join([ran, *hits])


def _run_lines(report: BuildReport) -> list[str]:
    """What each run that ran or was checked found: the record it used, its SQNR (the run's
    description) and its checks' verdict (its `check:` step's, when it has checks)."""
    by_id = {a.id: a for a in report.actions}
    lines = []
    for run in report.actions:
        if run.kind != "run" or run.description is None:
            continue
        check = by_id.get("check" + run.id[len("run"):])
        if run.status != "built" and (check is None or check.status != "built"):
            continue
        verdict = "" if check is None else "; " + (
            check.description if check.description is not None
            else "checks FAILED" if check.status == "failed" else f"checks {check.status}")
        lines.append(run.description + verdict)
    return lines


def _dry_summary(rep: Reporter, report: BuildReport, *, check: bool) -> None:
    """What would run and why, and the counts of a build that ran nothing."""
    for action in report.actions:
        if action.would_run:
            rep.line(f"would run  {action.id}: {action.reason}")
    counts = report.counts
    later = sum(1 for a in report.actions if a.would_run and a.key is None)
    parts = [f"would run {counts['would_run']}"
             + (f" ({later} of them only if an input changes)" if later else ""),
             f"cached {counts['cached']}"]
    parts += [f"{counts[s]} {s}" for s in ("failed", "skipped") if counts[s]]
    if counts["shared"]:
        parts.append(f"{counts['shared']} sharing the key of one that would run")
    rep.heading(f"{_name(report)} (dry run, nothing ran): {', '.join(parts)} in "
                f"{round(report.seconds, 4):.2f} s")
    if check:
        stale = report.stale
        rep.line(f"  not up to date: {stale} action{'s' if stale > 1 else ''} would run"
                 if stale else "  up to date: every action is cached")
    _details(rep, report)


def _name(report: BuildReport) -> str:
    return report.recipe + (f" shard {report.shard}" if report.shard else "")


def _details(rep: Reporter, report: BuildReport) -> None:
    unavailable = sorted({a.kind for a in report.actions if not a.available})
    if unavailable:
        rep.line(f"  not available yet in this udo-build: {', '.join(unavailable)} (those "
                 "actions and what needs them are skipped)")
    if report.remote is not None:
        rep.line(f"  {remote_line(report.remote)}")
    if report.download is not None and report.download["remote_only_actions"]:
        rep.line(f"  {download_line(report.download)}")
    if report.out is not None:
        rep.line(f"  outputs in {display_path(report.out)}")
    if report.page is not None:
        rep.line(f"  report page {display_path(report.page)}")
    elif report.shard and not report.dry_run:
        rep.line("  a shard writes no output folder: the build without --shard does (the join)")
