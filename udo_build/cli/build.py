"""`udo-build [build] RECIPE [ACTION-ID ...]`: build what is stale, reuse what is cached.

Prints a summary (built / cached / failed / skipped, hit rate, time); with --json exactly one
JSON object. --dry-run plans and says what would run and why, running nothing. With a remote
cache (--remote, or configured: see cli/remote.py) local misses are looked up there, and with
--remote-upload or --ci what this build makes is uploaded.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

from ..errors import (
    EXIT_INTERNAL,
    EXIT_STEP_FAILED,
    EXIT_USER_ERROR,
    Diagnostics,
    StepFailed,
    UserError,
    display_path,
)
from .remote import (
    add_remote_arguments,
    open_remote,
    remote_line,
    remote_summary,
    upload_wanted,
)
from .reporter import Reporter


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
    add_remote_arguments(parser, upload=True)


def add_store_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--store", metavar="DIR",
                        help="the artifact store (default: $UDO_BUILD_STORE or ./store)")


def _jobs(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def run(args: argparse.Namespace, rep: Reporter) -> int:
    from ..store import Store, default_store_path

    started = time.perf_counter()
    store = Store(default_store_path(args.store))
    try:
        with store.build_lock():
            recipe, states, out = _build(store, args, rep)
            store.finish(count=not args.dry_run)
        summary = _summary(recipe.name, recipe.path, store.root, out, states, args.dry_run,
                           time.perf_counter() - started)
        summary["remote"] = remote_summary(store)
    finally:
        store.close()
    _report(rep, summary, states, args.debug)
    return _exit_code(states)


def _build(store: Any, args: argparse.Namespace,
           rep: Reporter) -> tuple[Any, dict[str, Any], Path]:
    from ..builder.engine import Engine, Options
    from ..builder.history import save_history
    from ..builder.outputs import materialize
    from ..builder.plan import plan_recipe
    from ..recipe import load_recipe

    diag = Diagnostics()
    recipe = load_recipe(args.recipe, diag, checked=store.root / "checked")
    for warning in diag.warnings:
        rep.warning(warning)
    open_remote(args, store, recipe.path.parent, rep, upload=upload_wanted(args))
    full = plan_recipe(recipe)
    plan = full.select(args.targets) if args.targets else full
    options = Options(jobs=args.jobs, keep_going=args.keep_going, dry_run=args.dry_run,
                      remote="peek" if args.dry_run else "fetch")
    with rep.progress(len(plan.actions)) as progress:
        states = Engine(store, plan, options, progress.update).run()
    out = Path(args.out) if args.out else Path("out") / recipe.name
    if not args.dry_run:
        save_history(store, recipe.path, recipe.name, states, list(full.actions))
        results = [(s.result, s.action.published(s.result)) for s in states.values()
                   if s.result is not None]
        if results or (out / ".udo-build-manifest.json").exists():
            materialize(store, out, results, prune=not args.targets)
    return recipe, states, out


def _summary(name: str, path: Path, store: Path, out: Path, states: dict[str, Any],
             dry_run: bool, seconds: float) -> dict[str, Any]:
    counts = {s: sum(1 for st in states.values() if st.status == s)
              for s in ("built", "cached", "failed", "skipped")}
    reused = counts["cached"] + counts["built"]
    actions = []
    for st in states.values():
        row: dict[str, Any] = {"id": st.id, "kind": st.action.kind, "status": st.status,
                               "key": st.key, "seconds": round(st.seconds, 4)}
        if st.status == "cached" and st.origin:
            row["source"] = st.origin
        if st.reason:
            row["reason"] = st.reason
        if st.result is not None and st.result.description:
            row["description"] = st.result.description
        if dry_run:
            row["would_run"] = st.would_run
        if st.error is not None:
            row["error"] = [p.to_json() for p in _problems(st.error)]
        actions.append(row)
    return {
        "ok": counts["failed"] == 0, "recipe": name, "file": display_path(path),
        "store": display_path(store), "out": None if dry_run else display_path(out),
        "dry_run": dry_run, "actions": actions, "executed": counts["built"],
        "cached": counts["cached"], "failed": counts["failed"], "skipped": counts["skipped"],
        "hit_rate": round(counts["cached"] / reused, 4) if reused else None,
        "seconds": round(seconds, 4),
    }


def _problems(error: BaseException) -> list[Any]:
    from ..builder.engine import error_problems

    return error_problems(error)


def _report(rep: Reporter, summary: dict[str, Any], states: dict[str, Any], debug: bool) -> None:
    from ..builder.execute import InternalActionError

    for st in states.values():
        if st.status != "failed":
            continue
        internal = not isinstance(st.error, (UserError, StepFailed))
        rep.failure(f"{st.id} ({st.action.label})"
                    + (": a bug of udo-build, please report it" if internal else ""),
                    _problems(st.error))
        if internal and debug and isinstance(st.error, InternalActionError):
            rep.note(st.error.trace)
        elif internal and not debug:
            rep.note("rerun with --debug for the traceback")
    if rep.mode == "json":
        rep.emit(summary)
        return
    for st in states.values():  # what each run found: the record it used, its checks
        if st.action.kind == "run" and st.result is not None and st.status == "built":
            rep.line(st.result.description)
    if summary["dry_run"]:
        would = [st for st in states.values() if st.would_run]
        for st in would:
            rep.line(f"would run  {st.id}: {st.reason}")
    from ..builder.actions import get_kind

    unavailable = sorted({st.action.kind for st in states.values()
                          if get_kind(st.action.kind) is None})
    parts = [f"{summary['executed']} built", f"{summary['cached']} cached",
             f"{summary['failed']} failed", f"{summary['skipped']} skipped"]
    rate = summary["hit_rate"]
    line = (f"{summary['recipe']}: {', '.join(parts)} in {summary['seconds']:.2f} s"
            + (f"; cache hit rate {rate:.0%}" if rate is not None else ""))
    rep.heading(line)
    if unavailable:
        rep.line(f"  not available yet in this udo-build: {', '.join(unavailable)} (those "
                 "actions and what needs them are skipped)")
    if summary["remote"]:
        rep.line(f"  {remote_line(summary['remote'])}")
    if summary["out"] and not summary["dry_run"]:
        rep.line(f"  outputs in {summary['out']}")


def _exit_code(states: dict[str, Any]) -> int:
    errors = [st.error for st in states.values() if st.status == "failed"]
    if not errors:
        return 0
    if any(not isinstance(e, (UserError, StepFailed)) for e in errors):
        return EXIT_INTERNAL  # a bug of udo-build, not of the inputs
    if any(isinstance(e, StepFailed) for e in errors):
        return EXIT_STEP_FAILED
    return EXIT_USER_ERROR
