"""Running one action against a store: in the build process or in a worker process.

Under the action's lock the cache is checked once more (another process may have built the same
key meanwhile: then its result is reused), the action runs in a private work folder, every output
is stored, and only then is the action-cache entry written. A failure writes nothing: it never
poisons the cache.

How long an action ran is measured here, around its kind and the storing of its outputs: the
result's `seconds`, or a failure's (`Failed`). The time it waited for a worker or for its lock is
not in it; the engine reports that apart.

An action travels as an `ActionSpec`: its kind, key, parameters and inputs by digest (source
files too: the engine stores them as blobs first), so that it runs the same on any machine that
reaches the store; nothing in it is read from the submitting machine's paths.
"""

from __future__ import annotations

import time
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from ..errors import StepFailed, UserError, during_interrupt, environment_problem
from ..store import ActionResult, Output, Store
from ..store.ac import now
from ..store.parts import MissingPart
from .actions import ActionContext, MissingInput, StepSink, get_kind, load_kinds

if TYPE_CHECKING:
    from .action_io import ActionInput, FileOfParts, Tree


class InternalActionError(Exception):
    """An action failed through a bug of udo-build (not the user's input or code)."""

    def __init__(self, kind: str, detail: str, trace: str) -> None:
        super().__init__(kind, detail, trace)
        self.kind = kind
        self.detail = detail
        self.trace = trace

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


class Failed(Exception):
    """An action's failure as it comes back from `execute`: the error, and how long the action
    ran before it (0 when it did not get as far as running)."""

    def __init__(self, error: BaseException, seconds: float) -> None:
        super().__init__(error, seconds)  # pickled by its arguments: it crosses from a worker
        self.error = error
        self.seconds = seconds

    def __str__(self) -> str:
        return str(self.error)


class ActionSpec(NamedTuple):
    """One action as it is sent to a worker (pickled): everything it needs but the store. A
    NamedTuple, immutable like a frozen dataclass and cheaper to define (a no-op build imports
    this module)."""

    kind: str
    key: str
    params: dict[str, Any]
    inputs: dict[str, ActionInput]
    description: str
    cores: int = 1  # the cores it may use (ActionContext.cores); not in its key


_stores: dict[str, Store] = {}


def store_at(root: str) -> Store:
    if root not in _stores:  # one per worker process
        _stores[root] = Store(root)
    return _stores[root]


def execute(store_root: str, spec: ActionSpec,
            steps: StepSink | None = None) -> tuple[dict[str, Any], bool]:
    """(result as JSON, whether this call executed it); the action's inner progress goes to
    `steps` (see ActionContext.progress). Raises `Failed` around a UserError, StepFailed (also
    for a fault of the machine: a full disk, a read-only store), MissingInput or
    InternalActionError."""
    try:
        return _execute(store_at(store_root), spec, steps)
    except Failed as failed:
        raise Failed(machine_fault(spec.kind, failed.error), failed.seconds) from None
    except Exception as exc:
        raise Failed(machine_fault(spec.kind, exc), 0.0) from None


def machine_fault(kind_name: str, exc: BaseException) -> BaseException:
    """A fault of the machine as the step's failure; any other error as it is."""
    fault = environment_problem(exc)
    return exc if fault is None else StepFailed(kind_name, str(fault))


def _execute(store: Store, spec: ActionSpec,
             steps: StepSink | None) -> tuple[dict[str, Any], bool]:
    from .action_io import Produced  # here: a build that runs no action need not define it

    load_kinds()
    kind = get_kind(spec.kind)
    if kind is None:
        raise InternalActionError(spec.kind, "the kind is not registered in this process", "")
    with store.action_lock(spec.key):
        hit = store.ac.get(spec.key)
        if hit is not None:
            return hit.to_json(), False
        ctx = ActionContext(spec.params, spec.inputs, store.cas, steps, spec.cores)
        started = time.perf_counter()
        try:
            produced = kind.run(ctx)
            if not isinstance(produced, Produced):
                raise TypeError(f"action kind {spec.kind} returned {type(produced).__name__}, "
                                "not Produced")
            outputs = {name: _store_output(store, value)
                       for name, value in produced.outputs.items()}
        except (UserError, StepFailed) as exc:
            raise Failed(_as_sources(exc, ctx), time.perf_counter() - started) from None
        except MissingInput as exc:
            raise Failed(exc, time.perf_counter() - started) from None
        except MissingPart as exc:  # a shared part went missing after the action read it
            lost = ctx.lost_part(str(exc))
            raise Failed(lost or InternalActionError(spec.kind, f"MissingPart: {exc}", ""),
                         time.perf_counter() - started) from None
        except Exception as exc:
            if during_interrupt(exc):  # an error a Ctrl-C caused on its way out (a file
                raise KeyboardInterrupt from exc  # closed under a write) is the interrupt
            if environment_problem(exc) is None:  # not the machine's fault: see execute
                import traceback  # here: a build whose actions succeed does not import it

                exc = InternalActionError(spec.kind, f"{type(exc).__name__}: {exc}",
                                          traceback.format_exc())
            raise Failed(exc, time.perf_counter() - started) from None
        finally:
            ctx.cleanup()
        result = ActionResult(spec.key, spec.kind, produced.description or spec.description,
                              outputs, dict(produced.publish), time.perf_counter() - started,
                              created=now())
        store.ac.put(result)
        return result.to_json(), True


def _as_sources(error: UserError | StepFailed, ctx: ActionContext) -> BaseException:
    """The error with the files it names as the user knows them: the project's files, not
    their copies in the action's work folder."""
    names = {str(path): label for path, label in ctx.sources().items()}

    def known(text: str | None) -> str | None:
        for copy, label in names.items():
            text = text.replace(copy, label) if text else text
        return text

    if isinstance(error, StepFailed):
        found = StepFailed(error.step, known(error.message) or "", inputs=error.inputs)
        return found if found.message != error.message else error
    return UserError(problems=[replace(p, file=known(p.file), message=known(p.message) or "",
                                       hint=known(p.hint)) for p in error.problems])


def _store_output(store: Store, value: bytes | Path | Tree | FileOfParts) -> Output:
    from .action_io import FileOfParts, Tree

    if isinstance(value, Tree):
        ref = store.cas.put_tree(value.path)
        return Output(ref.digest, ref.size, "tree")
    if isinstance(value, FileOfParts):  # a tree manifest that says how its parts make a file
        from ..store.parts import layout_of

        ref = store.cas.put(layout_of(value.segments, value.size, store.cas).manifest(),
                            compress=False)  # raw, as Cas.put_tree keeps a manifest
        return Output(ref.digest, ref.size, "tree")
    if isinstance(value, Path):
        ref = store.cas.put_file(value)
    elif isinstance(value, (bytes, bytearray)):
        ref = store.cas.put(bytes(value))
    else:
        raise TypeError("an output is bytes, a Path, a Tree or a FileOfParts, not "
                        f"{type(value).__name__}")
    return Output(ref.digest, ref.size, "blob")
