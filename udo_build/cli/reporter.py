"""The one place that prints: rich on a terminal, plain text when piped, one JSON object on request.

Commands hand the reporter values (headings, key/value facts, tables, problems); the reporter
chooses the form. In JSON mode nothing but the final `emit` goes to stdout; problems go to stderr
as plain text as well, so a person watching a CI log still reads them.

On a terminal, rich is imported only for what needs it (a progress bar, a table): headings,
lines, facts and problems are written with their ANSI styles directly while no rich console is
live on their stream, and the progress bar appears with the first action that runs or
downloads. So a no-op build on a terminal never imports rich (tens of milliseconds).
"""

from __future__ import annotations

import json
import os
import sys

from ..errors import Problem

TYPE_CHECKING = False  # typing's, without importing typing (see cli/__init__.py)
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import IO, Any

MODES = ("rich", "plain", "json")
ANSI = {"bold": "1", "dim": "2", "bold yellow": "1;33", "bold red": "1;31"}  # SGR codes


def choose_mode(stream: IO[str], json_mode: bool, env: dict[str, str] | None = None) -> str:
    env = dict(os.environ) if env is None else env
    if json_mode:
        return "json"
    if env.get("NO_COLOR") or env.get("TERM") == "dumb":
        return "plain"
    isatty = getattr(stream, "isatty", lambda: False)
    return "rich" if isatty() or env.get("FORCE_COLOR") else "plain"


