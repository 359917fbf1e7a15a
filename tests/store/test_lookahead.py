"""A fresh checkout looks its whole chain of actions up at once, by chain keys (see
udo_build.builder.lookahead), against a real nginx: one round of lookups, each entry read once;
an index entry only says where to look (one made for another key is not used), and a remote
without index entries (filled by an older udo-build) still serves every action."""

from __future__ import annotations

import re
import threading
from pathlib import Path
from typing import Any

import pytest

from udo_build.builder.engine import Engine
from udo_build.store.remote.tier import Remote

from .remote_fixtures import build, executed, out_files
from .warm_remote import Warm, clone

pytestmark = pytest.mark.usefixtures("clean_env")
AC_GET = re.compile(r'"GET /ac/([0-9a-f]{64}) HTTP/[0-9.]+" (\d+) ')


def _ac_gets(warm: Warm, since: int) -> list[tuple[str, str]]:
    return AC_GET.findall(warm.server.settled_log()[since:])


def test_a_fresh_checkout_reads_each_entry_once_by_its_chain_key(shared: Warm,
                                                                    tmp_path: Path) -> None:
    keys = {a["key"] for a in shared.summary["actions"]}
    index = {p.name for p in shared.server.files("ac")} - keys
    since = len(shared.server.settled_log())
    other = clone(tmp_path)
    summary, err = build(other, *shared.read)
    assert executed(summary) == [] and summary["remote"]["hits"] == 9 and err == ""
    gets = _ac_gets(shared, since)
    assert all(status == "200" for _, status in gets)
    # each action once: the roots by their key (their chain key), the others by chain key
    names = [name for name, _ in gets]
    assert index and len(names) == len(set(names)) == 9
    assert index <= set(names) and set(names) - index <= keys
    assert out_files(other.out) == out_files(shared.source.out)


