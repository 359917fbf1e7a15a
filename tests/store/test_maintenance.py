"""Store maintenance on real stores: stats, verify and repair, gc, and the action-cache list."""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from udo_build.errors import UserError
from udo_build.store import ActionResult, Output, Store
from udo_build.store.locks import store_lock
from udo_build.store.maintenance import (
    FAILING,
    GcOptions,
    gc,
    list_entries,
    parse_size,
    stats,
    verify,
)

NOW = time.time()
DAY = 86400.0


def key(name: str) -> str:
    return hashlib.sha256(name.encode()).hexdigest()


@dataclass
class Populated:
    store: Store
    opdef: Output  # compressible blob of the opdef entry (the recipe's history references it)
    tree: Output  # the package entry's tree
    bundle: Output  # incompressible blob of the convert entry
    tree_files: list[str]  # digests of the tree's files


def populate(root: Path) -> Populated:
    """Three entries (opdef, package with a tree, convert) and the history of recipe 'demo',
    whose last build is the opdef action."""
    store = Store(root / "store")
    opdef = store.cas.put(b"op definition " * 100)
    bundle = store.cas.put(os.urandom(3000))
    folder = root / "pkg"
    (folder / "src").mkdir(parents=True)
    (folder / "src" / "ops.cpp").write_text("int op(); " * 60)
    (folder / "Makefile").write_text("all:\n")
    tree = store.cas.put_tree(folder)
    outs = Populated(store, Output(opdef.digest, opdef.size), Output(tree.digest, tree.size,
                     "tree"), Output(bundle.digest, bundle.size), [])
    outs.tree_files = [e["digest"] for e in store.cas.tree_entries(tree.digest) or ()]
    add_entry(store, "opdef", {"definitions": outs.opdef})
    add_entry(store, "package", {"package": outs.tree})
    add_entry(store, "convert", {"bundle": outs.bundle})
    write_history(store, "demo", {"opdef:pkg": ("opdef", {"definitions": outs.opdef})})
    return outs


def add_entry(store: Store, name: str, outputs: dict[str, Output], age_days: float = 0.0) -> str:
    store.ac.put(ActionResult(key(name), name.split("-")[0], f"{name} action", outputs))
    if age_days:
        used = NOW - age_days * DAY
        os.utime(store.ac.path_of(key(name)), (used, used))
    return key(name)


def write_history(store: Store, recipe: str, actions: dict[str, tuple[str, dict[str, Output]]]
                  ) -> Path:
    """The documented history format (see builder/history.py), written a minute before NOW
    (the clock the maintenance functions are given, and the CLI tests freeze)."""
    doc = {"schema": "udo-build/history", "version": 1, "recipe": f"/src/{recipe}.yaml",
           "name": recipe, "updated": NOW - 60, "actions": {
               aid: {"kind": entry, "kind_version": 1, "key": key(entry), "params": {},
                     "inputs": {}, "outputs": {n: o.to_json() for n, o in outs.items()},
                     "built": NOW - 60}
               for aid, (entry, outs) in actions.items()}}
    path = store.history_dir() / f"{key(recipe)[:32]}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(doc))
    return path


def flip_byte(path: Path) -> None:
    path.chmod(0o644)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x55
    path.write_bytes(bytes(data))


def old_file(path: Path, seconds: float, data: bytes = b"partial") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    os.utime(path, (NOW - seconds, NOW - seconds))
    return path


def all_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and p.name != "gc.lock"}


def blob_path(store: Store, out: Output) -> Path:
    path = store.cas.path_of(out.digest)
    assert path is not None
    return path


@pytest.fixture
def pop(tmp_path: Path) -> Iterator[Populated]:
    populated = populate(tmp_path)
    yield populated
    populated.store.close()


# -- stats ----------------------------------------------------------------------------------------

def test_stats_counts_blobs_entries_recipes_and_leftovers(pop: Populated) -> None:
    store = pop.store
    old_file(store.root / "cas" / "ab" / ".tmp-0123-abc", 120)
    old_file(store.root / "cas" / "ab" / ".tmp-4567-abc", 1)  # a running write: not stale
    with store.action_lock(key("convert")):
        pass
    st = stats(store, now=NOW)
    files = [p for _, p in store.cas.iter_blobs()]
    assert st.blobs == len(files) == 5  # opdef, bundle, two tree files, the manifest
    assert st.disk_bytes == sum(p.stat().st_size for p in files)
    assert st.compressed == sum(p.suffix == ".zst" for p in files) == 2  # the manifest: raw
    logical = pop.opdef.size + pop.bundle.size + pop.tree.size + 600 + 5
    assert (st.logical_bytes, st.logical_unknown) == (logical, 0)
    assert (st.entries, st.by_kind, st.malformed_entries) == (
        3, {"convert": 1, "opdef": 1, "package": 1}, 0)
    assert [(r["name"], r["recipe"], r["actions"]) for r in st.recipes] == [
        ("demo", "/src/demo.yaml", 1)]
    assert (st.quarantined, st.stale_temporary, st.lock_files) == (0, 1, 1)
    assert st.to_json()["blobs"]["count"] == 5


