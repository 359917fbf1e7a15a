"""A build heals what was damaged: corrupt or missing blobs of cached actions are made again in
the same build (with a note), the output folder is checked against its manifest through the stat
cache and rewritten where it differs, and unsafe publish paths are refused."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from udo_build.builder.engine import Options
from udo_build.builder.outputs import materialize
from udo_build.builder.session import Quiet, load, opened_store, plan, run_plan
from udo_build.cli import main
from udo_build.store import Store
from udo_build.store.ac import ActionResult, Output
from udo_build.store.maintenance import verify

from .fakes import fake_kinds
from .test_engine import Project, executed


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    with fake_kinds():
        yield Project(tmp_path)

def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file() and p.name != ".udo-build-lock"}


def _flip(path: Path, at: int = -1) -> None:
    path.chmod(0o644)
    data = bytearray(path.read_bytes())
    data[at] ^= 0xFF
    with open(path, "r+b") as fh:  # in place: a hard link sees it too
        fh.write(data)


def _build(project: Project, out: Path) -> tuple[dict, str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    code = main(["build", str(project.recipe), "--store", str(project.store), "--out", str(out),
                 "-j", "1", "--json"], stdout=stdout, stderr=stderr, env={})
    assert code == 0, stderr.getvalue()
    return json.loads(stdout.getvalue()), stderr.getvalue()


def test_a_damaged_output_file_is_rewritten(project: Project) -> None:
    project.build()
    good = _tree(project.out)
    copied = [p for p in project.out.rglob("*.udb") if p.stat().st_nlink == 1]
    linked = [p for p in project.out.rglob("*") if p.is_file() and p.stat().st_nlink > 1]
    assert copied and linked
    _flip(copied[0])
    _flip(linked[0])  # written through the hard link: the store's blob is damaged too
    summary, err = _build(project, project.out)
    assert _tree(project.out) == good
    assert "did not hold what the last build wrote there" in err
    healed = [a for a in summary["actions"] if "corrupt (quarantined)" in a.get("reason", "")]
    assert [a["status"] for a in healed] == ["built"]
    assert list((project.store / "quarantine").iterdir())
    assert verify(Store(project.store)).problems == []


def test_damaged_blobs_are_made_again_in_the_same_build(project: Project) -> None:
    project.build()
    good = _tree(project.out)
    # the actions' outputs (the copies of the project's files, which actions read their
    # sources from, are read only by the actions that run: see the next test)
    sources = {hashlib.sha256(p.read_bytes()).hexdigest() for p in project.root.rglob("*")
               if p.is_file() and not p.is_relative_to(project.store)}
    blobs = sorted(p for p in (project.store / "cas").rglob("*")
                   if p.is_file() and p.name.split(".")[0] not in sources)
    for i, blob in enumerate(blobs[::3]):
        blob.chmod(0o644)
        if i % 3 == 0:
            _flip(blob, len(blob.read_bytes()) // 2)
        elif i % 3 == 1:
            blob.write_bytes(blob.read_bytes()[: blob.stat().st_size // 2])
        else:
            blob.unlink()
    summary, err = _build(project, project.root / "fresh")
    assert _tree(project.root / "fresh") == good
    notes = [a for a in summary["actions"] if "the store's copy" in a.get("reason", "")]
    assert notes and all(a["status"] == "built" for a in notes)
    assert err.count("the store's copy") == len(notes)
    again, _ = _build(project, project.root / "fresh")
    assert executed(again) == [] and verify(Store(project.store)).problems == []


def test_damaged_copies_of_source_files_are_stored_again_by_the_actions_that_read_them(
        project: Project) -> None:
    project.build()
    good = _tree(project.out)
    sources = {hashlib.sha256(p.read_bytes()).hexdigest() for p in project.root.rglob("*")
               if p.is_file() and not p.is_relative_to(project.store)}
    copies = [p for p in (project.store / "cas").rglob("*") if p.name.split(".")[0] in sources]
    assert copies
    for blob in copies:
        blob.chmod(0o644)
        blob.write_bytes(b"")
    shutil.rmtree(project.store / "ac")  # every action runs again, reading its sources
    summary, _ = _build(project, project.root / "fresh")
    assert _tree(project.root / "fresh") == good and executed(summary)
    assert verify(Store(project.store)).problems == []


def test_the_output_folder_check_hashes_only_changed_files(project: Project) -> None:
    project.build()
    with opened_store(str(project.store)) as store:
        states = run_plan(store, plan(load(store, str(project.recipe), Quiet()), ())[1],
                          Options(jobs=1))
        results = [(s.result, s.action.published(s.result)) for s in states.values()
                   if s.result is not None]
        files = [p for p in project.out.rglob("*") if p.is_file()]
        for path in files:  # older than the racy window of the stat cache
            os.utime(path, (1e9, 1e9))
        materialize(store, project.out, results)
        store.files.hashed = 0
        sync = materialize(store, project.out, results)
        assert (store.files.hashed, sync.written, sync.damaged) == (0, 0, [])
        target = next(p for p in files if p.suffix == ".udb" and p.stat().st_nlink == 1)
        _flip(target)
        os.utime(target, (1e9, 1e9))  # mtime given back: the ctime still tells
        sync = materialize(store, project.out, results)
        assert store.files.hashed == 1 and sync.written == 1
        assert sync.damaged == [str(target.relative_to(project.out))]


def test_unsafe_publish_paths_are_refused_and_reported(project: Project) -> None:
    store = Store(project.store)
    blob = store.cas.put(b"payload")
    key = "ab" * 32
    for rel in ("../escape.txt", "/etc/passwd", "a/./b", ".udo-build-manifest.json"):
        result = ActionResult(key, "opdef", "evil", {"x": Output(blob.digest, blob.size)},
                              {rel: "x"})
        assert ActionResult.from_json(result.to_json()) is None
        store.ac.put(result)
        assert store.ac.get(key) is None
        found = [f for f in verify(store).problems if f.kind == "malformed action-cache entry"]
        assert len(found) == 1 and "unsafe path" in found[0].detail


def test_a_signed_entry_with_an_unsafe_publish_path_is_refused() -> None:
    from udo_build.store.remote import trust

    signer = trust.generate("ci")
    result = ActionResult("cd" * 32, "opdef", "evil", {"x": Output("ef" * 32, 1)},
                          {"../../home/user/.bashrc": "x"})
    verdict = trust.open_entry(trust.sign_entry(result, signer), "cd" * 32,
                               trust.trusted_set([signer.public()]))
    assert verdict.result is None and verdict.rejected == trust.MALFORMED
    assert "unsafe path" in verdict.detail


def test_a_shared_part_removed_before_its_output_is_stored_is_a_missing_input(
        tmp_path: Path) -> None:
    """A file-of-parts output shares its input's blob; removed between the read and the store
    (another process removing the store), it is that input missing (its producer runs again),
    never a bug of udo-build; a part the action never read stays one."""
    from udo_build.builder.actions import (
        ActionInput,
        FileOfParts,
        MissingInput,
        Produced,
        action_kind,
        unregister,
    )
    from udo_build.builder.execute import ActionSpec, Failed, InternalActionError, execute
    from udo_build.store.parts import Part

    store = Store(tmp_path / "store")
    shared = store.cas.put(b"record bytes" * 100)
    stranger = store.cas.put(b"never read" * 100)

    @action_kind("test-shares-a-part", version=1)
    def shares(ctx):  # type: ignore[no-untyped-def]
        part, data = ctx.input_part("record")
        other = Part(0, stranger.digest, stranger.size)
        for digest in ctx.params["remove"]:
            path = store.cas.path_of(digest)
            path.chmod(0o644)
            path.unlink()
        first = ctx.params["remove"] == [shared.digest]
        return Produced({"bundle": FileOfParts([(0, b"head"), (4, part if first else other)],
                                               4 + (part.size if first else other.size))})

    try:
        inputs = {"record": ActionInput(shared.digest)}
        for key, removed, expected in (("a" * 64, shared.digest, MissingInput),
                                       ("b" * 64, stranger.digest, InternalActionError)):
            store.cas.put(b"record bytes" * 100)  # the first round removed it
            spec = ActionSpec("test-shares-a-part", key, {"remove": [removed]}, inputs, "shares")
            with pytest.raises(Failed) as failed:
                execute(str(store.root), spec)
            assert type(failed.value.error) is expected, failed.value.error
            if expected is MissingInput:
                assert failed.value.error.name == "record"
            assert store.ac.get(key) is None
    finally:
        unregister("test-shares-a-part")
