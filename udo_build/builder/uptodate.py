"""A no-op build replayed: while nothing that a no-op build read has changed, the next build of
the same command is that no-op again, told without loading the recipe, planning it or looking
anything up (like ninja, which trusts its logs while the files' times are as they were).

A build that found every action cached in the local store (no remote tier, no executor, no
targets, nothing written to its output folder) keeps, in the store's `noop/` folder, a record
of what it saw (`record`, then `save`):

- the command: the words of the command line (a CLI build; else the request), the working
  folder, the environment's UDO_BUILD_* variables, HOME and XDG_CONFIG_HOME, udo-build's
  version and folder, Python's, the cores;
- the identity (type, device, inode, size, mtime and ctime, as the stat cache keeps them) of
  every file it read or relied on: the recipe; the plan's source files (those whose digests
  the stat cache holds for that very identity); the config files and project markers it
  looked for, or their absence; the code that ran (every module file outside Python's own
  library, and the data files beside udo-build's modules); the action-cache entries and the
  blobs their outputs name (as the stat cache verified them); the output folder's files (as
  its manifest and the stat cache say) and its folders; the recipe's history; its report page;
- its report (every action cached, each with its key, reason and description) and warnings.

`replay` stats them all. When every one is as recorded, the build is the recorded no-op: under
the locks a build takes (the store's shared lock, then the output folder's) it checks the store
and the folder, counts its hits in the store's counters, and returns the report with its own
time. Anything different, missing or unreadable, and the build runs in full (and records again
when it is a no-op). What a full no-op does besides is not needed then: the history is
unchanged (a no-op does not write it), and the report page stays the recorded build's (the
same actions, the same statuses; its seconds are that build's).

Trusted like the stat cache (store/filecache.py): a file is as recorded while its identity is
(no user can set a ctime), and nothing is recorded that changed during the recording build or
in the two seconds before it (file times come from a coarser clock than the build's; a file the
stat cache verifies is one it keeps a digest of, which it does not within two seconds either).
An action-cache entry a day old is left to a full build, which refreshes its mtime (its last
use, for gc).
"""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from contextlib import contextmanager

from .. import __version__
from ..errors import Problem, UserError

# typing's, without importing typing or pathlib: a replayed no-op runs through here (see
# cli/__init__.py); the recording build imports pathlib where it needs it
TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable, Iterator, Sequence
    from contextlib import AbstractContextManager
    from pathlib import Path
    from typing import Any

    from ..recipe import Recipe
    from ..store import Store
    from .engine import ActionState
    from .outcome import BuildReport

    # The session's values (this module is below it): a BuildRequest, a BuildReport, its Events.
    Request = Any
    Report = Any
    Events = Any

SCHEMA = "udo-build/noop-record"
VERSION = 2  # 2: a CLI build recorded under its words (`command_line`)
FOLDER = "noop"  # in the store
RACY_NS = 2_000_000_000  # the stat cache's RACY_SECONDS
TOUCH_AFTER_NS = 86_400 * 10**9  # the action cache's TOUCH_AFTER
ENV_NAMES = ("HOME", "XDG_CONFIG_HOME")
ENV_PREFIX = "UDO_BUILD_"
PACKAGE = os.path.dirname(os.path.dirname(__file__))  # udo-build's folder

# A recorded path: [path, followed (stat, not lstat), what it is]: its identity, None (absent)
# or True (present: a project marker, whatever it holds).


def identity(st: os.stat_result) -> list[int]:
    """A file's identity: its type, device, inode, size, mtime and ctime (ns)."""
    return [stat.S_IFMT(st.st_mode), st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns,
            st.st_ctime_ns]


def _now_identity(path: str, follow: bool) -> list[int] | None:
    try:
        return identity(os.stat(path) if follow else os.lstat(path))
    except (OSError, ValueError):
        return None


def unchanged(rows: Iterable[list[Any]]) -> bool:
    """Whether every recorded path has its recorded identity (is still absent, or present)."""
    for path, follow, was in rows:
        now = _now_identity(path, follow)
        if now != was and not (was is True and now is not None):
            return False
    return True


