"""The scheduler: resolve keys in dependency order, reuse cached results, run the rest.

An action's key is known once its inputs are: source files by their digest, other actions'
outputs once those are cached or built. So keys are resolved as the build goes, which gives early
cut-off for free: an upstream action that rebuilds to the same bytes leaves its dependents cached.

Actions run in worker processes (`-j N`), or in this process for `-j 1`. Fail-fast by default:
after a failure nothing new starts, and what was running finishes; `keep_going` builds everything
that does not depend on a failure. Actions with equal keys in one build run once: the others
are cached, with the reason naming the action that ran (two spellings of one target).

With a remote tier, a local miss is looked up there in the background; a hit counts at once while
its blobs download (`_settle`); an action whose blobs could not be had runs here, and what follows.
What a hit downloads is `Options.download`: every blob ("all"), those the output folder gets
("outputs"), or none ("minimal": its blobs are proven to be in the remote). An action that runs
here reads its inputs from the store: those that stayed remote are downloaded just before it
starts (`_fetch_inputs`, only its own), and when one cannot be had, its producer runs here.

A running action tells its inner progress (see executors): the listener gets ("step", state)
with `state.step` = (what, done, total); the remote hits' downloads that the build waits for
are told the same way, as one part "remote downloads" of the last one that arrived.

A local hit is checked (see `ActionCache`): an entry whose output blob is missing or corrupt is a
miss, so the action runs again (or is fetched again) in this build, and its state keeps a note
(`healed`) that says what was wrong. An action that finds an input blob corrupt makes its
producer run again (`_rebuild_producer`): nothing is built from bad bytes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import Problem, StepFailed, UserError
from ..store import ActionResult, Store
from .actions import ActionKind, MissingInput, get_kind, load_kinds
from .ahead import SourceDigests
from .execute import ActionSpec, Failed, InternalActionError, machine_fault
from .lookahead import ChainKeys, look_ahead
from .plan import Plan, PlannedAction, Source

if TYPE_CHECKING:  # concurrent.futures is imported only when an action runs
    import concurrent.futures as cf

    from .action_io import ActionInput
    from .executors import Executor

STATUSES = ("built", "cached", "failed", "skipped")


SAME_KEY = "the same key as"  # the reason of an action whose key another of the build ran


@dataclass
class ActionState:
    """An action as the engine tracks it through a build: status, key, input digests, result."""

    action: PlannedAction
    status: str = "pending"  # pending | running | waiting | built | cached | failed | skipped
    key: str | None = None
    inputs: dict[str, str] = field(default_factory=dict)  # input name -> digest, as keyed
    names: dict[str, str] = field(default_factory=dict)  # input name as keyed -> as planned
    result: ActionResult | None = None
    seconds: float = 0.0  # how long it ran (in its worker): its kind and storing its outputs
    queued: float = 0.0  # the rest of the time since it was submitted: waiting for a worker,
    # for its lock (another build of its key), and for its result to come back
    reason: str = ""
    error: BaseException | None = None
    started: float = 0.0
    cause: ActionState | None = None  # for a skip: the action that is not built
    would_run: bool = False  # dry run: this action would execute
    sharing: bool = False  # another action of this build with its key ran (or, dry: would run)
    retries: int = 0  # times rescheduled because an input blob was corrupt
    origin: str = ""  # for a cached action: "local" or "remote" (the tier that had it)
    healed: str = ""  # what was wrong with its cached outputs in the store (then made again)
    step: tuple[str, int, int] | None = None  # its inner progress: (what, done, total)

    @property
    def id(self) -> str:
        return self.action.id

    @property
    def done(self) -> bool:
        return self.status in STATUSES


Listener = Callable[[str, ActionState], None]  # ("start" | "step" | "finish", state)
STEP_POLL = 0.1  # seconds between looks at the workers' progress while actions run


@dataclass
class Options:
    """How the engine runs a plan (jobs, keep-going, dry run, the remote tier, executor,
    downloads)."""

    jobs: int = 0  # 0: the number of cores
    keep_going: bool = False
    dry_run: bool = False
    remote: str = "fetch"  # the remote tier, if any: "fetch" hits, "peek" (entries only), "off"
    download: str = "all"  # what a remote hit downloads: all | outputs | minimal (see DOWNLOADS)
    executor: str = ""  # where actions run: "" this machine, "dask://HOST:PORT" a Dask cluster


class Engine:
    def __init__(self, store: Store, plan: Plan, options: Options,
                 listener: Listener | None = None, executor: Executor | None = None) -> None:
        load_kinds()
        self.store = store
        self.plan = plan
        self.options = options
        self.jobs = options.jobs or os.cpu_count() or 1
        self.listener = listener or (lambda event, state: None)
        self.states = {aid: ActionState(a) for aid, a in plan.actions.items()}
        self.stopping = False
        self._pool: Executor | None = executor  # given: the caller's to close
        self._own_pool = executor is None
        self._running: dict[cf.Future[Any], list[ActionState]] = {}
        self._by_key: dict[str, cf.Future[Any]] = {}
        self._fetching: set[cf.Future[Any]] = set()  # lookups in the remote tier
        self._downloads: dict[cf.Future[Any], list[ActionState]] = {}  # blobs of remote hits
        self._waiting: list[list[ActionState]] = []  # misses that run once those are stored
        self._local_only: set[str] = set()  # keys whose remote blobs could not be had
        self._sources: dict[tuple[Any, str], str] = {}  # a source's digest, once per build
        self._stored: dict[Any, tuple[str, int]] = {}  # a source's blob: digest, size
        self._built: dict[str, str] = {}  # key -> the action of this build that ran it
        self._submitting: ActionState | None = None
        self._ahead: SourceDigests | None = None  # source digests taken in the background
        self._chain = ChainKeys(plan, self._source_digest)  # see lookahead
        self._early: dict[str, tuple[cf.Future[Any], bool]] = {}  # action id -> its lookup
        # by chain key, started with the build (see `_look_ahead`), and whether by an index key
        self._indexed: set[cf.Future[Any]] = set()  # lookups by an index key, in flight

    # -- resolving keys ---------------------------------------------------------------------------

    def resolve(self, state: ActionState, kind: ActionKind) -> str | None:
        """Compute the key from the inputs; None when an input is not known yet. Inputs a kind
        reads as a set are keyed (and handed to it) deduplicated and renumbered by digest."""
        digests: dict[str, str] = {}
        for name, source in state.action.inputs.items():
            if isinstance(source, Source):
                digests[name] = self._source_digest(source)
                continue
            upstream = self.states[source.action]
            if upstream.result is None:
                return None
            output = upstream.result.outputs.get(source.output)
            if output is None:
                raise InternalActionError(upstream.action.kind, f"has no output {source.output!r}"
                                          f" (it has {', '.join(upstream.result.outputs)})", "")
            digests[name] = output.digest
        self._keyed(state, kind, digests)
        state.key = kind.key(state.action.params, state.inputs)
        return state.key

    def _keyed(self, state: ActionState, kind: ActionKind | None,
               digests: dict[str, str]) -> None:
        """The inputs by the names they are keyed with (all of them known)."""
        state.names = kind.keyed_names(digests) if kind else {n: n for n in digests}
        state.inputs = {name: digests[planned] for name, planned in state.names.items()}

    def _known_inputs(self, state: ActionState) -> None:
        """The input digests known without running anything (for explanations): as keyed when
        all are known, else by their planned names."""
        digests: dict[str, str] = {}
        for name, source in state.action.inputs.items():
            if isinstance(source, Source):
                digests[name] = self._source_digest(source)
            else:
                result = self.states[source.action].result
                if result is not None and source.output in result.outputs:
                    digests[name] = result.outputs[source.output].digest
        if len(digests) == len(state.action.inputs):
            self._keyed(state, get_kind(state.action.kind), digests)
        else:
            state.inputs = digests

    def _source_digest(self, source: Source) -> str:
        """A source file's digest, taken once per build (one kernels file feeds every
        prepare)."""
        known = self._sources.get((source.path, source.digest))
        if known is not None:
            return known
        try:
            wanted = (source.path, source.digest)
            digest = self._ahead.get(self.store.files, wanted) if self._ahead is not None \
                else self.store.files.digest(source.path, kind=source.digest)[0]
            self._sources[wanted] = digest
            return digest
        except FileNotFoundError:
            raise UserError("an input file vanished during the build", file=source.path) from None
        except OSError as exc:
            raise UserError(f"an input file cannot be read: {exc.strerror}",
                            file=source.path) from None

    # -- the loop ---------------------------------------------------------------------------------

    def run(self) -> dict[str, ActionState]:
        try:
            self._look_ahead()  # its source digests taken here, before any thread competes
            self._ahead = SourceDigests(self.store.root, [
                (s.path, s.digest) for a in self.plan.actions.values()
                for s in a.inputs.values()
                if isinstance(s, Source) and (s.path, s.digest) not in self._sources])
            while True:
                progressed = self._schedule_ready()
                if self._downloads and not self._fetching and (
                        self._waiting or not (progressed or self._running)):
                    self._settle()
                    continue
                if not self._running:
                    if not progressed:
                        break
                    continue
                import concurrent.futures as cf

                polled = self._pool is not None and self._pool.drain()
                self._collect(cf.wait(self._running, STEP_POLL if polled else None,
                                      return_when=cf.FIRST_COMPLETED)[0])
        except BaseException:
            self._abort()
            raise
        finally:
            if self._ahead is not None:
                self._ahead.close()
                self._ahead = None
            if self._pool is not None and self._own_pool:
                self._pool.close()
        for state in self.states.values():
            if not state.done:
                self._finish(state, "skipped", reason="the build stopped before it")
        return self.states

    def _schedule_ready(self) -> bool:
        progressed = False
        for state in self.states.values():
            if state.status != "pending":
                continue
            deps = [self.states[d] for d in state.action.deps]
            if not all(d.done for d in deps):
                continue
            progressed = True
            blocked = [d for d in deps if d.status in ("failed", "skipped")]
            if blocked and self.options.dry_run and all(d.would_run or d.sharing
                                                        for d in blocked):
                state.would_run = True
                self._known_inputs(state)
                first = next(d for d in blocked if d.would_run or d is blocked[-1])
                self._finish(state, "skipped", reason=f"after {first.id}, if "
                             "its output changes")
            elif blocked:
                cause = blocked[0].cause or blocked[0]
                state.cause = cause
                self._finish(state, "skipped", reason=f"needs {cause.id}, which " + (
                    "failed" if cause.status == "failed" else "would run" if cause.would_run
                    else f"is {cause.reason}"))
            elif self.stopping:
                self._finish(state, "skipped", reason="the build stopped after a failure")
            else:
                self._start(state)
        return progressed

    def _start(self, state: ActionState) -> None:
        kind = get_kind(state.action.kind)
        if kind is None:
            self._finish(state, "skipped", reason=f"not available yet (action kind "
                         f"'{state.action.kind}' comes with a later udo-build)")
            return
        key = self.resolve(state, kind)
        assert key is not None  # every dependency is done
        early = self._early.get(state.id)
        if early is not None and not early[1]:  # a root that missed here, looked up ahead by
            hit = None  # its key: what that lookup stores here came from the remote (_fetch)
            self.store.counters.add(local_misses=1)
        else:
            hit, state.origin = self.store.lookup(key)
        if hit is not None:
            state.result = hit
            self._finish(state, "cached", reason=self._same_key(state))
            return
        state.healed = state.healed or self.store.ac.damage(key)
        if key in self._by_key:
            self._running[self._by_key[key]].append(state)  # same key: one execution
            state.status = "running"
        elif not self._fetch(state, key):
            self._miss([state], kind)

    def _fetch(self, state: ActionState, key: str, found: ActionResult | None = None) -> bool:
        """Look the key up in the remote tier, in the background (`found`: the result its
        chain key found, made for this key: its blobs); False: no remote to ask."""
        if self.options.remote == "off" or key in self._local_only:
            return False
        early = self._early.pop(state.id, None) if found is None else None
        if early is not None:  # looked up ahead by its chain key (see `_look_ahead`)
            future, indexed = early
            if indexed:
                self._indexed.add(future)
        else:
            action = state.action  # what it publishes is downloaded to be linked, not compressed
            future = self.store.fetch(key, peek=self.options.remote == "peek",
                                      linked=lambda result: action.published(result).values(),
                                      download=self.options.download, found=found)
        if future is None:
            return False
        state.status, state.started = "running", time.perf_counter()
        self._running[future] = [state]
        self._by_key[key] = future
        self._fetching.add(future)
        return True

    def _look_ahead(self) -> None:
        """Start the remote lookups of the actions downstream of a root action that misses
        locally, all at once, by their chain keys (see lookahead); each is collected when its
        action starts (`_fetch`)."""
        if self.options.remote == "fetch" and self.store.remote is not None:
            self._early = look_ahead(self.store, self.plan, self._chain, self.options.download)

    def _miss(self, states: list[ActionState], kind: ActionKind) -> None:
        """No cache has their key: run the first (once downloads of inputs are done)."""
        if self.options.dry_run:  # the first of a key would run; the others would share it
            for state in states:
                first = self._built.setdefault(state.key or "", state.id)
                state.would_run = first == state.id
                state.sharing = not state.would_run
                self._finish(state, "skipped", reason="no cache entry for its key"
                             if state.would_run else f"{SAME_KEY} {first}, which would run")
        elif self._downloads:
            for state in states:
                state.status = "waiting"
            self._waiting.append(states)
        else:
            self._submit(states[0], kind, states[1:])

    def _settle(self) -> None:
        """Wait for the blobs of the remote hits (no lookup is in flight now). An action whose
        blobs could not be had runs here, and what depends on it is resolved again; then the
        actions that waited for the downloads run."""
        import concurrent.futures as cf

        downloads, self._downloads = self._downloads, {}
        for done, future in enumerate(cf.as_completed(downloads), 1):
            states = downloads[future]
            self._step(states[0], "remote downloads", done, len(downloads))
            if not future.result():
                self._local_only.add(states[0].key or "")
                for state in states:
                    self._reset(state)
        waiting, self._waiting = self._waiting, []
        for states in waiting:
            states = [s for s in states if s.status == "waiting"]
            if states and self.stopping:
                for state in states:
                    self._finish(state, "skipped", reason="the build stopped after a failure")
            elif states:
                self._submit(states[0], get_kind(states[0].action.kind), states[1:])

    def _reset(self, state: ActionState) -> None:
        """Make an action and what follows it pending again (none runs: see `_miss`)."""
        todo = [state]
        while todo:
            st = todo.pop()
            if st.status != "pending":
                st.status, st.result, st.key, st.origin, st.reason = "pending", None, None, "", ""
                todo += [s for s in self.states.values() if st.id in s.action.deps]

    def _submit(self, state: ActionState, kind: ActionKind | None,
                others: list[ActionState] | None = None) -> None:
        assert kind is not None
        if not self._fetch_inputs(state, others or []):
            return
        state.status = "running"
        self.listener("start", state)
        state.started = time.perf_counter()
        try:
            inputs = self._spec_inputs(state)
        except OSError as exc:  # the store cannot take its sources (a full disk): it fails
            self._failed([state, *(others or [])], machine_fault(kind.name, exc), 0.0, 0.0)
            return
        spec = ActionSpec(kind.name, state.key or "", state.action.params, inputs,
                          state.action.label, self.cores_for())
        self._submitting = state  # an inline executor runs it (and tells its steps) in submit
        try:
            executor = self._executor()
            with workers_deaf_to_ctrl_c(executor):
                future = executor.submit(spec, dict(kind.resources))
        finally:
            self._submitting = None
        self._running[future] = [state, *(others or [])]
        self._by_key[state.key or ""] = future
        if future.done():  # ran in this process: record it before starting anything else
            self._collect({future})

    def _fetch_inputs(self, state: ActionState, others: list[ActionState]) -> bool:
        """Download the inputs of an action about to run that a remote hit left in the remote
        (`Options.download`): only its own, now. False when one cannot be had: its producer
        then runs here (never asking the remote again), and this action after it."""
        if self.options.download == "all":
            return True
        for planned in state.names.values():
            source = state.action.inputs[planned]
            if isinstance(source, Source):
                continue
            producer = self.states[source.action]
            if producer.origin != "remote" or producer.result is None:
                continue
            if not self.store.fetch_inputs([producer.result.outputs[source.output]]):
                self._local_only.add(producer.key or "")
                for st in (state, *others):
                    st.status = "waiting"  # not pending yet: `_reset` leaves pending ones
                self._reset(producer)
                return False
        return True

    def cores_for(self) -> int:
        """The cores an action started now may use (ActionContext.cores): this machine's cores
        shared by the actions that may run at once (those running and those ready to start,
        this one included, at most -j), at least 1; 1 on a cluster, whose workers' cores are
        their own. Read when the action starts: an action alone in the build (a quantize) gets
        every core, ten run steps ready together a tenth each."""
        if self.options.executor:
            return 1
        from ..runtime.pool import available_cores

        running = len(self._running) - len(self._fetching)
        ready = sum(1 for s in self.states.values() if s.status == "pending"
                    and all(self.states[d].done for d in s.action.deps))
        return max(1, available_cores() // max(1, min(self.jobs, running + ready + 1)))

    def _spec_inputs(self, state: ActionState) -> dict[str, ActionInput]:
        """The action's inputs by digest; its source files are stored as blobs first."""
        from .action_io import ActionInput  # here: a build that runs no action need not define it

        inputs = {}
        for name, planned in state.names.items():
            source = state.action.inputs[planned]
            if isinstance(source, Source):
                digest, size = self._source_blob(source)
                inputs[name] = ActionInput(digest, "blob", source.path.name, str(source.path),
                                           size)
            else:
                result = self.states[source.action].result
                assert result is not None
                output = result.outputs[source.output]
                inputs[name] = ActionInput(output.digest, output.type, size=output.size)
        return inputs

    def _source_blob(self, source: Source) -> tuple[str, int]:
        """A source file's bytes, stored in the store (once per build; a copy already there is
        checked, and stored again when damaged): their digest and size."""
        known = self._stored.get(source.path)
        if known is None:
            try:
                ref = self.store.cas.put_file(source.path)
            except FileNotFoundError:
                raise UserError("an input file vanished during the build",
                                file=source.path) from None
            known = self._stored[source.path] = (ref.digest, ref.size)
        return known

    def _executor(self) -> Executor:
        from .executors import open_executor

        if self._pool is None:
            self._pool = open_executor(self.options.executor, self.store, self.jobs,
                                       self._on_step)
        return self._pool

    def _on_step(self, key: str, what: str, done: int, total: int) -> None:
        """Inner progress of the action running `key` (from its executor)."""
        if self._submitting is not None and self._submitting.key == key:
            self._step(self._submitting, what, done, total)
            return
        future = self._by_key.get(key)
        states = self._running.get(future) if future is not None else None
        if states:
            self._step(states[0], what, done, total)

    def _step(self, state: ActionState, what: str, done: int, total: int) -> None:
        state.step = (what, done, total)
        self.listener("step", state)

    def _collected_fetch(self, future: cf.Future[Any], states: list[ActionState]) -> None:
        """A remote hit is cached at once (its blobs download meanwhile); a miss runs."""
        self._fetching.discard(future)
        self._by_key.pop(states[0].key or "", None)
        fetched = future.result()
        if future in self._indexed:  # by its chain key: its blobs, or a lookup by its key
            self._indexed.discard(future)
            self._fetch_again(states, None if fetched is None or fetched[0].key != states[0].key
                              else fetched[0])
            return
        if fetched is None:
            kind = get_kind(states[0].action.kind)
            assert kind is not None
            self._miss(states, kind)
            return
        result, blobs = fetched
        if blobs is not None:
            self._downloads[blobs] = states
        for state in states:
            state.result, state.origin = result, "remote"
            self._finish(state, "cached")

    def _fetch_again(self, states: list[ActionState], found: ActionResult | None) -> None:
        """After the lookup by chain key: download the blobs of the result it `found` for
        these actions' key, or (None: no entry, or one made for another key, as when an
        upstream action gave other bytes) look the key itself up."""
        key = states[0].key or ""
        if self._fetch(states[0], key, found):
            self._running[self._by_key[key]] = states
            return
        kind = get_kind(states[0].action.kind)
        assert kind is not None
        self._miss(states, kind)

    def _collect(self, finished: set[cf.Future[Any]]) -> None:
        for future in finished:
            states = self._running.pop(future)
            if future in self._fetching:
                self._collected_fetch(future, states)
                continue
            elapsed = time.perf_counter() - states[0].started
            try:
                doc, executed = future.result()
            except Failed as failed:
                self._failed(states, failed.error, failed.seconds, elapsed)
                continue
            except BaseException as exc:  # noqa: BLE001 - reported per action
                self._failed(states, exc, 0.0, elapsed)
                continue
            result = ActionResult.from_json(doc)
            if executed and result is not None:
                self.store.publish(result, self._index_keys(states[0]))
            ran = result.seconds if executed and result is not None else 0.0
            if executed:
                self._built[states[0].key or ""] = states[0].id
            for i, state in enumerate(states):
                state.result = result
                status = "built" if executed and i == 0 else "cached"
                self._finish(state, status, seconds=ran if status == "built" else 0.0,
                             queued=max(0.0, elapsed - ran) if i == 0 else 0.0,
                             reason=self._same_key(state) if i else "")

    def _index_keys(self, state: ActionState) -> tuple[str, ...]:
        """The index keys a result built here is uploaded under too: its chain key."""
        if self.store.remote is None or state.key is None:
            return ()
        try:
            return self._chain.index(state.id, state.key)
        except UserError:  # a source that vanished since: its result is filed by its key alone
            return ()

    def _same_key(self, state: ActionState) -> str:
        """The reason of a cached action whose key an action of this build ran (it is then
        `sharing`), else ''."""
        ran = self._built.get(state.key or "")
        state.sharing = ran is not None
        return f"{SAME_KEY} {ran}, which ran in this build" if ran else ""

    def _failed(self, states: list[ActionState], error: BaseException, ran: float,
                elapsed: float) -> None:
        """The action of `states` failed after running `ran` seconds (`elapsed` since it was
        submitted); a corrupt input makes its producer run again instead (once)."""
        if isinstance(error, MissingInput):
            if self._rebuild_producer(states, error):
                return
            error = lost_input(states[0].action.kind, error)
        for state in states:
            self._finish(state, "failed", error=error, seconds=ran,
                         queued=max(0.0, elapsed - ran) if state is states[0] else 0.0)
        self.stopping = self.stopping or not self.options.keep_going

    def _rebuild_producer(self, states: list[ActionState], exc: MissingInput) -> bool:
        """An input blob was corrupt or gone: run its producer again (or store a source file
        again), then these actions."""
        source = states[0].action.inputs.get(states[0].names.get(exc.name, exc.name))
        if source is None or states[0].retries >= 1:
            return False
        if isinstance(source, Source):  # its copy in the store: stored again
            self._stored.pop(source.path, None)
        else:
            producer = self.states[source.action]
            producer.status, producer.result, producer.key = "pending", None, None
        for state in states:
            state.status, state.retries = "pending", state.retries + 1
        self._by_key = {k: f for k, f in self._by_key.items() if f in self._running}
        return True

    def _finish(self, state: ActionState, status: str, *, reason: str = "",
                error: BaseException | None = None, seconds: float = 0.0,
                queued: float = 0.0) -> None:
        state.status = status
        state.reason = reason or state.reason
        if state.healed and status in ("built", "cached"):
            again = "rebuilt" if status == "built" else f"taken again from the {state.origin} cache"
            state.reason = f"{state.healed}; {again}"
        state.error = error
        state.seconds, state.queued = seconds, queued
        self.listener("finish", state)

    def _abort(self) -> None:
        self.stopping = True
        if self._pool is not None:
            self._pool.close(cancel=True)
            self._pool = None


