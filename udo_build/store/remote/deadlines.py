"""Deadlines of remote requests: a watchdog that drops a transfer that stalls or trickles.

A socket timeout bounds each read, but a server that sends one byte every few seconds resets it
forever. So each request is a `Transfer` the one watchdog thread looks at every TICK seconds;
it is dropped (its socket shut down, which ends the blocked read or send at once) when

- its deadline passes: connect + one window + the expected bytes at the minimum rate, or
- it has moved bytes slower than the minimum rate for a whole window (`window` seconds: the
  read timeout), counting from the start: a server must answer within a window, and then keep
  the bytes coming (a slow but steady link passes, a trickle does not).

The reader and writer of the request count the bytes they move (`moved`); `reason` says why a
dropped transfer was dropped. The thread runs only while requests are in flight.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable
from typing import Any

TICK = 0.1  # seconds between looks at the transfers in flight
IDLE_EXIT = 2.0  # seconds a watchdog with nothing in flight waits before its thread ends


class Transfer:
    """One request in flight: its deadline, and the bytes it moved since the watchdog's last
    look."""

    def __init__(self, side: str, deadline: float, min_rate: float, window: float) -> None:
        self.side = side  # "read" or "write": which breaker its failure counts against
        self.started = self.last = self.fast = time.monotonic()
        self.deadline = deadline
        self.min_rate = min_rate
        self.window = window
        self.conn: Any = None  # the connection it uses, once it has one
        self.cancel: Callable[[], None] | None = None  # ends it, where it has no socket
        self.connected = False
        self.recent = 0  # bytes moved since the last look
        self.total = 0
        self.reason: str | None = None  # why it was dropped
        self._lock = threading.Lock()
        self._done = False

    def moved(self, count: int) -> None:
        self.recent += count
        self.total += count

    def check(self, now: float) -> str | None:
        """Why the transfer should be dropped now (None: let it go on)."""
        if now >= self.deadline:
            return f"no answer within {self.deadline - self.started:.1f} s"
        recent, self.recent = self.recent, 0
        if recent >= self.min_rate * max(now - self.last, 1e-3):
            self.fast = now
        self.last = now
        if now - self.fast >= self.window and not self.total:
            return f"stalled: no answer in {now - self.started:.1f} s"
        if now - self.fast >= self.window:
            return (f"stalled: {self.total} bytes in {now - self.started:.1f} s, slower than "
                    f"{self.min_rate / 1024:g} KiB/s for {self.window:g} s")
        return None

    def drop(self, reason: str) -> None:
        with self._lock:
            if self._done or self.reason is not None:
                return
            self.reason = reason
            if self.cancel is not None:
                self.cancel()
            sock = getattr(self.conn, "sock", None)
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def finish(self) -> None:
        with self._lock:
            self._done = True


class Watchdog:
    """Drops the transfers in flight that miss their deadline or rate (one thread, started on
    the first request and ended after IDLE_EXIT seconds with none in flight: a process that
    builds many times, or forks workers, keeps no idle watchdog threads)."""

    def __init__(self) -> None:
        self._transfers: set[Transfer] = set()
        self._cond = threading.Condition()
        self._thread: threading.Thread | None = None

    def watch(self, transfer: Transfer) -> None:
        with self._cond:
            self._transfers.add(transfer)
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, daemon=True,
                                                name="udo-build-remote-watchdog")
                self._thread.start()
            self._cond.notify()

    def forget(self, transfer: Transfer) -> None:
        transfer.finish()
        with self._cond:
            self._transfers.discard(transfer)

    def drop_all(self, side: str | None, reason: str) -> None:
        """Drop every transfer in flight (of one side, or all of them)."""
        with self._cond:
            found = [t for t in self._transfers if side is None or t.side == side]
        for transfer in found:
            transfer.drop(reason)

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._transfers:
                    self._cond.wait(IDLE_EXIT)
                    if not self._transfers:  # idle: end, the next watch starts another
                        self._thread = None
                        return
                found = list(self._transfers)
            now = time.monotonic()
            for transfer in found:
                reason = transfer.check(now)
                if reason is not None:
                    transfer.drop(reason)
            time.sleep(TICK)