# -- the command ----------------------------------------------------------------------------------

def replayable(request: Request) -> bool:
    """A build whose no-op may be recorded and replayed: one recipe (no targets), writing its
    output folder on this machine."""
    return not (request.targets or request.dry_run or request.shard is not None
                or request.executor)


def command(request: Request) -> dict[str, Any]:
    """What a replay's command must equal: the command line the CLI was given
    (`request.command_line`, see `command_line`), else the request itself; with where and
    with what it runs."""
    if request.command_line:
        return command_line(request.command_line)
    return _in_context({"request": json.loads(json.dumps(request))})


def command_line(words: Sequence[str]) -> dict[str, Any]:
    """The command of a build the CLI was asked for with `words` (as it records them, not
    parsed: what they ask for follows from them, the code and the environment, which the
    record holds, so the CLI replays a no-op before it parses its words; see cli/__init__.py,
    `recorded_words`)."""
    return _in_context({"words": list(words)})


def _in_context(given: dict[str, Any]) -> dict[str, Any]:
    env = {k: v for k, v in os.environ.items() if k.startswith(ENV_PREFIX) or k in ENV_NAMES}
    return {**given, "cwd": os.getcwd(), "env": env, "tool": __version__,
            "package": PACKAGE, "python": sys.version,
            "executable": sys.executable, "cores": os.cpu_count()}


def record_path(store_root: str | Path, cmd: dict[str, Any]) -> str:
    try:  # the builtin sha256: hashlib would load OpenSSL (milliseconds a no-op need not spend)
        from _sha256 import sha256
    except ImportError:  # pragma: no cover - a Python built without it
        from hashlib import sha256
    name = sha256(json.dumps(cmd, sort_keys=True).encode()).hexdigest()[:32]
    return os.path.join(store_root, FOLDER, f"{name}.json")


# -- replay ---------------------------------------------------------------------------------------

def replay(request: Request, events: Events) -> tuple[dict[str, Any], float] | None:
    """The recorded no-op of this request when everything it read is as it was, its hits
    counted in the store and its warnings told: (its report, as `Draft.save` keeps it, the
    seconds the replay took); None when the build must run (nothing was counted then)."""
    if not replayable(request):
        return None
    return replay_command(command(request), request.store, events)


def replayed_command_line(words: Sequence[str], store: str | None,
                          events: Events) -> BuildReport | None:
    """The build the CLI was asked for with `words` (a request's `command_line`) as its
    recorded no-op (see `replay`), its words not parsed (but for the store they name); None
    when it must run."""
    from .outcome import BuildReport

    found = replay_command(command_line(words), store, events)
    return None if found is None else BuildReport.of_record(*found, path=str)  # printed only


def replay_command(cmd: dict[str, Any], store: str | None, events: Events
                   ) -> tuple[dict[str, Any], float] | None:
    """`replay` of the build recorded as `cmd` (`command`, `command_line`) in the store at
    `store` (None: the default)."""
    started = time.perf_counter()
    kinds = sys.modules.get(f"{__package__}.actions")  # loaded: maybe changed in-process
    if kinds is not None and not kinds.pristine():
        return None
    from ..store import store_folder

    root = store_folder(store)
    try:
        with open(record_path(root, cmd), "rb") as f:
            doc = json.loads(f.read())
        if doc["schema"] != SCHEMA or doc["version"] != VERSION or doc["command"] != cmd:
            return None
        if doc["fresh_until"] < time.time_ns() or not unchanged(doc["files"]):
            return None
        return _replay(doc, root, events, started)
    except (OSError, ValueError, KeyError, TypeError, RecursionError, UserError):
        return None  # no record, a damaged one, or a folder the build must tell about


