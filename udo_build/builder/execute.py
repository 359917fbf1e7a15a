"""Running one action against a store: in the build process or in a worker process.

Under the action's lock the cache is checked once more (another process may have built the same
key meanwhile: then its result is reused), the action runs in a private work folder, every output
is stored, and only then is the action-cache entry written. A failure writes nothing: it never
poisons the cache.
"""

from __future__ import annotations

import time
import traceback
from pathlib import Path
from typing import Any

from ..errors import StepFailed, UserError, environment_problem
from ..store import ActionResult, Output, Store
from ..store.ac import now
from .actions import ActionContext, MissingInput, Produced, Tree, get_kind, load_kinds


class InternalActionError(Exception):
    """An action failed through a bug of udo-build (not the user's input or code)."""

    def __init__(self, kind: str, detail: str, trace: str) -> None:
        super().__init__(kind, detail, trace)
        self.kind = kind
        self.detail = detail
        self.trace = trace

    def __str__(self) -> str:
        return f"{self.kind}: {self.detail}"


_stores: dict[str, Store] = {}


def _store(root: str) -> Store:
    if root not in _stores:  # one per worker process
        _stores[root] = Store(root)
    return _stores[root]


def execute(store_root: str, kind_name: str, key: str, params: dict[str, Any],
            sources: dict[str, str], blobs: dict[str, tuple[str, str]],
            description: str) -> tuple[dict[str, Any], bool]:
    """(result as JSON, whether this call executed it). Raises UserError, StepFailed (also for
    a fault of the machine: a full disk, a read-only store) or InternalActionError."""
    try:
        return _execute(store_root, kind_name, key, params, sources, blobs, description)
    except OSError as exc:
        fault = environment_problem(exc)
        if fault is None:
            raise
        raise StepFailed(kind_name, str(fault)) from None


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
        except (UserError, StepFailed, MissingInput):
            raise
        except Exception as exc:
            if environment_problem(exc) is not None:
                raise  # the machine's fault: see execute
            raise InternalActionError(kind_name, f"{type(exc).__name__}: {exc}",
                                      traceback.format_exc()) from None
        finally:
            ctx.cleanup()
        result = ActionResult(key, kind_name, produced.description or description, outputs,
                              dict(produced.publish), time.perf_counter() - started, created=now())
        store.ac.put(result)
        return result.to_json(), True


def _store_output(store: Store, value: bytes | Path | Tree) -> Output:
    if isinstance(value, Tree):
        ref = store.cas.put_tree(value.path)
        return Output(ref.digest, ref.size, "tree")
    if isinstance(value, Path):
        ref = store.cas.put_file(value)
    elif isinstance(value, (bytes, bytearray)):
        ref = store.cas.put(bytes(value))
    else:
        raise TypeError(f"an output is bytes, a Path or a Tree, not {type(value).__name__}")
    return Output(ref.digest, ref.size, "blob")
