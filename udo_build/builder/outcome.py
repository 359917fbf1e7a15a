"""What a build returns: each action's outcome and the build's report. Named tuples: immutable
like frozen dataclasses, and much cheaper to define; a replayed no-op imports this module and
not the session (session.py, which re-exports them), nor the remote settings it imports (see
builder/uptodate.py, cli/build.py).

collections.namedtuple, not typing.NamedTuple: a replayed no-op imports neither typing nor
pathlib (about 5 and 8 ms; see cli/__init__.py). The fields' types are annotated in each
class's body (for readers and type checkers; nothing checks them when it runs).
"""

from __future__ import annotations

from collections import namedtuple

from ..errors import (
    EXIT_INTERNAL,
    EXIT_STEP_FAILED,
    EXIT_USER_ERROR,
    Problem,
    StepFailed,
    UserError,
    display_path,
)

TYPE_CHECKING = False  # typing's, without importing typing
if TYPE_CHECKING:
    from collections.abc import Callable
    from pathlib import Path
    from typing import Any

    from .engine import ActionState
    from .settings import RemoteSummary

STATUSES = ("built", "cached", "failed", "skipped")


class ActionOutcome(namedtuple("ActionOutcome", (
        "id", "kind", "label", "status", "key", "seconds", "queued", "origin", "reason",
        "description", "would_run", "shared", "available", "error", "params", "sizes"),
        defaults=({}, {}))):
    """What became of one action in a build."""

    __slots__ = ()
    id: str
    kind: str
    label: str
    status: str  # built | cached | failed | skipped
    key: str | None
    seconds: float  # how long it ran, in its worker
    queued: float  # how long it waited for a worker (and its lock) besides
    origin: str  # for a cached action: "local" or "remote"
    reason: str
    description: str | None  # its result's, when it has one
    would_run: bool
    shared: bool  # another action of this build with its key ran (dry: would run)
    available: bool  # this udo-build implements its kind
    error: BaseException | None
    params: dict[str, Any]  # as planned (the build report page reads a target's); default {}
    sizes: dict[str, int]  # its outputs' bytes by name, when it has a result; default {}

    @classmethod
    def of(cls, state: ActionState) -> ActionOutcome:
        from .actions import get_kind

        action, result = state.action, state.result
        return cls(state.id, action.kind, action.label, state.status, state.key,
                   state.seconds, state.queued, state.origin, state.reason,
                   None if result is None else result.description, state.would_run,
                   state.sharing, get_kind(action.kind) is not None, state.error,
                   dict(action.params),
                   {} if result is None else {n: o.size for n, o in result.outputs.items()})

    @property
    def source(self) -> str:
        """Where its result came from: built, shared (the key of an action built now), local
        or remote (the cache tier), or '' (failed, skipped)."""
        if self.status == "built":
            return "built"
        if self.status != "cached":
            return ""
        return "shared" if self.shared else self.origin

    @property
    def internal(self) -> bool:
        """Failed through a bug of udo-build (not the user's input or step)."""
        return self.error is not None and not isinstance(self.error, (UserError, StepFailed))

    @property
    def trace(self) -> str | None:
        """The traceback of an internal failure in an action, when there is one."""
        from .execute import InternalActionError

        return self.error.trace if isinstance(self.error, InternalActionError) else None

    def problems(self) -> list[Problem]:
        from .engine import error_problems

        return [] if self.error is None else error_problems(self.error)

    def to_json(self, dry_run: bool) -> dict[str, Any]:
        row: dict[str, Any] = {"id": self.id, "kind": self.kind, "status": self.status,
                               "key": self.key, "seconds": round(self.seconds, 4),
                               "queued_seconds": round(self.queued, 4)}
        if self.status == "cached" and self.origin:
            row["source"] = self.origin
        if self.reason:
            row["reason"] = self.reason
        if self.description:
            row["description"] = self.description
        if dry_run:
            row["would_run"] = self.would_run
        if self.error is not None:
            row["error"] = [p.to_json() for p in self.problems()]
        return row