def _replay(doc: dict[str, Any], root: str, events: Events,
            started: float) -> tuple[dict[str, Any], float] | None:
    from ..store.locks import store_lock
    from .owner import owned

    report = _checked(doc["report"])
    warnings = [Problem(*row) for row in doc["warnings"]]
    out = report["out"]
    with store_lock(root, exclusive=False):  # gc cannot remove what is checked meanwhile
        if not unchanged(doc["store"]):
            return None
        with owned(out, lambda text: events.warning(Problem(text, file=str(out)))):
            if not unchanged(doc["out"]):
                return None
            _count(root, len(report["actions"]))
            for problem in warnings:
                events.warning(problem)
            return report, time.perf_counter() - started


def _checked(report: Any) -> dict[str, Any]:
    """The recorded report, its shape checked (ValueError: a damaged record, not replayed)."""
    texts = [report[k] for k in ("recipe", "file", "store", "out", "where")]
    rows = report["actions"]
    if not all(isinstance(t, str) for t in texts) or not isinstance(report["page"], str | None) \
            or not isinstance(rows, list) or not all(isinstance(r, list) and len(r) == 11
                                                     for r in rows):
        raise ValueError("a damaged no-op record")
    return dict(report)


def _count(root: str, hits: int) -> None:
    """Count the build and its hits in the store's counters, as a full no-op does."""
    from ..store.counters import Counters, save_counters

    counters = Counters()
    counters.add(builds=1, local_hits=hits)
    save_counters(root, counters)


# -- record ---------------------------------------------------------------------------------------

class Told:
    """A build's events, remembering its warnings: those a replayed no-op tells again (the
    recipe's and the op definitions': what the record checks gives them again, see
    uptodate.py) and whether any other was told (a build that told one is not recorded)."""

    def __init__(self, events: Events, started_ns: int) -> None:
        self.events = events
        self.started_ns = started_ns
        self.kept: list[Problem] = []
        self.keeping = False
        self.other = False
        self.draft: Draft | None = None  # set by a build that was a no-op

    def warning(self, problem: Problem) -> None:
        if self.keeping:
            self.kept.append(problem)
        else:
            self.other = True
        self.events.warning(problem)

    def progress(self, total: int) -> AbstractContextManager[Any]:
        return self.events.progress(total)  # type: ignore[no-any-return]


@contextmanager
def keeping(events: Events | Told) -> Iterator[None]:
    """Warnings told meanwhile are kept for a replay (see `Told`)."""
    if not isinstance(events, Told):
        yield
        return
    events.keeping = True
    try:
        yield
    finally:
        events.keeping = False


class Draft:
    """A no-op build's record while its locks are held (`record`); `save` adds its report."""

    def __init__(self, doc: dict[str, Any], store_root: Path) -> None:
        self.doc = doc
        self.store_root = store_root

    def save(self, report: Report, warnings: list[Problem]) -> None:
        """Keep the record with the report (and its page, as written) and the warnings told
        (best effort: a store that cannot keep it builds in full next time)."""
        from ..atomic import write_atomic

        rows = [[a.id, a.kind, a.label, a.status, a.key, a.seconds, a.queued, a.origin,
                 a.reason, a.description, a.shared] for a in report.actions]
        page = None if report.page is None else str(report.page)
        self.doc["report"] = {"recipe": report.recipe, "file": str(report.file),
                              "store": str(report.store), "out": str(report.out),
                              "where": report.where, "page": page, "actions": rows}
        if page is not None:
            self.doc["out"].append([page, False, _now_identity(page, False)])
        self.doc["warnings"] = [[w.message, w.file, w.line, w.column, w.field, w.hint]
                                for w in warnings]
        path = record_path(self.store_root, self.doc["command"])
        try:
            write_atomic(path, json.dumps(self.doc).encode(), readonly=False, durable=False)
        except OSError:
            pass


class _Untrusted(Exception):
    """Something the record would rely on changed during the build, or too recently."""


