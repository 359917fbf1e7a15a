"""Source digests taken ahead: while the engine runs actions (a fresh checkout without a remote
cache, an edited source), one background thread takes the digests of the plan's source files in
plan order, so that resolving a key seldom waits for hashing. The sources the remote look-ahead
keys (see lookahead) are hashed before it, in the build's thread: the thread is made after it,
for the sources left.

The thread reads through a file-digest cache of its own (an SQLite connection belongs to the
thread that opened it) on the same store, so what it hashes is cached as usual. It starts
after the first digest the engine asks for, which the engine takes itself: the store's cache
is then open, so the thread's connection finds it ready (two connections setting the database
up at once may find it busy, and one would not cache). It starts only when a digest the engine
took had to be hashed (a fresh checkout, an edited source): one found in the stat cache says
that the others likely are too (a no-op build), and then a thread with its own connection costs
more than it saves. A digest the engine asks for before the thread took it up is taken by the
engine too (never twice).
"""

from __future__ import annotations

import threading
from pathlib import Path

from ..store.filecache import FileDigests

Wanted = tuple[Path, str]  # a source's path and digest kind
Taken = tuple[str | None, Exception | None]  # its digest, or why it could not be had


class SourceDigests:
    def __init__(self, root: Path, wanted: list[Wanted]) -> None:
        self.root = root
        self._todo = list(dict.fromkeys(wanted))
        self._done: dict[Wanted, Taken] = {}
        self._busy: set[Wanted] = set()  # taken up by the thread, not done yet
        self._cond = threading.Condition()
        self._stop = False
        self._thread = threading.Thread(target=self._work, name="udo-build-digests",
                                        daemon=True)

    def get(self, files: FileDigests, wanted: Wanted) -> str:
        """The digest of a source (`files` takes it here when the thread has not yet)."""
        with self._cond:
            if wanted in self._todo:
                self._todo.remove(wanted)
            else:
                while wanted in self._busy:
                    self._cond.wait()
            taken = self._done.pop(wanted, None)
        if taken is None:
            hashed = files.hashed
            try:
                return files.digest(wanted[0], kind=wanted[1])[0]
            finally:
                if files.hashed > hashed:  # not cached: the others likely are not either
                    self._start()
        digest, error = taken
        if error is not None:
            raise error
        assert digest is not None
        return digest

    def _start(self) -> None:
        with self._cond:
            start = not self._stop and self._todo and self._thread.ident is None
        if start:
            self._thread.start()

    def close(self) -> None:
        """Stop taking digests (what is being hashed finishes)."""
        with self._cond:
            self._stop = True
            self._todo.clear()
        if self._thread.is_alive():
            self._thread.join()

    def _work(self) -> None:
        files = FileDigests(self.root)
        try:
            while True:
                with self._cond:
                    if self._stop or not self._todo:
                        return
                    wanted = self._todo.pop(0)
                    self._busy.add(wanted)
                try:
                    taken: Taken = files.digest(wanted[0], kind=wanted[1])[0], None
                except Exception as exc:  # noqa: BLE001 - raised where the digest is asked for
                    taken = None, exc
                with self._cond:
                    self._done[wanted] = taken
                    self._busy.discard(wanted)
                    self._cond.notify_all()
        finally:
            files.close()
