"""The library under the command line: a build of a recipe, from its file to its output folder.

`run_build` loads the recipe, plans it, opens the store (and the remote tier the options,
environment and config files name), runs the engine, records the build's history, updates the
output folder and returns a `BuildReport`; `explain_build` runs the same plan dry and says why
each action would run. `run_workspace` builds several recipes as one graph (see workspace.py),
`explained_workspace` explains them. The commands `cache push|pull` (see `transfer`) and
`package` (see `generate`) go through the same pieces. Nothing here prints: warnings and
progress go to the caller's `Events` (the CLI's reporter), results come back as values. The
values are NamedTuples: immutable and typed like frozen dataclasses, and much cheaper to define
(a full no-op build imports this module; what a build returns is defined in outcome.py, which a
replayed no-op imports without this module).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, ExitStack, contextmanager, nullcontext
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from ..errors import Diagnostics, Problem, UserError
from .outcome import ActionOutcome, BuildReport  # the values a build returns: defined there
from .settings import (
    RemoteRequest,
    executor_setting,
    open_remote,
    remote_summary,
)

if TYPE_CHECKING:
    from ..recipe import Recipe
    from ..recipe.workspace import Listing
    from ..store import Store
    from .engine import ActionState, Options
    from .executors import Executor
    from .explain import Explanation
    from .owner import Owner
    from .plan import Plan, Shard
    from .uptodate import Told
    from .workspace import Member, WorkspaceReport

class Listener(Protocol):
    def update(self, event: str, state: ActionState) -> None: ...


class Events(Protocol):
    """Where a build tells what happens while it runs (the CLI's reporter is one)."""

    def warning(self, problem: Problem) -> None: ...

    def progress(self, total: int) -> AbstractContextManager[Listener]: ...


class Quiet:
    """Events that go nowhere."""

    def warning(self, problem: Problem) -> None:
        pass

    def progress(self, total: int) -> AbstractContextManager[Listener]:
        return nullcontext(self)

    def update(self, event: str, state: ActionState) -> None:
        pass


class BuildRequest(NamedTuple):
    """What to build (a recipe, optionally some of its actions) and where."""

    recipe: str
    targets: tuple[str, ...] = ()
    store: str | None = None  # None: $UDO_BUILD_STORE or ./store
    out: str | None = None  # None: ./out/<recipe name>
    jobs: int = 0  # 0: the number of cores
    keep_going: bool = False
    dry_run: bool = False
    remote: RemoteRequest = RemoteRequest()
    shard: Shard | None = None  # build only this shard's actions; write no output folder
    shard_wait: float = 1800.0  # seconds the last shard waits for the others' work
    remote_optional: bool = False  # a shard whose results could not all be uploaded is ok
    executor: str | None = None  # where actions run (None: the settings'; see settings.py)
    strict: bool = False  # what is a warning refuses the build (exit 2) before publishing
    download: str | None = None  # all | outputs | minimal (None: see outputs.download_mode)
    command_line: tuple[str, ...] = ()  # the CLI's words: its no-op is recorded under them


class ExplainReport(NamedTuple):
    recipe: str  # its name
    explanations: tuple[Explanation, ...]


# -- the pieces every command shares --------------------------------------------------------------

@contextmanager
def opened_store(where: str | None, *, create: bool = True) -> Iterator[Store]:
    """The store at `where` (default: $UDO_BUILD_STORE or ./store), closed after use."""
    from ..store import Store, default_store_path

    store = Store(default_store_path(where), create=create)
    try:
        yield store
    finally:
        store.close()


def load(store: Store, recipe: str, events: Events) -> Recipe:
    """The recipe at `recipe` (its warnings told), checked against the store's memo."""
    from ..recipe import load_recipe

    diag = Diagnostics()
    loaded = load_recipe(recipe, diag, checked=store.root / "checked")
    for warning in diag.warnings:
        events.warning(warning)
    return loaded


def plan(recipe: Recipe, targets: tuple[str, ...]) -> tuple[Plan, Plan]:
    """(the whole plan, the part that `targets` select: all of it without targets)."""
    from .plan import plan_recipe

    full = plan_recipe(recipe)
    return full, full.select(list(targets)) if targets else full


def run_plan(store: Store, selected: Plan, options: Options, events: Events | None = None,
             executor: Executor | None = None) -> dict[str, ActionState]:
    """Run the engine over a plan, telling its progress to `events` (its actions on
    `executor` when one is given, else on the one `options` name)."""
    from .engine import Engine

    with (events or Quiet()).progress(len(selected.actions)) as progress:
        return Engine(store, selected, options, progress.update, executor).run()


@contextmanager
def cluster_executor(store: Store, options: Options) -> Iterator[Executor | None]:
    """The Dask cluster `options` name, reached before anything is written (an unreachable one
    is a user error), closed after; None when the build runs on this machine, or is dry."""
    if not options.executor or options.dry_run:
        yield None
        return
    from .executors import open_executor

    executor = open_executor(options.executor, store, options.jobs)
    try:
        yield executor
    finally:
        executor.close()


# -- build and explain ----------------------------------------------------------------------------

def replayed(request: BuildRequest, events: Events) -> BuildReport | None:
    """The build as its recorded no-op, when everything that no-op read is as it was (see
    uptodate.py); None when it must run. (The CLI replays a build by its words, before it
    parses them: `uptodate.replayed_command_line`.)"""
    from .uptodate import replay

    found = replay(request, events)
    return None if found is None else BuildReport.of_record(*found)


def run_build(request: BuildRequest, events: Events) -> BuildReport:
    """Build what is stale, reuse what is cached, update the output folder. A build that was
    a no-op is recorded for `uptodate.replay` (see there)."""
    from ..recipe.workspace import Listing
    from .uptodate import Told

    listing = Listing((Path(request.recipe),))
    told = Told(events, time.time_ns())  # what changed after this moment is not recorded
    report, members = _run(listing, request, told)
    if request.dry_run:
        return report
    report = _with_page(report, members[0].out, events)
    if told.draft is not None and not told.other:
        told.draft.save(report, told.kept)
    return report


def run_workspace(listing: Listing, request: BuildRequest, events: Events) -> WorkspaceReport:
    """Build the recipes of `listing` as one graph (the request says how; its `recipe` and
    `out` are not read as a recipe's: see builder.workspace); one report page for them all."""
    from .report_workspace import write_workspace_page
    from .workspace import workspace_report

    total, members = _run(listing, request, events)
    report = workspace_report(listing, members, total, Path(request.out or "out"))
    if request.dry_run:
        return report
    try:
        page = write_workspace_page(report, Path(request.out or "out"))
    except OSError as exc:
        events.warning(Problem(f"the build report page cannot be written: {exc}",
                               file=str(request.out or "out")))
        return report
    return report._replace(total=report.total._replace(page=page), recipes=tuple(
        r._replace(page=page) for r in report.recipes))


def _run(listing: Listing, request: BuildRequest,
         events: Events | Told) -> tuple[BuildReport, list[Member]]:
    """The build of every recipe of `listing` (the report of them all, with a recipe alone's
    name, file and output folder) and its members."""
    from .outputs import download_mode, left_in_remote

    started = time.perf_counter()
    with opened_store(request.store) as store:
        with store.build_lock():
            members, states, where = _build(store, listing, request, events)
            store.finish(count=not request.dry_run)
            mode = download_mode(request.download, request.dry_run, request.shard is not None)
            left = left_in_remote(store, mode, states.values())
        unpublished = _unpublished(store, request)
        note = store.unrecorded()  # a read-only or full store: what it could not keep
        if note is not None:
            events.warning(note)
        seconds = time.perf_counter() - started
        remote = remote_summary(store)
    first = members[0]
    published = not request.dry_run and request.shard is None  # a shard writes no folder
    report = BuildReport(first.recipe.name, first.recipe.path, store.root,
                         first.out if published else None, request.dry_run,
                         tuple(ActionOutcome.of(s) for s in states.values()), seconds, remote,
                         None if request.shard is None else str(request.shard), where,
                         unpublished=unpublished, download=left)
    return report, members


def _unpublished(store: Store, request: BuildRequest) -> int:
    """How many results a shard could not upload (its uploads are done): a shard must fill
    the remote, unless --remote-optional says otherwise."""
    if request.shard is None or request.dry_run or request.remote_optional \
            or store.remote is None:
        return 0
    return len(store.remote.unpublished)


def _with_page(report: BuildReport, out: Path, events: Events) -> BuildReport:
    """The report with its page written beside the output folder `out` (a warning, not a
    failure, when it cannot be written: the build itself is done)."""
    from .report_page import write_page

    try:
        return report._replace(page=write_page(report, out))
    except OSError as exc:
        events.warning(Problem(f"the build report page cannot be written: {exc}",
                               file=str(out)))
        return report


def _build(store: Store, listing: Listing, request: BuildRequest,
           events: Events | Told) -> tuple[list[Member], dict[str, ActionState], str]:
    """(the recipes, their actions' states, where actions ran); with `Told` events, the
    draft of its no-op record (see uptodate.py) when it was one."""
    from .engine import Options
    from .outputs import check_outside_store, download_mode, owned
    from .uptodate import Told, keeping, record
    from .workspace import members as members_of
    from .workspace import merged_plan, save_histories

    with keeping(events):
        members = members_of([load(store, str(p), events) for p in listing.recipes],
                             request.out, listing.combined)
    sharded = request.shard is not None and not request.dry_run  # it must upload its work
    open_remote(store, listing.folder, request.remote, events.warning, need_upload=sharded)
    full, selected = merged_plan(members, request.targets)
    options = Options(jobs=request.jobs, keep_going=request.keep_going,
                      dry_run=request.dry_run, remote="peek" if request.dry_run else "fetch",
                      executor=executor_setting(listing.folder, request.executor),
                      download=download_mode(request.download, request.dry_run, sharded))
    where = _where(options)
    if request.dry_run:  # a dry shard: what the whole selection would run
        return members, run_plan(store, selected, options, events), where
    if not sharded:
        for member in members:
            check_outside_store(member.out, store.root)
    with cluster_executor(store, options) as executor:
        def run(part: Plan, opts: Options = options, quiet: bool = False
                ) -> dict[str, ActionState]:
            return run_plan(store, part, opts, None if quiet else events, executor)

        if sharded:  # a shard fills the remote; the join build writes the output folders
            states = _shard(store, members, selected, request, options, events, run)
            with store.recording("the build's history"):
                save_histories(store, members, states, full)
            return members, states, where
        with ExitStack() as stack:
            owners = [stack.enter_context(owned(m.out, _waiting(m.out, events)))
                      for m in members]
            states = run(selected)
            with keeping(events):
                _tell_overrides(store, members, states, events, request.strict)
            for member, owner in zip(members, owners, strict=True):
                states.update(_publish(store, member.out, selected, run,
                                       member.states(states), events, owner,
                                       prune=not request.targets,
                                       minimal=options.download == "minimal"))
            _tell_healed(states, events)
            with store.recording("the build's history"):
                save_histories(store, members, states, full)
            if isinstance(events, Told) and not listing.combined and not options.executor:
                events.draft = record(store, request, members[0].recipe, members[0].out,
                                      states, events.started_ns)
    return members, states, where


def _waiting(out: Path, events: Events) -> Callable[[str], None]:
    return lambda text: events.warning(Problem(text, file=str(out)))


def _tell_overrides(store: Store, members: list[Member], states: dict[str, ActionState],
                    events: Events, strict: bool) -> None:
    """Override encodings naming tensors a model lacks: warnings, or under --strict a user
    error before anything is published; and the op definitions' warnings (once each, when
    recipes share their op definitions)."""
    from .kinds.opdef import opdef_problems
    from .kinds.quantize import override_problems

    problems: list[Problem] = []
    told: list[Problem] = []
    for member in members:
        mine = member.states(states)
        problems += override_problems(store, member.recipe, mine)
        told += opdef_problems(store, member.recipe, mine)
    problems = list(dict.fromkeys(problems))
    if problems and strict:
        raise UserError(problems=problems)
    for problem in dict.fromkeys([*told, *problems]):
        events.warning(problem)


def _shard(store: Store, members: list[Member], selected: Plan, request: BuildRequest,
           options: Options, events: Events, run: Any) -> dict[str, ActionState]:
    from .shards import ShardBuild, build_shard
    from .workspace import merged_history

    assert request.shard is not None
    return build_shard(ShardBuild(store, selected, request.shard, options, events, run,
                                  request.shard_wait, merged_history(store, members)))


def _where(options: Options) -> str:
    """Where the engine runs this build's actions (see executors.open_executor)."""
    import os

    jobs = options.jobs or os.cpu_count() or 1
    if options.executor:
        return f"Dask at {options.executor}"
    return "inline" if jobs <= 1 else f"{jobs} local workers"


def _publish(store: Store, out: Path, selected: Plan, run: Any,
             states: dict[str, ActionState], events: Events, owner: Owner, *,
             prune: bool, minimal: bool = False) -> dict[str, ActionState]:
    """Update the output folder; when a blob it needs turns out missing or corrupt (then it
    is quarantined), run the plan once more (only those actions run) and update it again."""
    from .outputs import MANIFEST, MissingContent, materialize

    for attempt in (1, 2):
        results = [(s.result, s.action.published(s.result)) for s in states.values()
                   if s.result is not None]
        if not results and not (out / MANIFEST).exists():
            return states
        try:
            sync = materialize(store, out, results, prune=prune, owner=owner, minimal=minimal)
        except MissingContent:
            if attempt == 2:
                raise
            again = run(selected)
            states = {i: s if s.status == "built" else again[i] for i, s in states.items()}
            continue
        if sync.damaged:
            events.warning(Problem(
                f"{len(sync.damaged)} files did not hold what the last build wrote there "
                f"(changed or damaged since); written again: {', '.join(sync.damaged[:3])}"
                + (", ..." if len(sync.damaged) > 3 else ""), file=str(out)))
        break  # written (a second pass would only hash every file again)
    return states


def _tell_healed(states: dict[str, ActionState], events: Events) -> None:
    """One line per action whose cached outputs were missing or corrupt and were made again."""
    for state in states.values():
        if state.healed and state.status in ("built", "cached"):
            events.warning(Problem(f"{state.id}: {state.reason}"))


def explain_build(request: BuildRequest, events: Events) -> ExplainReport:
    """Why each action of the request would run (or is up to date), against its last build."""
    recipe, _, found = explained_plan(request, events)
    return ExplainReport(recipe.name, tuple(found))


def explained_plan(request: BuildRequest,
                   events: Events) -> tuple[Recipe, Plan, list[Explanation]]:
    """A dry run of the request: the recipe, the actions it selects and why each would run
    (`explain` and `graph` both read it)."""
    from ..recipe.workspace import Listing

    members, selected, found = explained_workspace(Listing((Path(request.recipe),)), request,
                                                   events)
    return members[0].recipe, selected, found


def explained_workspace(listing: Listing, request: BuildRequest,
                        events: Events) -> tuple[list[Member], Plan, list[Explanation]]:
    """A dry run of the recipes of `listing` as one graph: the recipes, the actions the
    request selects (by the merged plan's ids, see builder.workspace) and why each would run,
    against each recipe's last build."""
    from .engine import Options
    from .explain import explain
    from .workspace import members as members_of
    from .workspace import merged_history, merged_plan

    with opened_store(request.store) as store, store.build_lock():  # it reads like a build
        members = members_of([load(store, str(p), events) for p in listing.recipes],
                             request.out, listing.combined)
        selected = merged_plan(members, request.targets)[1]
        states = run_plan(store, selected, Options(dry_run=True))
        return members, selected, explain(states, merged_history(store, members))
