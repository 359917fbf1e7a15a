"""The content-addressed store: blobs, trees, the action cache, locks, and the file-digest cache.

Layout of a store folder (default `./store`, or `--store DIR`, or `UDO_BUILD_STORE`):

    VERSION               the layout version ("udo-build-store 1")
    cas/ab/<sha256>[.zst] blobs by the sha256 of their uncompressed bytes (zstd when it pays)
    ac/ab/<key>.json      action results by action key
    history/<id>.json     the last build of each recipe (gc roots, `explain`)
    locks/<key>.lock      per-action locks (advisory; released when a process dies)
    gc.lock               shared by builds, exclusive for gc
    quarantine/           blobs whose bytes did not match their name
    filecache.sqlite      digests of source files by (path, device, inode, size, mtime)
    stats.json            cache counters of the builds on this store (`store stats`)

A store the build cannot write (a read-only file system, a full one, another user's store) still
serves a build whose actions are all cached: what only keeps records (`stats.json`, the build's
history, the digest cache) is skipped through `recording`, and `unrecorded` says what in one
note. An action that must run there fails, naming the path and what to do.

A store may have a remote tier (`attach_remote`, see `remote/`): after a local miss (`lookup`),
`fetch` asks the remote, and `publish` uploads what a build made. The store knows the tier only
by the `Tier` interface: the local store never imports the remote tier.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Collection, Iterable, Iterator

from ..errors import Problem, UserError, environment_problem
from .locks import action_lock, store_lock

# typing's, without importing typing or pathlib (milliseconds a replayed no-op, which imports
# this package for its locks and counters, need not spend: see cli/__init__.py)
TYPE_CHECKING = False
if TYPE_CHECKING:
    from concurrent.futures import Future
    from pathlib import Path
    from typing import Any, Protocol

    from .ac import ActionResult, Output
    from .cas import BlobRef

__all__ = ["ActionResult", "BlobRef", "Output", "Store", "default_store_path", "store_folder"]

LAYOUT = "udo-build-store 1"
ENV_VAR = "UDO_BUILD_STORE"
_LAZY = {"ActionResult": "ac", "Output": "ac", "BlobRef": "cas"}  # imported on first use


def __getattr__(name: str) -> Any:
    """`ActionResult`, `Output` and `BlobRef`, imported when first asked for: the store's
    modules (sqlite3, hashlib, zstandard, concurrent.futures) are not imported by what only
    needs the store's locks or counters (a replayed no-op, see builder/uptodate.py)."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f"{__name__}.{_LAZY[name]}"), name)
    globals()[name] = value
    return value


Fetched = tuple["ActionResult", "Future[bool] | None"]  # a verified result, its blobs
Linked = Callable[["ActionResult"], Collection[str]]  # a result -> the outputs a folder gets


if TYPE_CHECKING:  # for type checkers only: nothing checks a tier's type when it runs
    class Tier(Protocol):
        """A remote tier as the store calls it (`remote.tier.Remote` is the one there is)."""

        def fetch_async(self, key: str, *, store: bool = True, linked: Linked | None = None,
                        download: str = "all", index: bool = False,
                        found: ActionResult | None = None) -> Future[Fetched | None] | None: ...

        def publish(self, result: ActionResult, index: Iterable[str] = ()
                    ) -> Future[bool] | None: ...

        def fetch_outputs(self, outputs: Iterable[Output]) -> bool: ...

        def wait(self) -> None: ...

        def close(self) -> None: ...


def store_folder(given: str | None = None, env: dict[str, str] | None = None) -> str:
    """The store's folder: `given`, else $UDO_BUILD_STORE, else `store`."""
    env = os.environ if env is None else env
    return given or env.get(ENV_VAR) or "store"


def default_store_path(given: str | None = None, env: dict[str, str] | None = None) -> Path:
    from pathlib import Path

    return Path(store_folder(given, env))


