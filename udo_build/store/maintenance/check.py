"""`store verify`: read every blob and check its digest, check every action-cache entry, tree
and history; with repair, fix what can be fixed.

Failing findings (the store holds something wrong; exit 1 unless repaired):

- corrupt blob: its bytes do not hash to its name, or do not decompress, or cannot be read;
- malformed action-cache entry: unreadable, not JSON, not a result, filed under another key, or
  publishing to an unsafe path (absolute, `..`, the output folder's own files);
- dangling action-cache entry: names an output blob the store lacks;
- corrupt tree: an entry's tree output is not a manifest, or names blobs missing or corrupt;
- unreadable history: a last-build record that does not parse.

Informational findings (normal states that a build or gc deals with; never failing):

- stale temporary file: a `.tmp-*` older than a minute, left by a killed writer; the write never
  became visible, so the store is whole (younger ones may be running writes and are not listed);
- unexpected file: a name outside the layout under cas/ or ac/ (left alone);
- orphan lock files: locks of keys without an entry (failed or collected actions; gc removes them);
- missing history outputs: a last build names outputs that gc or a repair removed (its next build
  makes them again).

Repair (under the exclusive lock: no build writes meanwhile) moves corrupt blobs to quarantine/,
removes the entries that are malformed, dangling, or use a corrupt blob or tree, and removes
unreadable histories and stale temporary files. It never deletes blob bytes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import Store
from ..cas import content_digest
from .scan import (
    Entry,
    History,
    Trees,
    blob_files,
    lock_files,
    locked,
    scan_entries,
    scan_histories,
    temporary_files,
    unexpected_files,
)

TMP_AGE = 60.0  # seconds: younger temporary files may belong to a running write
FAILING = ("corrupt blob", "malformed action-cache entry", "dangling action-cache entry",
           "corrupt tree", "unreadable history")
INFORMATIONAL = ("stale temporary file", "unexpected file", "orphan lock files",
                 "missing history outputs")


REPAIRS = {"corrupt blob": "moved to quarantine/", "malformed action-cache entry": "removed",
           "dangling action-cache entry": "removed", "unreadable history": "removed",
           "corrupt tree": "removed the action-cache entries that use it",
           "stale temporary file": "removed"}


@dataclass
class Finding:
    kind: str  # one of FAILING or INFORMATIONAL
    path: Path
    detail: str
    users: list[str] = field(default_factory=list)  # the entries and histories that need it
    repaired: str = ""  # what --repair did

    @property
    def failing(self) -> bool:
        return self.kind in FAILING

    def to_json(self) -> dict[str, Any]:
        return {"kind": self.kind, "failing": self.failing, "path": str(self.path),
                "detail": self.detail, "used_by": self.users, "repaired": self.repaired or None}


@dataclass
class VerifyReport:
    findings: list[Finding]
    blobs: int
    entries: int
    histories: int

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.failing]

    @property
    def ok(self) -> bool:
        """Nothing is wrong, or everything wrong was repaired."""
        return all(f.repaired for f in self.problems)


def verify(store: Store, *, repair: bool = False, wait: float = 30.0,
           now: float | None = None) -> VerifyReport:
    """Check every blob, entry, tree and history; with `repair`, fix what can be fixed (under
    the exclusive lock, so no build writes meanwhile; a plain check shares the lock)."""
    now = time.time() if now is None else now
    with locked(store, exclusive=repair, wait=wait):
        check = _Verifier(store)
        report = check.run(now)
        if repair:
            check.repair()
    return report


class _Verifier:
    def __init__(self, store: Store) -> None:
        self.store = store
        self.trees = Trees(store)
        self.good: set[str] = set()
        self.corrupt: dict[str, list[Finding]] = {}
        self.bad_trees: dict[str, Finding] = {}
        self.doomed: dict[Path, list[Finding]] = {}  # entries repair removes -> what that fixes
        self.findings: list[Finding] = []
        self.late = 0  # blobs stored by a running build after the scan

    def run(self, now: float) -> VerifyReport:
        blobs = 0
        for digest, files in blob_files(self.store).items():
            for path, _size in files:
                blobs += 1
                self._blob(digest, path)
        entries = scan_entries(self.store)
        for entry in entries:
            self._entry(entry)
        histories = scan_histories(self.store)
        for history in histories:
            self._history(history)
        self._informational(entries, now)
        return VerifyReport(self.findings, blobs + self.late, len(entries), len(histories))

    def _add(self, finding: Finding) -> Finding:
        self.findings.append(finding)
        return finding

    def _blob(self, digest: str, path: Path) -> None:
        actual, why = content_digest(path)
        if actual == digest:
            self.good.add(digest)
            return
        detail = why or f"its bytes hash to {actual}, not to its name"
        self.corrupt.setdefault(digest, []).append(self._add(Finding("corrupt blob", path, detail)))

    def _sound(self, digest: str) -> bool:
        """Whether a blob is stored and whole; one a build stored after the scan is read now."""
        if digest not in self.good and digest not in self.corrupt:
            path = self.store.cas.path_of(digest)
            if path is not None:
                self.late += 1
                self._blob(digest, path)
        return digest in self.good

    def _use(self, digest: str, kind: str, user: str) -> str:
        """'' when an output (and its tree's files) is sound, else 'missing', 'corrupt' or
        'tree'; `user` is recorded on the findings of the bad blobs it needs."""
        sound = self._sound(digest)
        needed = self.trees.closure(digest, kind)[0] if sound else {digest}
        whole = all([self._sound(d) for d in needed])
        for d in needed:
            for finding in self.corrupt.get(d, ()):
                if user not in finding.users:
                    finding.users.append(user)
        if not sound:
            return "corrupt" if digest in self.corrupt else "missing"
        bad = kind == "tree" and (self.trees.entries(digest) is None or not whole)
        return "tree" if bad else ""

    def _entry(self, entry: Entry) -> None:
        if entry.result is None:
            self._doom(entry.path, Finding("malformed action-cache entry", entry.path,
                                           entry.problem))
            return
        user = f"action-cache entry {entry.key[:12]} ({entry.result.description})"
        missing = []
        for name, out in sorted(entry.result.outputs.items()):
            state = self._use(out.digest, out.type, user)
            if state == "missing":
                missing.append(f"{name!r} ({out.digest[:12]})")
            elif state == "corrupt":
                self.doomed.setdefault(entry.path, []).extend(self.corrupt[out.digest])
            elif state == "tree":
                self.doomed.setdefault(entry.path, []).append(self._tree(out.digest, user))
        if missing:
            self._doom(entry.path, Finding("dangling action-cache entry", entry.path,
                                           f"names outputs the store lacks: {', '.join(missing)}"))

    def _doom(self, path: Path, finding: Finding) -> None:
        self.doomed.setdefault(path, []).append(self._add(finding))

    def _tree(self, digest: str, user: str) -> Finding:
        if digest not in self.bad_trees:
            entries = self.trees.entries(digest)
            bad = [f"{e['path']} ({e['digest'][:12]})" for e in entries or ()
                   if e["digest"] not in self.good]
            detail = ("the blob is not a tree manifest" if entries is None else
                      f"{len(bad)} of its files are missing or corrupt: {', '.join(bad[:5])}"
                      + (", ..." if len(bad) > 5 else ""))
            path = self.store.cas.path_of(digest) or self.store.cas.dir / digest
            self.bad_trees[digest] = self._add(Finding("corrupt tree", path, detail))
        finding = self.bad_trees[digest]
        if user not in finding.users:
            finding.users.append(user)
        return finding

    def _history(self, history: History) -> None:
        if history.doc is None:
            self._add(Finding("unreadable history", history.path, history.problem))
            return
        user = f"history of {history.name}"
        states = [self._use(d, k, user) for d, k in sorted(set(history.outputs()))]
        lacking = sum(state in ("missing", "tree") for state in states)  # corrupt: reported
        if lacking:
            self._add(Finding("missing history outputs", history.path,
                              f"{lacking} outputs of the last build of {history.name} are missing "
                              "or incomplete; its next build makes them again"))

    def _informational(self, entries: list[Entry], now: float) -> None:
        for path, age in temporary_files(self.store.root, now, TMP_AGE):
            self._add(Finding("stale temporary file", path, f"left {_duration(age)} ago by a "
                              "write that never finished (a killed process); never part of the "
                              "store"))
        for path in unexpected_files(self.store):
            self._add(Finding("unexpected file", path, "outside the store layout; left alone"))
        keys = {e.key for e in entries if e.result is not None}
        orphans = sum(1 for key, _ in lock_files(self.store) if key not in keys)
        if orphans:
            self._add(Finding("orphan lock files", self.store.root / "locks",
                              f"{orphans} lock files of actions without a cache entry (failed "
                              "or collected); gc removes them"))

    def repair(self) -> None:
        for finding in self.findings:
            if finding.kind in ("unreadable history", "stale temporary file"):
                _fix(finding, lambda f: f.path.unlink(missing_ok=True))
            elif finding.kind == "corrupt blob":
                _fix(finding, lambda f: self.store.cas.quarantine(f.path))
        stuck: set[int] = set()  # findings an entry removal failed for
        for path, fixed in self.doomed.items():
            try:
                path.unlink(missing_ok=True)
            except OSError as exc:
                for finding in fixed:
                    finding.detail += f" (could not remove {path}: {exc.strerror})"
                    stuck.add(id(finding))
        for finding in {id(f): f for fixed in self.doomed.values() for f in fixed}.values():
            if id(finding) in stuck:
                finding.repaired = ""
            elif finding.kind != "corrupt blob":
                finding.repaired = REPAIRS[finding.kind]
            elif finding.repaired:
                finding.repaired += "; removed the action-cache entries that use it"


def _duration(seconds: float) -> str:
    for limit, unit, scale in ((3600, "min", 60), (86400, "h", 3600)):
        if seconds < limit:
            return f"{seconds / scale:.0f} {unit}"
    return f"{seconds / 86400:.0f} days"


def _fix(finding: Finding, action: Callable[[Finding], object]) -> None:
    try:
        action(finding)
        finding.repaired = REPAIRS[finding.kind]
    except OSError as exc:
        finding.detail += f" (repair failed: {exc.strerror})"
