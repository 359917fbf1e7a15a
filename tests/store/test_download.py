"""`--download all|outputs|minimal` against a real nginx cache: what a fresh clone reads of a
warm remote in each mode (nginx's access log: every blob the server sent), that `minimal` reads
no blob but the entries' envelopes and writes no file it would have to download, that an
action that runs fetches only its own inputs, and that a later build fills what `minimal` left
in the remote."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from udo_build.store import Store
from udo_build.store.remote import reapi as R

from .remote_fixtures import build, entry_files, executed
from .remote_fixtures import out_files as folder_files
from .warm_remote import Warm, clone

pytestmark = pytest.mark.usefixtures("clean_env")

SENT = re.compile(r'"(GET|HEAD) /(ac|cas)/([0-9a-f]{64}) HTTP/[0-9.]+" (\d{3}) (\d+)')


class Log:
    """The requests nginx answered since the log was marked."""

    def __init__(self, warm: Warm) -> None:
        self.server = warm.server
        self.offset = len(self.server.settled_log().encode())

    def requests(self) -> list[tuple[str, str, str, int, int]]:
        text = self.server.settled_log().encode()[self.offset:].decode()
        return [(m[0], m[1], m[2], int(m[3]), int(m[4])) for m in SENT.findall(text)]

    def blobs_read(self, warm: Warm) -> dict[str, int]:
        """The blobs sent (GET /cas/ answered 200) that are not an entry's envelope: digest ->
        bytes."""
        envelopes = {R.entry_envelope(p.read_bytes(), 1 << 20).digest  # type: ignore[union-attr]
                     for p in entry_files(warm.server).values()}
        return {name: size for method, space, name, status, size in self.requests()
                if method == "GET" and space == "cas" and status == 200
                and name not in envelopes}


def out_files(folder: Path) -> dict[str, bytes]:
    return {rel: data for rel, data in folder_files(folder).items()
            if not Path(rel).name.startswith(".udo-build")}


def out_bytes(folder: Path) -> int:
    return sum(len(data) for data in out_files(folder).values())


def test_each_mode_reads_what_it_says(shared: Warm, tmp_path: Path) -> None:
    read: dict[str, int] = {}
    for mode in ("all", "outputs", "minimal"):
        other = clone(tmp_path / mode)
        log = Log(shared)
        summary, err = build(other, *shared.read, "--download", mode)
        assert (summary["executed"], summary["cached"], err) == (0, 9, "")
        read[mode] = sum(log.blobs_read(shared).values())
        if mode != "minimal":
            assert out_files(other.out) == out_files(shared.source.out)
    full = out_bytes(shared.source.out)
    # every output of every action; those of the output folder only; none
    assert read["all"] > read["outputs"] and read["minimal"] == 0
    # a file made of parts (the bundles) also reads its manifest: a few hundred bytes
    assert 0 < read["outputs"] <= full + 1024 * len(list(shared.source.out.rglob("*.udb"))), \
        (read, full)


def test_minimal_reads_no_blob_and_says_what_stays_remote(shared: Warm, tmp_path: Path) -> None:
    other = clone(tmp_path)
    log = Log(shared)
    summary, _ = build(other, *shared.read, "--download", "minimal")
    assert (summary["executed"], summary["cached"]) == (0, 9)
    assert log.blobs_read(shared) == {} and summary["remote"]["bytes_downloaded"] == 0
    heads = [r for r in log.requests() if r[0] == "HEAD"]
    assert heads and all(r[3] == 200 for r in heads)  # every output blob proven there
    assert out_files(other.out) == {}  # nothing written that would need a download
    left = summary["download"]
    assert left["mode"] == "minimal" and left["remote_only_actions"] == 9
    places = tuple(left["files_not_written"])  # a file, or a tree's folder
    assert [f for f in out_files(shared.source.out)
            if not (f in places or f.startswith(tuple(p + "/" for p in places)))] == []
    # a later build fills what minimal left in the remote: the output folder, then the store
    filled, _ = build(other, *shared.read)
    assert executed(filled) == [] and out_files(other.out) == out_files(shared.source.out)
    build(other, *shared.read, "--download", "all")
    again, _ = build(other, *shared.read, "--download", "all")
    assert {a["source"] for a in again["actions"]} == {"local"}


def test_minimal_is_a_miss_when_a_blob_is_gone_from_the_remote(shared: Warm,
                                                                 tmp_path: Path) -> None:
    record = shared.result("prepare:sm8550/O2/native/default/int8").outputs["record"]
    shared.blob(record.digest).unlink()
    summary, _ = build(clone(tmp_path), *shared.read, "--download", "minimal")
    assert "prepare:sm8550/O2/native/default/int8" in executed(summary)


def test_an_action_that_runs_reads_only_its_own_inputs(shared: Warm, tmp_path: Path) -> None:
    other = clone(tmp_path)
    test_list = other.root / "ex" / "data" / "test.txt"
    test_list.write_text(test_list.read_text() * 2)  # a new key for the run, and only for it
    log = Log(shared)
    summary, _ = build(other, *shared.read, "--download", "minimal")
    assert executed(summary) == ["run:smoke"]
    source = Store(shared.source.store, create=False)
    own: set[str] = set()  # the blobs of the run's inputs (a tree's files too)
    for upstream, name in run_inputs(other):
        output = shared.result(upstream).outputs[name]
        own |= {output.digest, *(e["digest"] for e in (
            source.cas.tree_entries(output.digest) or () if output.type == "tree" else ()))}
    read = log.blobs_read(shared)
    assert read and set(read) <= own, sorted(set(read) - own)


def run_inputs(project: object) -> set[tuple[str, str]]:
    """(the action, its output) of every input of the run that is another action's."""
    from udo_build.builder.plan import Source, plan_recipe
    from udo_build.errors import Diagnostics
    from udo_build.recipe import load_recipe

    plan = plan_recipe(load_recipe(str(project.recipe), Diagnostics()))  # type: ignore[attr-defined]
    return {(s.action, s.output) for s in plan.actions["run:smoke"].inputs.values()
            if not isinstance(s, Source)}


def test_check_proves_the_blobs_without_reading_them(shared: Warm, tmp_path: Path) -> None:
    """`--check` defaults to minimal: up to date when every entry and blob is in the remote
    (no blob read), stale when a blob is gone."""
    other = clone(tmp_path)
    log = Log(shared)
    summary, _ = build(other, "--check", *shared.read)
    assert summary["cached"] == 9 and log.blobs_read(shared) == {}
    assert any(r[0] == "HEAD" for r in log.requests())
    record = shared.result("prepare:sm8550/O2/native/default/int8").outputs["record"]
    shared.blob(record.digest).unlink()
    stale, _ = build(other, "--check", *shared.read, code=1)
    assert stale["would_run"] >= 1
