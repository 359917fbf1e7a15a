"""Running one action against a store: in the build process or in a worker process.

Under the action's lock the cache is checked once more (another process may have built the same
key meanwhile: then its result is reused), the action runs in a private work folder, every output
is stored, and only then is the action-cache entry written. A failure writes nothing: it never
poisons the cache.

How long an action ran is measured here, around its kind and the storing of its outputs: the
result's `seconds`, or a failure's (`Failed`). The time it waited for a worker or for its lock is
not in it; the engine reports that apart.
"""

from __future__ import annotations

import time
import traceback
from pathlib import Path
from typing import Any

from ..errors import StepFailed, UserError, environment_problem
from ..store import ActionResult, Output, Store
from ..store.ac import now
from .actions import (
    ActionContext,
    FileOfParts,
    MissingInput,
    Produced,
    Tree,
    get_kind,
    load_kinds,
)


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


_stores: dict[str, Store] = {}


def _store(root: str) -> Store:
    if root not in _stores:  # one per worker process
        _stores[root] = Store(root)
    return _stores[root]


def execute(store_root: str, kind_name: str, key: str, params: dict[str, Any],
            sources: dict[str, str], blobs: dict[str, tuple[str, str]],
            description: str) -> tuple[dict[str, Any], bool]:
    """(result as JSON, whether this call executed it). Raises `Failed` around a UserError,
    StepFailed (also for a fault of the machine: a full disk, a read-only store),
    MissingInput or InternalActionError."""
    try:
        return _execute(store_root, kind_name, key, params, sources, blobs, description)
    except Failed as failed:
        raise Failed(_machine_fault(kind_name, failed.error), failed.seconds) from None
    except Exception as exc:
        raise Failed(_machine_fault(kind_name, exc), 0.0) from None


def _machine_fault(kind_name: str, exc: BaseException) -> BaseException:
    """A fault of the machine as the step's failure; any other error as it is."""
    fault = environment_problem(exc)
    return exc if fault is None else StepFailed(kind_name, str(fault))


def _execute(store_root: str, kind_name: str, key: str, params: dict[str, Any],
             sources: dict[str, str], blobs: dict[str, tuple[str, str]],
             description: str) -> tuple[dict[str, Any], bool]:
    load_kinds()
    store = _store(store_root)
    kind = get_kind(kind_name)
    if kind is None:
        raise InternalActionError(kind_name, "the kind is not registered in this process", "")
    with store.action_lock(key):
        hit = store.ac.get(key)
        if hit is not None:
            return hit.to_json(), False
        ctx = ActionContext(params, {k: Path(v) for k, v in sources.items()}, blobs, store.cas)
        started = time.perf_counter()
        try:
            produced = kind.run(ctx)
            if not isinstance(produced, Produced):
                raise TypeError(f"action kind {kind_name} returned {type(produced).__name__}, "
                                "not Produced")
            outputs = {name: _store_output(store, value)
                       for name, value in produced.outputs.items()}
        except (UserError, StepFailed, MissingInput) as exc:
            raise Failed(exc, time.perf_counter() - started) from None
        except Exception as exc:
            if environment_problem(exc) is None:  # not the machine's fault: see execute
                exc = InternalActionError(kind_name, f"{type(exc).__name__}: {exc}",
                                          traceback.format_exc())
            raise Failed(exc, time.perf_counter() - started) from None
        finally:
            ctx.cleanup()
        result = ActionResult(key, kind_name, produced.description or description, outputs,
                              dict(produced.publish), time.perf_counter() - started, created=now())
        store.ac.put(result)
        return result.to_json(), True


def _store_output(store: Store, value: bytes | Path | Tree | FileOfParts) -> Output:
    if isinstance(value, Tree):
        ref = store.cas.put_tree(value.path)
        return Output(ref.digest, ref.size, "tree")
    if isinstance(value, FileOfParts):  # a tree manifest that says how its parts make a file
        from ..store.parts import layout_of

        ref = store.cas.put(layout_of(value.segments, value.size, store.cas).manifest())
        return Output(ref.digest, ref.size, "tree")
    if isinstance(value, Path):
        ref = store.cas.put_file(value)
    elif isinstance(value, (bytes, bytearray)):
        ref = store.cas.put(bytes(value))
    else:
        raise TypeError("an output is bytes, a Path, a Tree or a FileOfParts, not "
                        f"{type(value).__name__}")
    return Output(ref.digest, ref.size, "blob")
