"""`udo-build store stats | verify [--repair] | gc [...] | ls`: inspect and maintain the store.

verify exits 0 when nothing is wrong, 1 when it found problems (with --repair: 0 when every one
was repaired). Stale temporary files of killed writers, orphan lock files and the like are notes,
never problems (see udo_build.store.maintenance.check). gc exits 1 when a file could not be
removed. A store folder that does not exist is a user error (2) for every subcommand.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from ..errors import Problem, display_path
from .common import add_store_arguments, human_size
from .reporter import Reporter

SUMMARIES = {
    "stats": "count what the store holds: blobs, action-cache entries, recipes, leftovers",
    "verify": "check every blob's digest, every cache entry, tree and history; --repair fixes",
    "gc": "remove what nothing needs: unreachable blobs, and with options old or surplus entries",
    "ls": "list the action-cache entries: key, kind, description, sizes, last use",
}

NOUNS = {"entries": "action-cache entry", "blobs": "blob", "temporary_files": "temporary file",
         "lock_files": "lock file", "quarantined": "quarantined file", "checked": "checked marker"}


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="store_command", metavar="SUBCOMMAND", required=True)
    _subcommand(sub, "stats")
    verify = _subcommand(sub, "verify")
    verify.add_argument("--repair", action="store_true",
                        help="quarantine corrupt blobs, remove bad cache entries, unreadable "
                             "histories and stale temporary files (waits for running builds)")
    _wait_argument(verify)
    gc = _subcommand(sub, "gc")
    gc.add_argument("--older-than", type=_days, metavar="DAYS",
                    help="also remove cache entries unused for DAYS (not those the last build "
                         "of a recipe uses), and quarantined files and markers that old")
    gc.add_argument("--max-size", type=_size, metavar="SIZE",
                    help="also remove least recently used entries until the blobs fit in SIZE "
                         "(500M, 2G, 1.5GiB, 100000 bytes; K/M/G = 1024^n, kB/MB/GB = 1000^n)")
    gc.add_argument("--include-referenced", action="store_true",
                    help="let the outputs of the last build of each recipe go too")
    gc.add_argument("-n", "--dry-run", action="store_true",
                    help="say what would be removed; remove nothing")
    _wait_argument(gc)
    ls = _subcommand(sub, "ls")
    ls.add_argument("--kind", metavar="KIND", help="only entries of this action kind")


def _subcommand(sub: Any, name: str) -> argparse.ArgumentParser:
    parser = sub.add_parser(name, help=SUMMARIES[name], description=SUMMARIES[name])
    add_store_arguments(parser)
    # like the common options, but without defaults: `store --json stats` keeps its --json
    parser.add_argument("--json", action="store_true", default=argparse.SUPPRESS,
                        help="print one machine-readable JSON object on stdout")
    parser.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show tracebacks of internal errors")
    return parser


def _wait_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--wait", type=float, default=30.0, metavar="SECONDS",
                        help="how long to wait for builds using the store (default: 30)")


def _days(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of days: {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError("must be 0 or more days")
    return value


def _size(text: str) -> int:
    from ..store.maintenance import parse_size

    try:
        return parse_size(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def run(args: argparse.Namespace, rep: Reporter) -> int:
    from ..store import Store, default_store_path

    store = Store(default_store_path(args.store), create=False)
    try:
        return _HANDLERS[args.store_command](store, args, rep)
    finally:
        store.close()


# -- stats ----------------------------------------------------------------------------------------

def _stats(store: Any, args: argparse.Namespace, rep: Reporter) -> int:
    from ..store.maintenance import stats

    st = stats(store)
    if rep.mode == "json":
        rep.emit({"ok": True, "store": display_path(store.root), **st.to_json()})
        return 0
    logical = f"{human_size(st.logical_bytes)} uncompressed" + (
        f" ({st.logical_unknown} of unknown size)" if st.logical_unknown else "")
    kinds = ", ".join(f"{k} {n}" for k, n in st.by_kind.items())
    rep.heading(f"store {display_path(store.root)}")
    rows = [("blobs", f"{st.blobs} ({st.compressed} compressed): "
                      f"{human_size(st.disk_bytes)} on disk, {logical}"),
            ("action-cache entries", f"{st.entries}" + (f": {kinds}" if kinds else ""))]
    if st.malformed_entries:
        rows.append(("malformed entries", f"{st.malformed_entries} (run 'udo-build store verify')"))
    rows.append(("recipes", f"{len(st.recipes)} with a last build"
                 + (f", {st.unreadable_histories} unreadable" if st.unreadable_histories else "")))
    rows += [("quarantine", f"{st.quarantined} files ({human_size(st.quarantine_bytes)})"),
             ("temporary files", f"{st.stale_temporary} stale"),
             ("lock files", str(st.lock_files))]
    rows += _cache_rows(st.cache)
    rep.facts(rows)
    if st.recipes:
        now = time.time()
        rep.table(f"recipes ({len(st.recipes)})", ["name", "recipe", "last build", "actions"],
                  [[r["name"], r["recipe"], _ago(now, r["updated"]), r["actions"]]
                   for r in st.recipes])
    return 0


def _cache_rows(c: dict[str, Any]) -> list[tuple[str, str]]:
    """The builds' cache counters (store/stats.json), as rows of `store stats`."""
    if not c.get("builds") and not c.get("bytes_uploaded") and not c.get("bytes_downloaded"):
        return [("cache lookups", "none counted yet")]
    since = time.strftime("%Y-%m-%d %H:%M", time.localtime(c["since"])) if c["since"] else "?"
    rows = [("builds counted", f"{c['builds']} since {since}"),
            ("local cache", f"{c['local_hits']} hits, {c['local_misses']} misses")]
    incomplete = f" ({c['remote_incomplete']} incomplete)" if c["remote_incomplete"] else ""
    rows.append(("remote cache", f"{c['remote_hits']} hits, {c['remote_misses']} misses"
                 f"{incomplete}; {human_size(c['bytes_downloaded'])} downloaded in "
                 f"{_count(c['blobs_downloaded'], 'blob')}"))
    rows.append(("uploaded", f"{_count(c['entries_uploaded'], 'entry')}, "
                 f"{_count(c['blobs_uploaded'], 'blob')}, {human_size(c['bytes_uploaded'])}"))
    kinds = ", ".join(f"{why} {n}" for why, n in c["rejected"].items())
    rows.append(("refused from remote",
                 f"{c['rejected_total']}" + (f" ({kinds})" if kinds else "")))
    if c["remote_errors"] or c["remote_disabled"]:
        rows.append(("remote failures", f"{_count(c['remote_errors'], 'failed request')}; "
                     f"disabled in {_count(c['remote_disabled'], 'build')}"))
    return rows