def record(store: Store, request: Request, recipe: Recipe, out: Path,
           states: dict[str, ActionState], started_ns: int) -> Draft | None:
    """The record of this build, when it was a no-op that a later build may replay (called
    while its locks are held, after its output folder was checked); None otherwise."""
    from .actions import pristine

    if not replayable(request) or not pristine() or store.remote is not None or store.skipped \
            or not states or not all(_hit(s) for s in states.values()):
        return None
    trust = Trust(store, started_ns - RACY_NS)  # file times come from a coarser clock
    try:
        files = [*trust.plain(_project_files(recipe), follow=True), *_markers(recipe),
                 *trust.plain(_code_files(), follow=True, present=True),
                 *trust.sources(states)]
        entries = trust.plain(sorted({store.ac.file_of(s.key or "") for s in states.values()}),
                              follow=False, present=True)
        kept = [*entries, *trust.blobs(states),
                *trust.plain([_history(store, recipe)], False, present=True)]
        folder = trust.folder(out)
    except _Untrusted:
        return None
    fresh_until = min(e[2][4] for e in entries) + TOUCH_AFTER_NS
    return Draft({"schema": SCHEMA, "version": VERSION, "command": command(request),
                  "fresh_until": fresh_until, "files": files, "store": kept, "out": folder},
                 store.root)


def _hit(state: ActionState) -> bool:
    """Cached in the local store, whole."""
    return state.status == "cached" and state.origin == "local" and not state.healed \
        and state.result is not None


class Trust:
    """Identities a record may rely on: a file unchanged since before the build began (and
    not within the racy window), or one whose digest the stat cache holds for its identity."""

    def __init__(self, store: Store, before_ns: int) -> None:
        self.store = store
        self.before_ns = before_ns
        self._resolved_paths: dict[str, str] = {}

    def plain(self, paths: Iterable[Path | str], follow: bool, *, present: bool = False
              ) -> list[list[Any]]:
        """Files (or folders) unchanged since before the build; `present`: they must exist."""
        rows = []
        for path in paths:
            ident = _now_identity(str(path), follow)
            if ident is None and present or ident is not None and ident[5] >= self.before_ns:
                raise _Untrusted(path)
            rows.append([str(path), follow, ident])
        return rows

    def _verified(self, path: str, key: str, kind: str, digest: str, follow: bool
                  ) -> list[Any]:
        try:
            st = os.stat(path) if follow else os.lstat(path)
        except OSError:
            raise _Untrusted(path) from None
        if self.store.files.known(key, kind, st) != digest:
            raise _Untrusted(path)
        return [path, follow, identity(st)]

    def sources(self, states: dict[str, ActionState]) -> list[list[Any]]:
        """The plan's source files, as the stat cache digested them for the actions' keys (an
        input a kind keyed once for two equal files: either digest of the action's)."""
        from .plan import Source

        rows: dict[str, list[Any]] = {}
        checked: set[tuple[str, str, str]] = set()  # (path, kind, digest): each verified once
        for state in states.values():
            digests = {planned: state.inputs[keyed] for keyed, planned in state.names.items()}
            for planned, source in state.action.inputs.items():
                if not isinstance(source, Source):
                    continue
                path, used = str(source.path), digests.get(planned)
                if used is not None and (path, source.digest, used) in checked:
                    continue  # another action keyed this file as this one did
                row = self._verified(path, self._resolved(path), source.digest, used, True) \
                    if used is not None else self._used(path, source.digest, state)
                if used is not None:
                    checked.add((path, source.digest, used))
                rows.setdefault(path, row)
        return list(rows.values())

    def _resolved(self, path: str) -> str:
        """The stat cache's key of a source file (its resolved path), resolved once."""
        found = self._resolved_paths.get(path)
        if found is None:
            from pathlib import Path

            found = self._resolved_paths[path] = str(Path(path).resolve())
        return found

    def _used(self, path: str, kind: str, state: ActionState) -> list[Any]:
        for digest in set(state.inputs.values()):
            try:
                return self._verified(path, self._resolved(path), kind, digest, True)
            except _Untrusted:
                continue
        raise _Untrusted(path)

    def blobs(self, states: dict[str, ActionState]) -> list[list[Any]]:
        """The blobs of the cached results (a tree's manifest and files), as verified."""
        cas = self.store.cas
        digests: set[str] = set()
        for state in states.values():
            assert state.result is not None
            for output in state.result.outputs.values():
                digests.add(output.digest)
                if output.type == "tree":
                    digests.update(e["digest"] for e in cas.tree_entries(output.digest) or ())
        rows = []
        for digest in sorted(digests):
            path = cas.find(digest)
            if path is None:
                raise _Untrusted(digest)
            rows.append(self._verified(str(path), str(path), "blob", digest, False))
        return rows

    def folder(self, out: Path) -> list[list[Any]]:
        """The output folder: its folders (no entry added or removed since), its manifest,
        and every file the manifest names, holding the digest it names."""
        from ..store.manifest import read_manifest
        from .outputs import MANIFEST

        manifest = out / MANIFEST
        rows = self.plain([*_folders(out), manifest], follow=False, present=True)
        named = read_manifest(manifest)
        root = str(out.resolve())
        for rel, digest in sorted(named.items()):
            rows.append(self._verified(str(out / rel), f"{root}/{rel}", "content", digest,
                                       False))
        return rows