def test_the_lookups_of_every_level_are_in_flight_together(
        shared: Warm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Level after level, the root (opdef) would be looked up alone and the barrier broken:
    with chain keys, lookups of several levels wait at it together."""
    broken = _entries_together(monkeypatch, 3)
    summary, _ = build(clone(tmp_path), *shared.read)
    assert broken == [] and executed(summary) == [] and summary["remote"]["hits"] == 9


def test_the_blobs_of_every_level_download_before_the_build_resolves_their_keys(
        shared: Warm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A result found by its chain key has its blobs on their way at once (verified by their
    digests as any; its entry is written once the build's key is the one it was made for):
    the deepest action's are downloading while the build has not yet resolved the level
    above the roots. Level after level, they would wait for that resolution here."""
    deepest = shared.summary["actions"][-1]["key"]  # the plan is in dependency order
    started = threading.Event()
    blobs = Remote._blobs

    def noted(self: Remote, result: Any, *args: Any) -> Any:
        if result.key == deepest:
            started.set()
        return blobs(self, result, *args)

    waited: list[bool] = []
    resolve = Engine.resolve

    def resolve_late(self: Engine, state: Any, kind: Any) -> Any:
        if state.action.deps and not waited:
            waited.append(started.wait(10))
        return resolve(self, state, kind)

    monkeypatch.setattr(Remote, "_blobs", noted)
    monkeypatch.setattr(Engine, "resolve", resolve_late)
    other = clone(tmp_path)
    summary, err = build(other, *shared.read)
    assert waited == [True]
    assert executed(summary) == [] and summary["remote"]["hits"] == 9 and err == ""
    assert summary["remote"]["misses"] == 0
    assert out_files(other.out) == out_files(shared.source.out)


def test_a_result_found_by_its_chain_key_is_taken_without_a_thread_hop(
        shared: Warm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Once the build's key is the one an index entry's result was made for, nothing is left
    to ask the remote (the blobs are on their way): that lookup is answered in the build's
    own thread, not queued behind the lookups in flight, one level after another."""
    threads: list[bool] = []
    lookup = Remote._lookup

    def noted(self: Remote, key: str, *args: Any) -> Any:
        if args[-1] is not None:  # `found`
            threads.append(threading.current_thread() is threading.main_thread())
        return lookup(self, key, *args)

    monkeypatch.setattr(Remote, "_lookup", noted)
    summary, _ = build(clone(tmp_path), *shared.read)
    assert executed(summary) == [] and summary["remote"]["hits"] == 9
    assert threads and all(threads), threads


def test_an_index_entry_made_for_another_key_is_not_used(shared: Warm, tmp_path: Path) -> None:
    (quantize,) = shared.entries("quantize")[1:]  # its index entry (by chain key)
    quantize.chmod(0o644)
    quantize.write_bytes(shared.entry("convert").read_bytes())  # a genuine entry, another key
    other = clone(tmp_path)
    summary, err = build(other, *shared.read)
    assert executed(summary) == [] and summary["remote"]["hits"] == 9 and err == ""
    assert summary["remote"]["rejected"] == {}  # the index is where to look, not a claim
    assert out_files(other.out) == out_files(shared.source.out)


def test_a_remote_without_index_entries_serves_every_action(shared: Warm,
                                                             tmp_path: Path) -> None:
    keys = {a["key"] for a in shared.summary["actions"]}
    for path in shared.server.files("ac"):
        if path.name not in keys:
            path.unlink()  # as an older udo-build filled it
    other = clone(tmp_path)
    summary, err = build(other, *shared.read)
    assert executed(summary) == [] and summary["remote"]["hits"] == 9 and err == ""
    assert summary["remote"]["misses"] == 0  # an index key without an entry is not a miss
    assert out_files(other.out) == out_files(shared.source.out)


def test_every_source_is_hashed_in_the_build_thread_before_the_first_lookup(
        shared: Warm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The chain keys of every level are computed before any lookup starts, their sources
    hashed in the build's thread: a lookup thread answered meanwhile would take the GIL from
    the hashing at every read (at a load of 2: 185 ms of digests beside the first lookups, 30
    ms alone), and the deeper levels' lookups would wait for it."""
    from udo_build.store.filecache import FileDigests

    taken: list[bool] = []  # each source digest: taken in the build's thread
    at_first_lookup: list[int] = []
    digest, fetch_async = FileDigests.digest, Remote.fetch_async

    def noted_digest(self: FileDigests, path: Path, **options: Any) -> Any:
        taken.append(threading.current_thread() is threading.main_thread())
        return digest(self, path, **options)

    def noted_fetch(self: Remote, key: str, **options: Any) -> Any:
        if not at_first_lookup:
            at_first_lookup.append(len(taken))
        return fetch_async(self, key, **options)

    monkeypatch.setattr(FileDigests, "digest", noted_digest)
    monkeypatch.setattr(Remote, "fetch_async", noted_fetch)
    summary, _ = build(clone(tmp_path), *shared.read)
    assert executed(summary) == [] and summary["remote"]["hits"] == 9
    assert all(taken) and at_first_lookup == [len(taken)] and len(taken) > 1, \
        (taken, at_first_lookup)


def test_the_lookups_of_the_whole_plan_go_out_in_one_round(
        shared: Warm, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every action's lookup is in flight at once (nine here), not in rounds of as many as the
    lookup threads were (eight): the deepest action, answered in the last round, started its
    downloads last."""
    lookups = len(shared.summary["actions"])
    assert lookups == 9
    broken = _entries_together(monkeypatch, lookups)
    summary, _ = build(clone(tmp_path), *shared.read)
    assert broken == [] and executed(summary) == [] and summary["remote"]["hits"] == 9


def _entries_together(monkeypatch: pytest.MonkeyPatch, parties: int) -> list[str]:
    """Make every entry lookup wait at one barrier of `parties` before it goes out; the keys
    whose lookup found the barrier broken (fewer were in flight together) are listed in the
    list returned."""
    barrier = threading.Barrier(parties, timeout=10)
    broken: list[str] = []
    entry = Remote.entry

    def entry_together(self: Remote, key: str, **options: Any) -> Any:
        try:
            barrier.wait()
        except threading.BrokenBarrierError:
            broken.append(key)
        return entry(self, key, **options)

    monkeypatch.setattr(Remote, "entry", entry_together)
    return broken