@contextmanager
def workers_deaf_to_ctrl_c(executor: Executor) -> Iterator[None]:
    """Worker processes that a local pool starts in here are born with Ctrl-C (SIGINT) blocked
    (the mask is inherited through fork and exec): a terminal sends it to the whole process
    group, and only this process must answer it (it stops the workers, see `_abort`), else
    each worker prints its own KeyboardInterrupt traceback. A Ctrl-C meanwhile waits until the
    submit returns."""
    from ..runtime.pool import sigint_blocked
    from .executors import PoolExecutor

    if not isinstance(executor, PoolExecutor):
        yield
        return
    with sigint_blocked():
        yield


def lost_input(kind: str, exc: MissingInput) -> StepFailed:
    """An input that went missing from the store again after it was made anew: the store is
    being removed or collected under the build (a fault outside udo-build, exit 1)."""
    return StepFailed(kind, f"its input {exc.name} ({exc.digest[:12]}) went missing from the "
                      "store during this build, again after it was made anew: is another "
                      "process removing the store or collecting it? Build again once it is done")


def error_problems(error: BaseException) -> list[Problem]:
    """A failed action's error as problems, for reports."""
    if isinstance(error, UserError):
        return error.problems
    if isinstance(error, StepFailed):
        return [Problem(str(error))]
    return [Problem(f"{type(error).__name__}: {error}")]