class Store:
    def __init__(self, root: str | os.PathLike[str], *, create: bool = True) -> None:
        from pathlib import Path

        from .ac import ActionCache
        from .cas import Cas
        from .counters import Counters
        from .filecache import FileDigests

        self.root = Path(root)
        self._check_layout(create)
        self.cas = Cas(self.root)
        self.files = FileDigests(self.root)
        self.ac = ActionCache(self.root, self.cas, self.files)  # hits checked by the stat cache
        self.counters = Counters()
        self.remote: Tier | None = None
        self.skipped: dict[str, OSError] = {}  # records not written: what -> why (see recording)

    def _check_layout(self, create: bool) -> None:
        marker = self.root / "VERSION"
        try:
            found = marker.read_text().strip()
        except FileNotFoundError:
            if not create:
                raise UserError("no udo-build store here", file=self.root,
                                hint="build a recipe first, or pass --store DIR") from None
            if self.root.exists() and not self.root.is_dir():
                raise UserError("the store path is not a folder", file=self.root) from None
            self.root.mkdir(parents=True, exist_ok=True)
            from ..atomic import write_atomic

            write_atomic(marker, (LAYOUT + "\n").encode(), readonly=False)
            return
        except OSError as exc:
            raise UserError(f"the store cannot be read: {exc.strerror}", file=self.root) from None
        if found != LAYOUT:
            raise UserError(f"unknown store layout {found!r}", file=marker,
                            hint=f"this udo-build uses {LAYOUT!r}; use another --store folder")

    def action_lock(self, key: str):  # type: ignore[no-untyped-def]
        return action_lock(self.root, key)

    def build_lock(self):  # type: ignore[no-untyped-def]
        return store_lock(self.root, exclusive=False)

    def gc_lock(self, timeout: float | None = None):  # type: ignore[no-untyped-def]
        return store_lock(self.root, exclusive=True, timeout=timeout)

    def history_dir(self) -> Path:
        return self.root / "history"

    # -- the tiers --------------------------------------------------------------------------------

    def attach_remote(self, remote: Tier | None) -> None:
        self.remote = remote

    def lookup(self, key: str) -> tuple[ActionResult | None, str]:
        """(the result for `key` in the local action cache, "local"), or (None, "")."""
        hit = self.ac.get(key)
        if hit is not None:
            self.counters.add(local_hits=1)
            return hit, "local"
        self.counters.add(local_misses=1)
        return None, ""

    def fetch(self, key: str, *, peek: bool = False, linked: Linked | None = None,
              download: str = "all", index: bool = False, found: ActionResult | None = None
              ) -> Future[Fetched | None] | None:
        """Look `key` up in the remote tier, in a background thread (None when there is no
        remote tier, or it is disabled). The future gives None on a miss, else the verified
        result with a future of its blobs (True once those `download` asks for are stored
        locally: see `Remote.fetch_async`). With `peek`, nothing is stored (dry runs).
        `linked` says which outputs of a result go to an output folder (stored raw: see
        `Remote.download`). With `index`, `key` is an index key: the result may be made for
        another action key, which the caller checks, then asks for its key with `found=` it
        (see `Remote.fetch_async`)."""
        if self.remote is None:
            return None
        return self.remote.fetch_async(key, store=not peek, linked=linked, download=download,
                                       index=index, found=found)

    def fetch_inputs(self, outputs: Iterable[Output]) -> bool:
        """Store these outputs' blobs here, downloading from the remote tier those the store
        lacks (an action about to run reads its inputs from the store); False when one could
        not be had (or there is no remote tier to ask)."""
        if self.remote is None:
            return False
        return self.remote.fetch_outputs(outputs)

    def publish(self, result: ActionResult, index: Iterable[str] = ()) -> None:
        """Share a result this process built (uploaded in the background when a remote tier
        is attached and writable), filed under its index keys too (see `Remote.upload`)."""
        if self.remote is not None:
            self.remote.publish(result, index)

    def finish(self, *, count: bool = True, build: bool = True) -> None:
        """The end of a build (or a transfer): wait for its uploads; add its counters to
        `stats.json` (and count it as a build)."""
        if self.remote is not None:
            self.remote.wait()
        if count:
            from .counters import save_counters

            self.counters.add(builds=int(build))
            with self.recording("the cache counters (store stats)"):
                save_counters(self.root, self.counters)

    @contextlib.contextmanager
    def recording(self, what: str) -> Iterator[None]:
        """Around a write that only keeps a record (the build is whole without it): when the
        machine refuses it (read-only, full, not this user's), skip it and remember `what`."""
        try:
            yield
        except OSError as exc:
            if environment_problem(exc) is None:
                raise
            self.skipped.setdefault(what, exc)

    def unrecorded(self) -> Problem | None:
        """One note saying what could not be recorded, and why (None when all was)."""
        if not self.skipped:
            return None
        first = environment_problem(next(iter(self.skipped.values())))
        assert first is not None
        return Problem(f"not recorded ({first.message}): {', '.join(self.skipped)}",
                       str(self.root), hint=first.hint)

    def close(self) -> None:
        if self.remote is not None:
            self.remote.close()
        self.files.close()
