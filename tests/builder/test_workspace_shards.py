"""`--shard K/N` over a workspace: the shards partition the union of every recipe's actions
(through a real nginx remote cache, each shard with an empty store): no key runs in two shards,
together they run what the unsharded build runs, and the join build runs nothing and writes
each recipe's output folder byte for byte as the unsharded build did."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from ..store import remote_fixtures
from ..store.nginx import Nginx
from ..store.remote_fixtures import Keys, out_files
from .fakes import fake_kinds
from .test_engine import Project
from .test_workspace import Workspace, built

clean_env, keys, nginx_server = (remote_fixtures.clean_env, remote_fixtures.keys,
                                 remote_fixtures.nginx_server)  # the remote tests' fixtures


@pytest.fixture
def ws(tmp_path: Path) -> Iterator[Workspace]:
    with fake_kinds():
        yield Workspace(Project(tmp_path / "project"))


def _in(ws: Workspace, name: str, *argv: str, code: int = 0) -> dict:  # type: ignore[type-arg]
    ws.project.store = ws.root.parent / name / "store"
    ws.project.out = ws.root.parent / name / "out"
    return ws.build(str(ws.file), *argv, code=code)


def _keys(report: dict) -> list[str]:  # type: ignore[type-arg]
    return [a["key"] for r in report["recipes"] for a in r["actions"] if a["status"] == "built"]


@pytest.mark.usefixtures("clean_env")
def test_shards_partition_the_workspace_and_the_join_runs_nothing(
        ws: Workspace, nginx_server: Nginx, keys: Keys) -> None:
    local = _in(ws, "local")
    upload = ("--remote", nginx_server.url, "--trusted-key", keys.public, "--remote-upload",
              "--signing-key", str(keys.writer_file))
    shards = [_in(ws, f"shard{k}", "--shard", f"{k}/3", *upload) for k in (1, 2, 3)]
    ran = [key for shard in shards for key in _keys(shard)]
    assert len(ran) == len(set(ran))  # no key in two shards
    assert set(ran) == set(_keys(local))  # together: what the unsharded build runs
    assert [(s["out"], s["totals"]["failed"], s["shard"]) for s in shards] == [
        (None, 0, f"{k}/3") for k in (1, 2, 3)]
    assert {"opdef", "convert", "quantize"} <= set(built(shards[0]["recipes"][0]))
    prepares = [[a for r in s["recipes"] for a in built(r) if a.startswith("prepare:")]
                for s in shards]
    assert sorted(map(len, prepares)) == [0, 1, 1]  # the two records split, by key
    join = _in(ws, "join", *upload)
    assert join["totals"]["executed"] == 0
    for name in ("a", "b"):
        assert out_files(ws.root.parent / "join" / "out" / name) == out_files(
            ws.root.parent / "local" / "out" / name)