# -- verify ---------------------------------------------------------------------------------------

def _verify(store: Any, args: argparse.Namespace, rep: Reporter) -> int:
    from ..store.maintenance import verify

    report = verify(store, repair=args.repair, wait=args.wait)
    for f in report.findings:
        used = f"; used by {', '.join(f.users)}" if f.users else ""
        text = f"{display_path(f.path)}: {f.kind}: {f.detail}{used}"
        if f.failing and not f.repaired:
            rep.error(Problem(f"{f.kind}: {f.detail}{used}", file=str(f.path)))
        elif f.repaired:
            rep.line(f"repaired: {text} -> {f.repaired}")
        else:
            rep.line(f"note: {text}")
    problems = report.problems
    kinds = sorted({f.kind for f in problems})
    counts = ", ".join(_count(sum(f.kind == k for f in problems), k) for k in kinds)
    notes = len(report.findings) - len(problems)
    status = ("no problems" if not problems else f"{_count(len(problems), 'problem')} ({counts})"
              + (", all repaired" if report.ok else ""))
    checked = (f"{_count(report.blobs, 'blob')}, {_count(report.entries, 'action-cache entry')}, "
               f"{_count(report.histories, 'history')}")
    if rep.mode == "json":
        rep.emit({"ok": report.ok, "store": display_path(store.root), "repair": args.repair,
                  "checked": {"blobs": report.blobs, "entries": report.entries,
                              "histories": report.histories},
                  "problems": len(problems), "notes": notes,
                  "findings": [f.to_json() for f in report.findings]})
    else:
        rep.heading(f"store verify: {checked} checked: {status}"
                    + (f"; {_count(notes, 'note')}" if notes else ""))
    return 0 if report.ok else 1