def _folders(out: Path) -> Iterator[Path]:
    """The output folder and every folder in it (a link where a folder was is not one)."""
    from pathlib import Path

    for top, dirs, _ in os.walk(out):
        yield Path(top)
        for name in dirs:
            if stat.S_ISLNK(os.lstat(os.path.join(top, name)).st_mode):
                raise _Untrusted(os.path.join(top, name))


def _history(store: Store, recipe: Recipe) -> Path:
    from .history import history_path

    return history_path(store, recipe.path)


def _project_files(recipe: Recipe) -> list[Path]:
    """The recipe, every path it names (a folder with the folders in it: the native check
    finds its sources there), and every config file a build looks for (each must stay as it
    is, or absent)."""
    from pathlib import Path

    from .settings import PROJECT_FILES, USER_FILE

    files = [recipe.path]
    for path in recipe.named:
        files += [Path(top) for top, _, _ in os.walk(path)] if path.is_dir() else [path]
    home = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.environ.get("HOME") or "~",
                                                             ".config")
    files.append(Path(home).expanduser() / USER_FILE)
    files += [folder / name for folder in _above(recipe) for name in PROJECT_FILES]
    return files


def _markers(recipe: Recipe) -> list[list[Any]]:
    """The project markers looked for from the recipe's folder up (`source.find_root`):
    present or absent, whatever they hold (a `.git` folder changes all the time)."""
    from ..source import PROJECT_MARKERS

    return [[str(path), True, True if path.exists() else None]
            for folder in _above(recipe) for path in (folder / m for m in PROJECT_MARKERS)]


def _above(recipe: Recipe) -> list[Path]:
    """The folders from the recipe's up to its project folder (to the file system's root
    when no folder had a marker: those were all looked at)."""
    from ..source import PROJECT_MARKERS

    folder = recipe.path.absolute().parent.resolve()
    marked = any((recipe.root / m).exists() for m in PROJECT_MARKERS)
    found = []
    for candidate in (folder, *folder.parents):
        found.append(candidate)
        if marked and candidate == recipe.root:
            break
    return found


def _code_files() -> list[str]:
    """The files of the code that ran: every module outside Python's own library, the plugin
    files, and the data files beside udo-build's modules (the SoC table, the schemas)."""
    import sysconfig

    from .actions import plugin_files

    paths = sysconfig.get_paths()
    library = tuple(os.path.join(paths[k], "") for k in ("stdlib", "platstdlib"))
    installed = tuple(os.path.join(paths[k], "") for k in ("purelib", "platlib"))
    package = os.path.join(PACKAGE, "")
    files: set[str] = set(plugin_files())
    folders: set[str] = set()
    for module in list(sys.modules.values()):
        path = getattr(module, "__file__", None)
        if not isinstance(path, str) or not os.path.isfile(path) \
                or path.startswith(library) and not path.startswith(installed):
            continue
        files.add(path)
        if path.startswith(package):
            folders.add(os.path.dirname(path))
    for folder in folders:
        with os.scandir(folder) as found:
            files.update(e.path for e in found if e.is_file()
                         and not e.name.endswith((".py", ".pyc")))
    return sorted(files)
