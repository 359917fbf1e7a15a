"""`udo-build [build] RECIPE [RECIPE ...] [ACTION-ID ...]`: build what is stale, reuse what is
cached.

Several recipes, or a workspace file listing them (see udo_build.recipe.workspace), build as one
graph: an action key runs once for them all, each recipe publishes to its own output folder,
one summary (per recipe and in total) and one report page. Prints a summary (built / cached /
failed / skipped, hit rate, time); with --json exactly one JSON object (a workspace's: a
report per recipe and the totals). --dry-run plans and says what would run and why,
running nothing; --check does the same and exits 1 when anything would run (0 when everything
is cached). With a remote cache (--remote, or configured: see udo_build/builder/settings.py)
local misses are looked up there, and with --remote-upload or --ci what this build makes is
uploaded. The build itself is `udo_build.builder.session.run_build` (`run_workspace`); this
module parses and prints.

A no-op build is told from its record (see builder/uptodate.py) before its words are parsed
(`told_from_record`, which `main` calls first): what that path needs is imported at the top,
the parser's modules (argparse, cli/common.py) where the arguments are added and read.
"""

from __future__ import annotations

from ..errors import UserError, display_path
from .reporter import Reporter

EXIT_STALE = 1  # --check: some action would run

TYPE_CHECKING = False  # typing's, without importing typing (see cli/__init__.py)
if TYPE_CHECKING:
    import argparse

    from ..builder.outcome import BuildReport
    from ..builder.plan import Shard
    from ..builder.workspace import WorkspaceReport


DESCRIPTION = """\
Build what is stale, reuse what is cached (a dry run with -n or --check).

Several recipes build as ONE graph: 'udo-build build a.yaml b.yaml', or a workspace file
(workspace: 1, recipes: [paths or shell patterns, relative to the file]). An action with the
same key in several recipes (two recipes over the same model and ops: convert, quantize) runs
once; each recipe publishes to its own output folder (out/<recipe name>, under --out DIR
when given), and two recipes with one name are an error. One summary: each recipe's counts and
the total; one report page (out/<workspace name>.report.html); --shard K/N splits the whole
workspace; with --json: {"recipes": [one report per recipe], "totals": {...}} (one recipe alone
keeps its own JSON shape). Action ids are <recipe name>/<id> in a workspace; an ACTION-ID
pattern matches those or a recipe's own ids ('convert': in every recipe)."""

EPILOG = """\
examples:
  udo-build recipes/softplus.yaml
  udo-build build recipes/a.yaml recipes/b.yaml --json
  udo-build build ci.yaml --shard 2/4 --remote URL     # ci.yaml: workspace: 1, recipes: [...]"""


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    from .common import (
        RawFormatter,
        add_remote_arguments,
        add_store_arguments,
        add_strict_argument,
    )

    parser.formatter_class = RawFormatter
    parser.description, parser.epilog = DESCRIPTION, EPILOG
    parser.add_argument("recipe", metavar="RECIPE", help="a recipe file (YAML), or a workspace "
                        "file; more may follow (every word ending .yaml or .yml, or naming a "
                        "file, is one)")
    parser.add_argument("targets", metavar="RECIPE|ACTION-ID", nargs="*",
                        help="more recipe files (built with the first as one graph), and "
                             "action ids: build only these actions (and what they need); "
                             "shell-style patterns work, e.g. 'prepare:sm8550/*'")
    add_store_arguments(parser)
    parser.add_argument("--out", metavar="DIR",
                        help="the output folder (default: ./out/<recipe name>); for several "
                             "recipes, the folder their output folders go in, each named after "
                             "its recipe (default: ./out)")
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
    import argparse

    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _shard(text: str) -> Shard:
    import argparse

    from ..builder.plan import Shard

    try:
        return Shard.parse(text)
    except UserError as exc:
        raise argparse.ArgumentTypeError(f"{exc.problem.message}; {exc.problem.hint}") from None


