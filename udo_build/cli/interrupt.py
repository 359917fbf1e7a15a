"""Ctrl-C: exit 130 with one line, never a traceback.

A terminal sends Ctrl-C (SIGINT) to the whole process group; the local workers are born deaf
to it (`builder.engine.workers_deaf_to_ctrl_c`), so only udo-build's own process answers, in
three phases:

- starting (imports, parsing the command line): nothing is written yet, so an interrupt exits
  at once (`quit_now`);
- running a command: Python's own handler raises KeyboardInterrupt, so that locks are released,
  workers stopped and temporary files removed on the way out; `main` prints the line;
- finishing (output flushed, the interpreter joining its threads): an interrupt exits at once;
  from the interpreter's exit hooks on, it is ignored (Python resets its handlers while it
  exits: a Ctrl-C in those last milliseconds would kill it silently, exit -2, work done).

Installed only when udo-build is the command (the `udo-build` script or `python -m
udo_build`): a program that imports udo_build keeps its own handler.
"""

from __future__ import annotations

import atexit
import os
import sys
import time
from types import FrameType

try:  # the C module: `signal` wraps it in enums, a millisecond that every command pays first
    import _signal as signal
except ImportError:  # pragma: no cover - an interpreter without it
    import signal  # type: ignore[no-redef]

EXIT_INTERRUPTED = 130
MESSAGE = "interrupted (Ctrl-C): run the same command again to finish; what was done is kept"


def quit_now(signum: int, frame: FrameType | None) -> None:
    """Say so and exit at once (a phase with nothing to clean up)."""
    os.write(2, f"udo-build: {MESSAGE}\n".encode())
    os._exit(EXIT_INTERRUPTED)


def is_the_command() -> bool:
    main = sys.modules.get("__main__")
    spec = getattr(main, "__spec__", None)
    return os.path.basename(sys.argv[0] if sys.argv else "") == "udo-build" or \
        getattr(spec, "name", "") == "udo_build.__main__"


def _handled_by(handler: object) -> bool:
    """Make `handler` SIGINT's; False (nothing changed) in any thread but the main one, whose
    alone the handlers are (asked this way, not through threading: a replayed no-op does not
    import threading, see cli/__init__.py)."""
    try:
        signal.signal(signal.SIGINT, handler)  # type: ignore[arg-type]
    except ValueError:  # "signal only works in main thread of the main interpreter"
        return False
    return True


def at_once() -> None:
    """From now on an interrupt exits at once; ignored from the interpreter's exit hooks on."""
    if _handled_by(quit_now):
        atexit.unregister(_ignore)
        atexit.register(_ignore)  # run first of the exit hooks (they run last-in, first-out)


def _ignore() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def exits_at_once() -> bool:
    """Whether an interrupt exits at once now (`at_once` in force)."""
    return signal.getsignal(signal.SIGINT) is quit_now


def raising() -> None:
    """From now on an interrupt raises KeyboardInterrupt (when `at_once` was in force: a host
    program's own handler is left alone)."""
    if exits_at_once() and _handled_by(signal.default_int_handler):
        sys.unraisablehook = not_dropped


RETRY_SECONDS = 0.02


def not_dropped(unraisable: object) -> None:
    """sys.unraisablehook while a command runs: a Ctrl-C that landed in a finalizer (a __del__
    method or a weakref callback, run wherever the garbage collector happens to be) is an
    exception Python can only drop, printing "Exception ignored in ..."; the build would go on
    as if no Ctrl-C came. It is sent again a moment later, to land in the command's own code.
    Any other such exception is printed as Python prints it."""
    if issubclass(getattr(unraisable, "exc_type", type(None)), KeyboardInterrupt):
        import threading

        again = threading.Timer(RETRY_SECONDS, os.kill, (os.getpid(), signal.SIGINT))
        again.daemon = True
        again.start()
        return
    sys.__unraisablehook__(unraisable)  # type: ignore[arg-type]


if is_the_command():
    at_once()


def forget() -> None:
    """Forget an interrupt that was caught. CPython (3.11, 3.12) notes a KeyboardInterrupt that
    ends code run from a string (`exec` of a dataclass's generated methods, while a module
    imports) even when a caller catches it, and under `python -m` then dies by SIGINT at exit
    instead of exiting 130; running a string again clears that note."""
    exec("pass")  # noqa: S102


def settle(timeout: float = 5.0) -> None:
    """Let the threads that are stopping (a local pool's, shut down without waiting for them)
    finish before the interpreter exits: CPython 3.11's process pool otherwise races its own
    exit hook ("Exception ignored in threading ... Bad file descriptor")."""
    import threading

    deadline = time.monotonic() + timeout
    for thread in threading.enumerate():
        if thread is not threading.current_thread() and not thread.daemon:
            thread.join(max(0.0, deadline - time.monotonic()))