# -- verify ---------------------------------------------------------------------------------------

def test_a_clean_store_verifies(pop: Populated) -> None:
    report = verify(pop.store, now=NOW)
    assert report.ok and report.findings == []
    assert (report.blobs, report.entries, report.histories) == (5, 3, 1)


def test_a_flipped_byte_is_reported_with_its_users_and_repair_quarantines(
        pop: Populated) -> None:
    store = pop.store
    path = blob_path(store, pop.opdef)
    flip_byte(path)
    report = verify(store, now=NOW)
    assert not report.ok
    [problem] = report.problems
    assert (problem.kind, problem.path, problem.repaired) == ("corrupt blob", path, "")
    assert problem.users == [f"action-cache entry {key('opdef')[:12]} (opdef action)",
                             "history of demo"]
    assert path.exists()  # without --repair nothing moves

    repaired = verify(store, repair=True, now=NOW)
    assert repaired.ok and repaired.problems[0].repaired.startswith("moved to quarantine/")
    assert not path.exists() and len(list((store.root / "quarantine").iterdir())) == 1
    assert not store.ac.path_of(key("opdef")).exists()  # it named the corrupt blob

    after = verify(store, now=NOW)
    assert after.ok and after.problems == []
    assert [f.kind for f in after.findings] == ["missing history outputs"]


@pytest.mark.parametrize("damage", ["truncate", "garbage"])
def test_damaged_compressed_and_raw_blobs_are_corrupt(pop: Populated, damage: str) -> None:
    for out in (pop.opdef, pop.bundle):
        path = blob_path(pop.store, out)
        path.chmod(0o644)
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2] if damage == "truncate" else b"\0" * len(data))
    report = verify(pop.store, now=NOW)
    assert sorted(f.path.name for f in report.problems) == sorted(
        [blob_path(pop.store, pop.opdef).name, blob_path(pop.store, pop.bundle).name])
    assert {f.kind for f in report.problems} == {"corrupt blob"}


def test_bad_action_cache_entries_are_reported_and_removed(pop: Populated) -> None:
    store = pop.store
    truncated = store.ac.path_of(key("x-truncated"))
    truncated.parent.mkdir(parents=True, exist_ok=True)
    truncated.write_bytes(store.ac.path_of(key("opdef")).read_bytes()[:40])
    garbage = store.ac.path_of(key("x-garbage"))
    garbage.parent.mkdir(parents=True, exist_ok=True)
    garbage.write_text('{"schema": "something else"}')
    misfiled = store.ac.path_of(key("x-misfiled"))
    misfiled.parent.mkdir(parents=True, exist_ok=True)
    misfiled.write_bytes(store.ac.path_of(key("convert")).read_bytes())
    add_entry(store, "x-dangling", {"out": Output(key("never stored"), 3)})
    report = verify(store, now=NOW)
    found = {f.path: (f.kind, f.detail) for f in report.problems}
    assert found == {
        truncated: ("malformed action-cache entry", "not JSON (truncated or overwritten)"),
        garbage: ("malformed action-cache entry",
                  "not an action result (wrong schema, version or shape)"),
        misfiled: ("malformed action-cache entry",
                   f"holds the result of another key ({key('convert')[:12]})"),
        store.ac.path_of(key("x-dangling")): (
            "dangling action-cache entry",
            f"names outputs the store lacks: 'out' ({key('never stored')[:12]})"),
    }
    assert verify(store, repair=True, now=NOW).ok
    assert not any(p.exists() for p in found)
    assert verify(store, now=NOW).findings == []


def test_a_tree_missing_a_file_is_a_corrupt_tree(pop: Populated) -> None:
    store = pop.store
    lost = store.cas.path_of(pop.tree_files[0])
    assert lost is not None
    lost.unlink()
    [problem] = verify(store, now=NOW).problems
    assert (problem.kind, problem.path) == ("corrupt tree", blob_path(store, pop.tree))
    assert problem.detail.startswith("1 of its files are missing or corrupt: ")
    assert problem.users == [f"action-cache entry {key('package')[:12]} (package action)"]
    add_entry(store, "package-2", {"not a tree": Output(pop.opdef.digest, 1, "tree")})
    details = {p.path: p.detail for p in verify(store, now=NOW).problems}
    assert details[blob_path(store, pop.opdef)] == "the blob is not a tree manifest"
    assert verify(store, repair=True, now=NOW).ok
    assert not store.ac.path_of(key("package")).exists()
    assert store.ac.path_of(key("opdef")).exists()
    assert verify(store, now=NOW).ok