def run(args: argparse.Namespace, rep: Reporter) -> int:
    from ..builder.session import BuildRequest, run_build, run_workspace
    from ..recipe.workspace import checked_memo, list_recipes, recipe_words
    from .common import remote_request

    files, targets = recipe_words(args.recipe, args.targets)
    listing = list_recipes(files, checked_memo(args.store))
    request = BuildRequest(args.recipe, tuple(targets), store=args.store, out=args.out,
                           jobs=args.jobs, keep_going=args.keep_going,
                           dry_run=args.dry_run or args.check, remote=remote_request(args),
                           shard=args.shard, shard_wait=args.shard_wait,
                           remote_optional=args.remote_optional, executor=args.executor,
                           strict=args.strict, download=args.download,
                           command_line=getattr(args, "command_line", ()))  # main's words
    if listing.combined:
        return _workspace(rep, run_workspace(listing, request, rep), args)
    return told(rep, run_build(request, rep), debug=args.debug, check=args.check)


def told_from_record(words: tuple[str, ...], store: str | None, rep: Reporter, *,
                     debug: bool) -> int | None:
    """`udo-build WORDS` told as its recorded no-op when everything that no-op read is as it
    was (builder/uptodate.py: a build is recorded under its words as given, so they need no
    parsing, but for the store they name): its exit code; None when the build must run."""
    from ..builder.uptodate import replayed_command_line

    report = replayed_command_line(words, store, rep)
    if report is None:
        return None
    return told(rep, report, debug=debug, check=False)  # a dry run is never recorded


def told(rep: Reporter, report: BuildReport, *, debug: bool, check: bool) -> int:
    """Tell one recipe's build (its failures, its summary or JSON); its exit code."""
    _failures(rep, report, debug)
    if report.unpublished:
        rep.failure(f"{report.unpublished} result{'s' * (report.unpublished != 1)} of this "
                    "shard could not be uploaded to the remote cache, so the join build would "
                    "build them again", [])
        rep.note("fix the remote's write access or the signing key (see the warnings above); "
                 "--remote-optional exits 0 all the same")
    if rep.mode == "json":
        rep.emit(report.to_json())
    elif report.dry_run:
        _dry_summary(rep, report, check=check)
    else:
        _summary(rep, report)
    if check and report.exit_code == 0 and report.stale:
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


def _summary(rep: Reporter, report: BuildReport, *, runs: bool = True) -> None:
    for line in _run_lines(report) if runs else []:
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
        from .common import remote_line

        rep.line(f"  {remote_line(report.remote)}")
    if report.download is not None and report.download["remote_only_actions"]:
        from .common import download_line

        rep.line(f"  {download_line(report.download)}")
    if report.out is not None:
        rep.line(f"  outputs in {display_path(report.out)}")
    if report.page is not None:
        rep.line(f"  report page {display_path(report.page)}")
    elif report.shard and not report.dry_run:
        rep.line("  a shard writes no output folder: the build without --shard does (the join)")


# -- a workspace ----------------------------------------------------------------------------------

def _workspace(rep: Reporter, report: WorkspaceReport, args: argparse.Namespace) -> int:
    """Print a workspace's build: each recipe's lines and counts, then the totals."""
    total = report.total
    _failures(rep, total, args.debug)
    if report.unpublished:
        rep.failure(f"{report.unpublished} result{'s' * (report.unpublished != 1)} of this "
                    "shard could not be uploaded to the remote cache", [])
    if rep.mode == "json":
        rep.emit(report.to_json())
    else:
        for part in report.recipes:
            _recipe_lines(rep, part)
        total = total._replace(recipe=f"{total.recipe} ({len(report.recipes)} recipes)")
        if report.dry_run:
            _dry_summary(rep, total, check=args.check)
        else:
            _summary(rep, total, runs=False)
    if args.check and report.exit_code == 0 and report.stale:
        return EXIT_STALE
    return report.exit_code


def _recipe_lines(rep: Reporter, part: BuildReport) -> None:
    """One recipe of a workspace: what its runs found, its counts, its output folder."""
    counts = part.counts
    if part.dry_run:
        shown = [f"would run {counts['would_run']}", f"cached {counts['cached']}"]
    else:
        for line in _run_lines(part):
            rep.line(line)
        shown = [f"{counts['built']} built", f"{counts['cached']} cached"]
    if counts["shared"]:
        shown.append(f"{counts['shared']} sharing the key of an action of the workspace")
    shown += [f"{counts[s]} {s}" for s in ("failed", "skipped") if counts[s]]
    rep.line(f"{part.recipe}: {', '.join(shown)}"
             + (f"; outputs in {display_path(part.out)}" if part.out is not None else ""))