class BuildReport(namedtuple("BuildReport", (
        "recipe", "file", "store", "out", "dry_run", "actions", "seconds", "remote", "shard",
        "where", "page", "unpublished", "download"), defaults=(None, "", None, 0, None))):
    """A finished build: every action's outcome, the remote tier's part, where outputs went.
    Its paths are Paths, but in a no-op the CLI replays (`of_record`), which only prints them:
    there they are the recorded text."""

    __slots__ = ()
    recipe: str  # its name
    file: Path
    store: Path
    out: Path | None  # None in a dry run
    dry_run: bool
    actions: tuple[ActionOutcome, ...]
    seconds: float
    remote: RemoteSummary | None
    shard: str | None  # "K/N" for a build of one shard (`--shard`); default None
    where: str  # where its actions ran: "inline", "N local workers", "Dask at ..."; default ""
    page: Path | None  # its report page (not in a dry run), see report_page.py; default None
    unpublished: int  # a shard's results it could not upload (unless --remote-optional); 0
    download: dict[str, Any] | None  # what stayed in the remote (outputs.left_in_remote); None

    @property
    def counts(self) -> dict[str, int]:
        """The number of actions of each final status; in a dry run, those that would run are
        counted apart (`would_run`), not as skipped."""
        counts = {s: sum(1 for a in self.actions if a.status == s and not a.would_run)
                  for s in STATUSES}
        counts["would_run"] = sum(1 for a in self.actions if a.would_run)
        counts["shared"] = sum(1 for a in self.actions if a.shared)
        return counts

    @property
    def hit_rate(self) -> float | None:
        """Cached among the actions the build needed (None in a dry run: nothing was built);
        an action sharing the key of one built in this build counts on neither side."""
        counts = self.counts
        hits = counts["cached"] - counts["shared"]
        return round(hits / (hits + counts["built"]), 4) \
            if hits + counts["built"] and not self.dry_run else None

    @property
    def stale(self) -> int:
        """The number of actions that would run (a dry run): those not up to date."""
        return self.counts["would_run"]

    @property
    def exit_code(self) -> int:
        failed = [a for a in self.actions if a.status == "failed"]
        if not failed:
            return EXIT_STEP_FAILED if self.unpublished else 0
        if any(a.internal for a in failed):
            return EXIT_INTERNAL  # a bug of udo-build, not of the inputs
        if any(isinstance(a.error, StepFailed) for a in failed):
            return EXIT_STEP_FAILED
        return EXIT_USER_ERROR

    def to_json(self) -> dict[str, Any]:
        counts = self.counts
        return {
            "ok": counts["failed"] == 0, "recipe": self.recipe, "file": display_path(self.file),
            "store": display_path(self.store),
            "out": None if self.out is None else display_path(self.out),
            "dry_run": self.dry_run, "actions": [a.to_json(self.dry_run) for a in self.actions],
            "executed": counts["built"], "cached": counts["cached"], "failed": counts["failed"],
            "skipped": counts["skipped"], "shared": counts["shared"],
            **({"would_run": counts["would_run"]} if self.dry_run else {}),
            "hit_rate": self.hit_rate,
            "seconds": round(self.seconds, 4),
            "remote": None if self.remote is None else self.remote.to_json(),
            "shard": self.shard, "where": self.where, "unpublished": self.unpublished,
            "page": None if self.page is None else display_path(self.page),
            "download": self.download,
        }

    @classmethod
    def of_record(cls, doc: dict[str, Any], seconds: float,
                  path: Callable[[str], Any] | None = None) -> BuildReport:
        """The report a no-op record keeps (`uptodate.Draft.save`), told in `seconds`, its
        paths made by `path` (None: pathlib's Path; the CLI, which only prints them, keeps the
        recorded text: `str`)."""
        if path is None:
            from pathlib import Path

            path = Path
        actions = tuple(ActionOutcome(*row[:7], origin=row[7], reason=row[8],
                                      description=row[9], would_run=False, shared=row[10],
                                      available=True, error=None)
                        for row in doc["actions"])
        return cls(doc["recipe"], path(doc["file"]), path(doc["store"]), path(doc["out"]),
                   False, actions, seconds, None, where=doc["where"],
                   page=None if doc["page"] is None else path(doc["page"]))