def test_stale_temporary_files_are_notes_and_repair_removes_them(pop: Populated) -> None:
    store = pop.store
    stale = old_file(store.root / "cas" / "ab" / ".tmp-0123-abcd.zst", 61)
    fresh = old_file(store.root / "ac" / "cd" / ".tmp-4567-cd.json", 5)
    report = verify(store, now=NOW)
    assert report.ok and report.problems == []
    [note] = report.findings
    assert (note.kind, note.path, note.failing) == ("stale temporary file", stale, False)
    assert verify(store, repair=True, now=NOW).findings[0].repaired == "removed"
    assert not stale.exists() and fresh.exists()


def test_unreadable_history_fails_and_repair_removes_it(pop: Populated) -> None:
    history = next(pop.store.history_dir().glob("*.json"))
    history.write_text('{"schema": "udo-build/history", "act')
    [problem] = verify(pop.store, now=NOW).problems
    assert (problem.kind, problem.path) == ("unreadable history", history)
    assert verify(pop.store, repair=True, now=NOW).ok and not history.exists()


def test_orphan_locks_and_stray_files_are_notes(pop: Populated) -> None:
    store = pop.store
    for name in ("opdef", "failed-action"):
        with store.action_lock(key(name)):
            pass
    stray = old_file(store.root / "cas" / "zz" / "notes.txt", 0)
    report = verify(store, now=NOW)
    assert report.ok
    assert [(f.kind, f.failing) for f in report.findings] == [
        ("unexpected file", False), ("orphan lock files", False)]
    assert report.findings[0].path == stray
    assert report.findings[1].detail.startswith("1 lock files of actions without a cache entry")
    assert set(FAILING).isdisjoint(f.kind for f in report.findings)


def test_outputs_a_running_build_stores_after_the_blob_scan_are_not_dangling(
        pop: Populated, monkeypatch: pytest.MonkeyPatch) -> None:
    from udo_build.store.maintenance import check

    monkeypatch.setattr(check, "blob_files", lambda store: {})  # scanned: empty
    report = verify(pop.store, now=NOW)
    assert report.ok and report.findings == [] and report.blobs == 5


def test_verify_shares_the_lock_and_repair_waits_for_builds(pop: Populated) -> None:
    with store_lock(pop.store.root, exclusive=False):  # a build
        assert verify(pop.store, now=NOW).ok
        with pytest.raises(UserError, match="a build is running on this store"):
            verify(pop.store, repair=True, wait=0.1, now=NOW)
    with store_lock(pop.store.root, exclusive=True), \
            pytest.raises(UserError, match="a garbage collection is running"):
        verify(pop.store, wait=0.1, now=NOW)


def test_a_store_that_cannot_be_locked(pop: Populated, monkeypatch: pytest.MonkeyPatch) -> None:
    from udo_build.store.maintenance import scan

    def read_only(*args: object, **kwargs: object) -> None:
        raise PermissionError(30, "Read-only file system")

    monkeypatch.setattr(scan, "store_lock", read_only)
    assert verify(pop.store, now=NOW).ok  # reading needs no lock there
    with pytest.raises(UserError, match="the store cannot be locked: Read-only file system"):
        gc(pop.store, GcOptions(), now=NOW)


# -- gc -------------------------------------------------------------------------------------------

def test_gc_without_options_removes_only_what_is_unreachable(pop: Populated) -> None:
    store = pop.store
    orphan = store.cas.put(b"nobody needs me" * 40)
    add_entry(store, "convert", {"bundle": pop.bundle}, age_days=400)
    report = gc(store, GcOptions(), now=NOW)
    assert report.removed["blobs"][0] == 1 and report.removed["entries"][0] == 0
    assert not store.cas.has(orphan.digest)
    assert all(store.cas.has(o.digest) for o in (pop.opdef, pop.tree, pop.bundle))
    assert (report.kept_blobs, report.kept_entries, report.referenced_entries) == (5, 3, 1)
    assert verify(store, now=NOW).findings == []


