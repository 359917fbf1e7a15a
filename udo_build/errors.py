"""The one error type for user mistakes, and the exit codes.

Every problem a user can fix is a `Problem`: where (file, line, column), which field (a path such as
`prepare.matrix.soc[2]`), what is wrong, and what would be right. A `UserError` carries one or more
problems; warnings are problems too, collected by a `Diagnostics` sink instead of raised.

Exit codes: 2 for user errors, 1 for a failed build step, 3 for a bug of udo-build. The machine's
own faults (a full disk, a read-only file system, a folder the user may not write) are the
user's to fix, not bugs: `environment_problem` turns them into a problem naming the path.
"""

from __future__ import annotations

import errno
import os

# typing's, without importing typing or pathlib (a replayed no-op would spend milliseconds on
# them: see cli/__init__.py)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

EXIT_OK = 0
EXIT_STEP_FAILED = 1
EXIT_USER_ERROR = 2
EXIT_INTERNAL = 3


def display_path(path: str | os.PathLike[str] | None) -> str:
    """A path as a user would type it: relative to the working folder when below it (both
    resolved), else as given."""
    if path is None:
        return ""
    given = os.fspath(path)
    try:
        full, here = os.path.realpath(given), os.path.realpath(os.getcwd())
    except (ValueError, OSError):
        return given
    below = os.path.join(here, "")
    return "." if full == here else full[len(below):] if full.startswith(below) else given


FIELDS = ("message", "file", "line", "column", "field", "hint")


class _DataclassFields:
    """`Problem.__dataclass_fields__`, made on first use, so that `dataclasses.replace` and
    `dataclasses.fields` work on a Problem as on the frozen dataclass it was, while this module
    (which every command imports first, a no-op build too) imports neither dataclasses nor
    the inspect module it pulls in (about 10 ms of each start)."""

    def __get__(self, obj: object, owner: type) -> dict[str, Any]:
        import dataclasses
        from typing import Any

        made = dataclasses.make_dataclass(owner.__name__, [
            "message", *((name, Any, dataclasses.field(default=None)) for name in FIELDS[1:])],
            frozen=True)
        owner.__dataclass_fields__ = made.__dataclass_fields__  # type: ignore[attr-defined]
        return made.__dataclass_fields__  # type: ignore[no-any-return]


class Problem:
    """One thing wrong (or worth a warning) in a user's input: immutable, compared and hashed
    by its fields (as a frozen dataclass; written out by hand: see `_DataclassFields`)."""

    __slots__ = FIELDS
    __dataclass_fields__ = _DataclassFields()
    message: str
    file: str | None
    line: int | None
    column: int | None
    field: str | None
    hint: str | None

    def __init__(self, message: str, file: str | None = None, line: int | None = None,
                 column: int | None = None, field: str | None = None,
                 hint: str | None = None) -> None:
        for name, value in zip(FIELDS, (message, file, line, column, field, hint), strict=True):
            object.__setattr__(self, name, value)

    def _values(self) -> tuple[Any, ...]:
        return tuple(getattr(self, name) for name in FIELDS)

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"cannot assign to field {name!r} of a Problem (it is immutable)")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"cannot delete field {name!r} of a Problem (it is immutable)")

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not self.__class__:
            return NotImplemented
        return self._values() == other._values()  # type: ignore[attr-defined]

    def __hash__(self) -> int:
        return hash(self._values())

    def __repr__(self) -> str:
        return "Problem(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in FIELDS) + ")"

    def __reduce__(self) -> tuple[object, ...]:  # pickled (across processes) by its fields
        return (Problem, self._values())

    def replace(self, **changes: Any) -> Problem:
        """The same problem with some fields changed."""
        return Problem(**{**dict(zip(FIELDS, self._values(), strict=True)), **changes})

    def where(self) -> str:
        parts = []
        if self.file:
            parts.append(display_path(self.file))
            if self.line:
                parts.append(str(self.line))
                if self.column:
                    parts.append(str(self.column))
        return ":".join(parts)

    def __str__(self) -> str:
        head = [p for p in (self.where(), self.field) if p]
        text = self.message if not self.hint else f"{self.message}; {self.hint}"
        return ": ".join([*head, text])

    def to_json(self) -> dict[str, object]:
        out: dict[str, object] = {"message": self.message}
        for key in ("file", "line", "column", "field", "hint"):
            value = getattr(self, key)
            if value is not None:
                out[key] = display_path(value) if key == "file" else value
        return out


class UserError(Exception):
    """A mistake in the user's input: a recipe, an op config, a model, a command line."""

    def __init__(
        self,
        message: str | None = None,
        *,
        file: str | os.PathLike[str] | None = None,
        line: int | None = None,
        column: int | None = None,
        field: str | None = None,
        hint: str | None = None,
        problems: Iterable[Problem] = (),
    ) -> None:
        found = list(problems)
        if message is not None:
            found.insert(
                0,
                Problem(
                    message,
                    str(file) if file is not None else None,
                    line,
                    column,
                    field,
                    hint,
                ),
            )
        if not found:
            raise ValueError("UserError needs a message or problems")
        self.problems: list[Problem] = found
        super().__init__("\n".join(str(p) for p in found))

    @property
    def problem(self) -> Problem:
        return self.problems[0]

    def __reduce__(self) -> tuple[object, ...]:  # crosses process boundaries intact
        return (_user_error, (self.problems,))

    def with_file(self, file: str | os.PathLike[str]) -> UserError:
        """The same error, with `file` filled in where a problem does not name one."""
        return UserError(
            problems=[p if p.file else p.replace(file=str(file)) for p in self.problems]
        )


