"""Ctrl-C while a command runs (udo_build.cli.signal.default_int_handler): it raises
KeyboardInterrupt in the command's code, also when it lands inside a finalizer, where Python
would print "Exception ignored" and drop it (the build would go on as if no Ctrl-C came)."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
import weakref

import pytest

from udo_build.cli import interrupt


@pytest.fixture
def raising_handler():  # type: ignore[no-untyped-def]
    """The handlers of a command that runs (`interrupt.raising`), restored after the test."""
    if threading.current_thread() is not threading.main_thread():
        pytest.fail("signal handlers are set from the main thread")
    before, hook = signal.signal(signal.SIGINT, interrupt.quit_now), sys.unraisablehook
    try:
        interrupt.raising()
        yield
    finally:
        signal.signal(signal.SIGINT, before)
        sys.unraisablehook = hook


def _wait(seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        time.sleep(0.005)


class _Interrupts:
    """An object whose finalizer receives a Ctrl-C (and takes a moment, so the handler runs
    inside it)."""

    def __del__(self) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        _wait(0.05)


def test_a_ctrl_c_in_a_del_method_reaches_the_command(raising_handler: None) -> None:
    with pytest.raises(KeyboardInterrupt):
        _Interrupts()  # collected at once: its __del__ runs here
        _wait(2.0)


def test_a_ctrl_c_in_a_weakref_callback_reaches_the_command(raising_handler: None) -> None:
    class Thing:
        pass

    def callback(_: object) -> None:
        os.kill(os.getpid(), signal.SIGINT)
        _wait(0.05)

    thing = Thing()
    ref = weakref.ref(thing, callback)
    with pytest.raises(KeyboardInterrupt):
        del thing  # the callback runs here
        _wait(2.0)
    assert ref() is None


def test_elsewhere_it_raises_at_once(raising_handler: None) -> None:
    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        _wait(2.0)
    assert time.monotonic() - started < 1.0


class _Interrupted:
    """A class attribute whose __set_name__ meets a Ctrl-C: Python 3.11 wraps it in
    "RuntimeError: Error calling __set_name__" (later versions raise it as it is)."""

    def __set_name__(self, owner: type, name: str) -> None:
        raise KeyboardInterrupt


def test_a_ctrl_c_wrapped_by_a_class_creation_is_the_interrupt(
        monkeypatch: pytest.MonkeyPatch) -> None:
    import io

    from udo_build.cli import info, main

    def interrupted(args: object, rep: object) -> int:
        type("Sync", (), {"damaged": _Interrupted()})
        return 0

    monkeypatch.setattr(info, "run", interrupted)
    err = io.StringIO()
    assert main(["info", "x.udb"], stdout=io.StringIO(), stderr=err, env={}) == 130
    assert "interrupted (Ctrl-C)" in err.getvalue() and "internal error" not in err.getvalue()


def test_the_console_script_freezes_the_heap_before_it_exits(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The interpreter's shutdown collects cycles over every object still alive (a fresh
    clone's: 70-90 ms of CPU on a loaded machine); frozen first, its collections skip them
    (the process ends anyway, its memory goes back whole)."""
    import gc

    from udo_build import cli

    for module, _ in cli.COMMANDS.values():  # every command's module imported (as a
        cli._module(module)  # process running several does): none takes `run`'s place
    frozen: list[bool] = []
    monkeypatch.setattr(gc, "freeze", lambda: frozen.append(True))
    monkeypatch.setattr(sys, "argv", ["udo-build", "--version"])
    with pytest.raises(SystemExit) as exited:
        cli.run()
    assert exited.value.code == 0 and frozen == [True]