def test_gc_older_than_expires_unused_entries_but_keeps_the_last_builds(
        pop: Populated) -> None:
    store = pop.store
    add_entry(store, "opdef", {"definitions": pop.opdef}, age_days=100)  # referenced
    add_entry(store, "convert", {"bundle": pop.bundle}, age_days=100)
    add_entry(store, "package", {"package": pop.tree}, age_days=1)
    report = gc(store, GcOptions(older_than=30), now=NOW)
    assert report.removed["entries"][0] == 1
    assert report.removed["blobs"] == [1, 3000]  # the incompressible bundle, stored raw
    assert not store.ac.path_of(key("convert")).exists() and not store.cas.has(pop.bundle.digest)
    assert store.ac.get(key("opdef")) is not None and store.ac.get(key("package")) is not None
    assert all(store.cas.has(d) for d in pop.tree_files)
    assert verify(store, now=NOW).findings == []


def test_gc_max_size_removes_least_recently_used_first(pop: Populated) -> None:
    store = pop.store
    for i in range(5):  # 5 entries of 1000 raw bytes each, e-0 the least recently used
        blob = store.cas.put(os.urandom(1000))
        add_entry(store, f"e-{i}", {"out": Output(blob.digest, 1000)}, age_days=10 - i)
    base = sum(p.stat().st_size for _, p in store.cas.iter_blobs()) - 5000
    report = gc(store, GcOptions(max_size=base + 2500), now=NOW)
    left = [i for i in range(5) if store.ac.path_of(key(f"e-{i}")).exists()]
    assert left == [3, 4] and report.fits and report.kept_bytes == base + 2000
    # the referenced opdef entry stays even when nothing else would fit
    report = gc(store, GcOptions(max_size=1), now=NOW)
    assert not report.fits and store.ac.get(key("opdef")) is not None
    assert store.cas.has(pop.opdef.digest) and not store.cas.has(pop.bundle.digest)


def test_gc_include_referenced_lets_the_last_builds_go(pop: Populated) -> None:
    store = pop.store
    history_only = store.cas.put(b"only a history names me" * 20)
    write_history(store, "other", {"convert:x": ("gone", {"b": Output(history_only.digest, 1)})})
    assert gc(store, GcOptions(), now=NOW).removed["blobs"][0] == 0
    add_entry(store, "opdef", {"definitions": pop.opdef}, age_days=100)
    report = gc(store, GcOptions(older_than=30, include_referenced=True), now=NOW)
    assert report.removed["entries"][0] == 1
    assert not store.cas.has(pop.opdef.digest) and not store.cas.has(history_only.digest)
    assert store.cas.has(pop.bundle.digest)
    report = verify(store, now=NOW)
    assert report.ok and {f.kind for f in report.findings} == {"missing history outputs"}


def test_gc_dry_run_removes_nothing(pop: Populated) -> None:
    store = pop.store
    store.cas.put(b"orphan" * 100)
    add_entry(store, "convert", {"bundle": pop.bundle}, age_days=100)
    old_file(store.root / "ac" / "aa" / ".tmp-1-x.json", 2 * 3600)
    before = all_files(store.root)
    report = gc(store, GcOptions(older_than=1, dry_run=True), now=NOW)
    assert all_files(store.root) == before
    assert report.dry_run and report.removed["blobs"][0] == 2
    assert report.removed["entries"][0] == 1
    assert report.removed["temporary_files"][0] == 1


def test_gc_removes_old_temporaries_orphan_locks_quarantine_and_markers(
        pop: Populated) -> None:
    store = pop.store
    stale = old_file(store.root / "history" / ".tmp-1-h.json", 2 * 3600)
    young = old_file(store.root / "cas" / "ab" / ".tmp-2-blob", 600)
    for name in ("opdef", "failed-action"):
        with store.action_lock(key(name)):
            pass
    old_q = store.root / "quarantine" / f"{'a' * 64}.{int((NOW - 40 * DAY) * 1e9)}"
    new_q = store.root / "quarantine" / f"{'b' * 64}.{int(NOW * 1e9)}"
    old_file(old_q, 0)
    old_file(new_q, 50 * DAY)  # quarantined now: its name tells, not its (blob's) mtime
    old_marker = old_file(store.root / "checked" / key("recipe a"), 40 * DAY, b"")
    new_marker = old_file(store.root / "checked" / key("recipe b"), 0, b"")
    gc(store, GcOptions(), now=NOW)
    assert not stale.exists() and young.exists()
    assert sorted(p.stem for p in (store.root / "locks").iterdir()) == [key("opdef")]
    assert old_q.exists() and old_marker.exists()  # only with --older-than
    report = gc(store, GcOptions(older_than=30), now=NOW)
    assert report.removed["quarantined"][0] == 1 and report.removed["checked"][0] == 1
    assert not old_q.exists() and new_q.exists() and not old_marker.exists() and new_marker.exists()