class StepFailed(Exception):
    """A build step failed on the user's inputs (their kernel raised, a check missed)."""

    def __init__(self, step: str, message: str, *, inputs: dict[str, str] | None = None) -> None:
        self.step = step
        self.message = message
        self.inputs = dict(inputs or {})
        super().__init__(f"{step}: {message}")

    def __reduce__(self) -> tuple[object, ...]:
        return (StepFailed, (self.step, self.message), {"inputs": self.inputs})


def _user_error(problems: list[Problem]) -> UserError:
    return UserError(problems=problems)


class Diagnostics:
    """Collects warnings while loading; errors are raised, never collected here."""

    def __init__(self, warnings: list[Problem] | None = None) -> None:
        self.warnings: list[Problem] = list(warnings or [])
        self._seen: set[Problem] = set(self.warnings)

    def __repr__(self) -> str:
        return f"Diagnostics(warnings={self.warnings!r})"

    def warn(self, problem: Problem) -> None:
        if problem not in self._seen:
            self._seen.add(problem)
            self.warnings.append(problem)

    def extend(self, problems: Iterable[Problem]) -> None:
        for p in problems:
            self.warn(p)


MAX_PROBLEMS = 100


def raise_if_any(problems: list[Problem], limit: int = MAX_PROBLEMS) -> None:
    """Raise one UserError with the problems in file order (at most `limit` of them)."""
    if problems:
        raise UserError(problems=capped(problems, "problem", limit))


def capped(problems: list[Problem], what: str, limit: int = MAX_PROBLEMS) -> list[Problem]:
    """The first `limit` problems in file order, the last saying how many more there were."""
    ordered = sorted(dict.fromkeys(problems), key=_order)
    if len(ordered) <= limit:
        return ordered
    first = ordered[: limit - 1]
    more = len(ordered) - len(first)
    return [*first, Problem(f"... and {more} more {what}s", first[-1].file,
                            hint="fix the ones above first")]


def _order(p: Problem) -> tuple[str, int, int]:
    return (p.file or "", p.line or 0, p.column or 0)


# -- faults of the machine, not of udo-build -----------------------------------------------------

_WHERE = "or use a folder elsewhere (--store DIR, --out DIR)"
ENVIRONMENT_FAULTS = {
    errno.ENOSPC: ("no space left on device", f"free some space on that file system, {_WHERE}"),
    errno.EDQUOT: ("disk quota exceeded", f"free some of your files there, {_WHERE}"),
    errno.EROFS: ("the file system is read-only", f"mount it writable, {_WHERE}"),
    errno.EACCES: ("permission denied", f"make it writable for this user, {_WHERE}"),
    errno.EPERM: ("operation not permitted", f"make it writable for this user, {_WHERE}"),
}


class Vanished(OSError):
    """A folder udo-build was writing in was removed meanwhile (by another process): raised by
    the atomic write path, which made the folder (or its temporary file) a moment before."""


VANISHED = ("the folder was removed while udo-build wrote in it",
            "build again once the other process (rm, gc, a cleanup job) is done; do not remove "
            "the store or the output folder while a build runs")


def environment_problem(exc: BaseException) -> Problem | None:
    """The problem an OSError of the machine (full, read-only, not the user's to write, a
    folder removed under udo-build) is, with the path it names and what to do; None for any
    other error (that one is ours)."""
    if isinstance(exc, Vanished):
        message, hint = VANISHED
    elif not isinstance(exc, OSError) or exc.errno not in ENVIRONMENT_FAULTS:
        return None
    else:
        message, hint = ENVIRONMENT_FAULTS[exc.errno]
    path = exc.filename if isinstance(exc.filename, (str, os.PathLike)) else None
    return Problem(message, None if path is None else os.fspath(path), hint=hint)


def with_path(exc: OSError, path: str | os.PathLike[str]) -> OSError:
    """The same OSError naming `path` (os.write and fsync name no file)."""
    if exc.filename is not None or exc.errno is None:
        return exc
    return OSError(exc.errno, exc.strerror, os.fspath(path))


def during_interrupt(exc: BaseException | None) -> bool:
    """Whether `exc` was raised while a KeyboardInterrupt was being handled, or from one (its
    context or cause: Python 3.11 wraps an interrupt that lands in a class's creation in
    "RuntimeError: Error calling __set_name__")."""
    seen: set[int] = set()
    todo = [exc]
    while todo:
        exc = todo.pop()
        if exc is None or id(exc) in seen:
            continue
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        todo += [exc.__context__, exc.__cause__]
    return False