class Reporter:
    def __init__(self, out: IO[str] | None = None, err: IO[str] | None = None,
                 mode: str = "plain", width: int | None = None) -> None:
        if mode not in MODES:
            raise ValueError(mode)
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.mode = mode
        self._console: Any = None
        self._err_console: Any = None
        self.width = width

    # -- rich consoles, imported only when used --------------------------------------------------

    def _rich(self, err: bool = False) -> Any:
        from rich.console import Console

        if err:
            if self._err_console is None:
                self._err_console = Console(file=self.err, width=self.width, highlight=False)
            return self._err_console
        if self._console is None:
            self._console = Console(file=self.out, width=self.width, highlight=False)
        return self._console

    # -- output -----------------------------------------------------------------------------------

    def _styled(self, err: bool, *parts: tuple[str, str]) -> None:
        """Print (text, style) parts as one line on a terminal: through the stream's rich
        console when one is live (a progress bar owns the screen), else with ANSI codes."""
        console = self._err_console if err else self._console
        if console is not None:
            console.print("".join(f"[{style}]{_escape(text)}[/{style}]" if style
                                  else _escape(text) for text, style in parts))
            return
        print("".join(f"\x1b[{ANSI[style]}m{text}\x1b[0m" if style else text
                      for text, style in parts), file=self.err if err else self.out)

    def heading(self, text: str) -> None:
        if self.mode == "rich":
            self._styled(False, (text, "bold"))
        elif self.mode == "plain":
            print(text, file=self.out)

    def line(self, text: str = "") -> None:
        if self.mode == "rich":
            self._styled(False, (text, ""))
        elif self.mode == "plain":
            print(text, file=self.out)

    def facts(self, rows: Sequence[tuple[str, str]]) -> None:
        width = max((len(k) for k, _ in rows), default=0)
        for key, value in rows:
            if self.mode == "rich":
                self._styled(False, ("  ", ""), (key.ljust(width), "dim"), (f"  {value}", ""))
            elif self.mode == "plain":
                print(f"  {key.ljust(width)}  {value}", file=self.out)

    def table(self, title: str, columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
        if self.mode == "json":
            return
        cells = [[_cell(c) for c in row] for row in rows]
        if self.mode == "rich":
            from rich.table import Table

            table = Table(title=title, title_justify="left", show_lines=False)
            for col in columns:
                table.add_column(col)
            for row in cells:
                table.add_row(*(_escape(c) for c in row))
            self._rich().print(table)
            return
        widths = [max([len(c)] + [len(r[i]) for r in cells]) for i, c in enumerate(columns)]
        print(title, file=self.out)
        print("  " + "  ".join(c.ljust(w) for c, w in zip(columns, widths, strict=True)).rstrip(),
              file=self.out)
        for row in cells:
            print("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip(),
                  file=self.out)

    def emit(self, obj: Any) -> None:
        """The JSON result of a command (JSON mode only)."""
        if self.mode == "json":
            # one write: json.dump writes every token on its own (thousands for a large build)
            self.out.write(json.dumps(obj, indent=2, sort_keys=False, default=str) + "\n")

    # -- problems ---------------------------------------------------------------------------------

    def warning(self, problem: Problem) -> None:
        self._problem("warning", problem, "yellow")

    def error(self, problem: Problem) -> None:
        self._problem("error", problem, "red")

    def _problem(self, label: str, problem: Problem, color: str) -> None:
        if self.mode == "rich":
            self._styled(True, (label, f"bold {color}"), (f": {problem}", ""))
        else:
            print(f"{label}: {problem}", file=self.err)

    def failure(self, title: str, problems: Sequence[Problem]) -> None:
        """A failed build step: its title, then each of its problems."""
        if self.mode == "rich":
            self._styled(True, ("failed", "bold red"), (f": {title}", ""))
            for p in problems:
                self._styled(True, (f"  {p}", ""))
        else:
            print(f"failed: {title}", file=self.err)
            for p in problems:
                print(f"  {p}", file=self.err)

    def progress(self, total: int) -> Progress:
        """A progress display for `total` actions: a bar on a terminal, a line per action that
        ran when plain, nothing in JSON mode."""
        return Progress(self, total)

    def note(self, text: str) -> None:
        """A side remark for people (stderr), e.g. a hint after an error."""
        if self.mode == "rich":
            self._styled(True, (text, "dim"))
        else:
            print(text, file=self.err)


class Progress:
    """The build's bar on a terminal (actions done of all), with one inner bar per running
    action that tells its sub-steps ("step" events: calibration inputs, rule passes, remote
    downloads), removed when it finishes; plain: a line per action built, and no inner
    progress (a log wants no ticking)."""

    def __init__(self, rep: Reporter, total: int) -> None:
        self.rep = rep
        self.total = total
        self.done = 0
        self._bar: Any = None
        self._task: Any = None
        self._running: dict[str, Any] = {}
        self._inner: dict[str, Any] = {}  # action id -> its inner task
        self._open = False  # inside its `with`

    def __enter__(self) -> Progress:
        self._open = True
        return self

    def _shown(self) -> None:
        """The bar, from the first action that runs or downloads (a no-op shows none)."""
        if self.rep.mode != "rich" or self._bar is not None or not self._open:
            return
        from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
        from rich.progress import Progress as Bar

        self._bar = Bar(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=self.rep._rich(err=True), transient=True)
        self._bar.__enter__()
        self._task = self._bar.add_task("planning", total=self.total, completed=self.done)

    def __exit__(self, *exc: object) -> None:
        self._open = False
        if self._bar is not None:
            self._bar.__exit__(*exc)

    def update(self, event: str, state: Any) -> None:
        if event in ("start", "step"):
            self._shown()
        if event == "step":
            self._step(state)
            return
        if event == "start":
            self._running[state.id] = state
        else:
            self._running.pop(state.id, None)
            self.done += 1
        if self._bar is not None:
            running = ", ".join(list(self._running)[:3]) or "checking the cache"
            self._bar.update(self._task, completed=self.done, description=_escape(running))
            inner = self._inner.pop(state.id, None) if event == "finish" else None
            if inner is not None:
                self._bar.remove_task(inner)
            if event == "finish" and state.status == "built":
                self._bar.console.print(f"[green]built[/] {_escape(state.id)} "
                                        f"[dim]({_took(state)})[/dim]")
        elif self.rep.mode == "plain" and event == "finish" and state.status == "built":
            print(f"built   {state.id} ({_took(state)})", file=self.rep.err)

    def _step(self, state: Any) -> None:
        if self._bar is None or state.step is None:
            return
        what, done, total = state.step
        label = _escape(f"  {state.id}: {what}")
        task = self._inner.get(state.id)
        if total and done >= total:  # that part is over (a finished action's downloads too)
            if task is not None:
                self._bar.remove_task(self._inner.pop(state.id))
        elif task is None:
            self._inner[state.id] = self._bar.add_task(label, total=total or None,
                                                        completed=done)
        else:
            self._bar.update(task, description=label, completed=done, total=total or None)


QUEUED_SHOWN = 0.1  # seconds: a shorter wait for a worker is not worth a word


def _took(state: Any) -> str:
    """How long a built action ran, and how long it waited for a worker when that counts."""
    ran = f"{state.seconds:.2f} s"
    return ran if state.queued < QUEUED_SHOWN else f"{ran}, after {state.queued:.2f} s queued"


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(_cell(v) for v in value) or "-"
    return str(value)


def _escape(text: str) -> str:
    from rich.markup import escape

    return escape(text)