def test_gc_waits_for_a_running_build_then_fails(pop: Populated) -> None:
    held, release = threading.Event(), threading.Event()

    def build() -> None:
        with store_lock(pop.store.root, exclusive=False):
            held.set()
            release.wait(5)

    thread = threading.Thread(target=build)
    thread.start()
    try:
        held.wait(5)
        started = time.monotonic()
        with pytest.raises(UserError) as info:
            gc(pop.store, GcOptions(wait=0.2), now=NOW)
        assert time.monotonic() - started >= 0.2
        assert info.value.problem.message == "a build is running on this store"
        assert gc(pop.store, GcOptions(dry_run=True, wait=0.2), now=NOW).dry_run  # shares it
    finally:
        release.set()
        thread.join()
    assert gc(pop.store, GcOptions(wait=0.2), now=NOW).kept_entries == 3


def test_gc_keeps_what_save_history_records(tmp_path: Path) -> None:
    from udo_build.builder.actions import load_kinds
    from udo_build.builder.engine import ActionState
    from udo_build.builder.history import save_history
    from udo_build.builder.plan import PlannedAction

    load_kinds()
    store = Store(tmp_path / "store")
    blob = store.cas.put(b"definitions " * 50)
    result = ActionResult(key("real"), "opdef", "opdef of demo",
                          {"definitions": Output(blob.digest, blob.size)})
    store.ac.put(result)
    state = ActionState(PlannedAction("opdef", "opdef", {}, {}, "opdef"), status="built",
                        key=key("real"), result=result)
    recipe = tmp_path / "demo.yaml"
    save_history(store, recipe, "demo", {"opdef": state}, ["opdef"])
    os.utime(store.ac.path_of(key("real")), (NOW - 99 * DAY, NOW - 99 * DAY))
    assert gc(store, GcOptions(older_than=1), now=NOW).removed["entries"][0] == 0
    assert store.cas.has(blob.digest)
    assert [(r["name"], r["actions"]) for r in stats(store).recipes] == [("demo", 1)]
    [listed] = list_entries(store)[0]
    assert listed.referenced


# -- ls and sizes ---------------------------------------------------------------------------------

def test_list_entries_most_recent_first_with_content_sizes(pop: Populated) -> None:
    store = pop.store
    add_entry(store, "convert", {"bundle": pop.bundle}, age_days=3)
    add_entry(store, "package", {"package": pop.tree}, age_days=1)
    (store.ac.path_of(key("opdef")).parent / f"{key('junk')}.json").write_text("{")
    entries, malformed, kinds = list_entries(store)
    assert [e.kind for e in entries] == ["opdef", "package", "convert"]
    assert [e.referenced for e in entries] == [True, False, False]
    assert entries[1].outputs["package"]["size"] == 600 + 5  # the tree's files
    assert entries[2].size == 3000 and entries[2].to_json()["key"] == key("convert")
    assert (malformed, kinds) == (1, ["convert", "opdef", "package"])
    assert [e.kind for e in list_entries(store, "package")[0]] == ["package"]


@pytest.mark.parametrize(("text", "size"), [
    ("500M", 500 * 2**20), ("2G", 2 * 2**30), ("1.5GiB", int(1.5 * 2**30)),
    ("100000 bytes", 100000), ("100000", 100000), ("10kB", 10000), ("3 MB", 3_000_000),
    ("1t", 2**40), ("7b", 7),
])
def test_parse_size(text: str, size: int) -> None:
    assert parse_size(text) == size


@pytest.mark.parametrize("text", ["", "M", "-1G", "2 parsecs", "1.2.3G"])
def test_parse_size_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="examples: 500M, 2G"):
        parse_size(text)


def test_an_action_lock_whose_folder_is_removed_meanwhile_makes_it_again(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The store removed while a build runs (tests/cli/test_exit_codes.py) took the locks
    folder away between making it and opening the lock: a bug's exit 3 where the store heals
    what it lost."""
    import shutil

    import filelock

    from udo_build.store.locks import action_lock

    real = filelock.FileLock.acquire
    calls: list[int] = []

    def acquire(self: filelock.FileLock, *args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) == 1:  # removed between filelock's own folder check and its open
            shutil.rmtree(tmp_path / "locks")
            raise FileNotFoundError(2, "No such file or directory", self.lock_file)
        return real(self, *args, **kwargs)

    monkeypatch.setattr(filelock.FileLock, "acquire", acquire)
    with action_lock(tmp_path, "k" * 64):
        assert (tmp_path / "locks" / f"{'k' * 64}.lock").exists()
    assert len(calls) == 2