# -- gc -------------------------------------------------------------------------------------------

def _gc(store: Any, args: argparse.Namespace, rep: Reporter) -> int:
    from ..store.maintenance import GcOptions, gc

    options = GcOptions(older_than=args.older_than, max_size=args.max_size,
                        include_referenced=args.include_referenced, dry_run=args.dry_run,
                        wait=args.wait)
    report = gc(store, options)
    for error in report.errors:
        rep.error(Problem(f"could not remove: {error}"))
    if not report.fits:
        rep.warning(Problem(
            f"the blobs kept take {human_size(report.kept_bytes)}, over --max-size "
            f"{human_size(options.max_size or 0)}: the last build of each recipe needs them",
            hint=None if options.include_referenced else "add --include-referenced to let "
            "them go too"))
    if rep.mode == "json":
        rep.emit({"ok": not report.errors, "store": display_path(store.root),
                  **report.to_json()})
        return 1 if report.errors else 0
    removed = [_count(n, NOUNS[what]) + (f" ({human_size(b)})" if b else "")
               for what, (n, b) in report.removed.items() if n]
    verb = "would remove" if report.dry_run else "removed"
    head = f"store gc{' (dry run)' if report.dry_run else ''}: "
    rep.heading(head + (f"{verb} {', '.join(removed)}" if removed else "nothing to remove"))
    rep.line(f"  kept {_count(report.kept_blobs, 'blob')} ({human_size(report.kept_bytes)}) "
             f"and {_count(report.kept_entries, 'action-cache entry')} "
             f"({report.referenced_entries} used by the last build of a recipe)")
    return 1 if report.errors else 0


# -- ls -------------------------------------------------------------------------------------------

def _ls(store: Any, args: argparse.Namespace, rep: Reporter) -> int:
    from ..store.maintenance import list_entries

    entries, malformed, kinds = list_entries(store, args.kind)
    if malformed:
        rep.note(f"{malformed} malformed action-cache entries not listed; run 'udo-build store "
                 "verify'")
    if rep.mode == "json":
        rep.emit({"ok": True, "store": display_path(store.root), "kind": args.kind,
                  "entries": [e.to_json() for e in entries], "malformed": malformed})
        return 0
    if not entries:
        have = f"; kinds here: {', '.join(kinds)}" if args.kind and kinds else ""
        rep.line(f"no action-cache entries{f' of kind {args.kind}' if args.kind else ''}{have}")
        return 0
    now = time.time()
    rows = [[e.key[:12], e.kind, e.description,
             ", ".join(f"{name} {human_size(o['size']) if o['size'] is not None else '?'}"
                       for name, o in e.outputs.items()),
             _ago(now, e.last_used), e.referenced] for e in entries]
    rep.table(f"action cache ({_count(len(entries), 'entry')})",
              ["key", "kind", "description", "outputs", "last used", "referenced"], rows)
    return 0


_HANDLERS = {"stats": _stats, "verify": _verify, "gc": _gc, "ls": _ls}


# -- formatting -----------------------------------------------------------------------------------

def _count(n: int, noun: str) -> str:
    if n == 1:
        return f"1 {noun}"
    plural = noun[:-1] + "ies" if noun.endswith("y") else noun + "s"
    return f"{n} {plural}"


def _ago(now: float, when: Any) -> str:
    if not isinstance(when, (int, float)):
        return "-"
    seconds = max(0.0, now - when)
    for limit, unit, scale in ((60, "s", 1), (3600, "min", 60), (86400, "h", 3600)):
        if seconds < limit:
            return f"{seconds / scale:.0f} {unit} ago"
    return f"{seconds / 86400:.0f} d ago"
