"""Sharded CI (`udo-build RECIPE --shard K/N`): N runners, each with an empty store, split the
softplus recipe through one remote cache (a real nginx WebDAV server). Three shards started
together, as concurrent processes, execute each action key once in all: the first builds the
upstream, the split goes by key, the last gathers; the build without --shard (the join) then
executes nothing and writes the output folder a local build writes, byte for byte. A shard that
cannot upload its results exits 1 with their count (--remote-optional: 0)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from udo_build.builder.engine import ActionState
from udo_build.builder.plan import Dep, Plan, PlannedAction, Shard, fan_out, plan_recipe
from udo_build.builder.shards import ShardBuild, split_units
from udo_build.errors import Diagnostics
from udo_build.recipe import load_recipe

from ..conftest import EXAMPLES, RECIPES, REPO
from ..store import remote_fixtures
from ..store.nginx import Nginx
from ..store.remote_fixtures import Keys, cli, executed, out_files

clean_env, keys, nginx_server = (remote_fixtures.clean_env, remote_fixtures.keys,
                                 remote_fixtures.nginx_server)  # the remote tests' fixtures

SOFTPLUS = RECIPES / "softplus.yaml"
GATHER = ("assemble", "run:smoke", "check:smoke")  # what needs the records of every shard


def _build(tmp: Path, name: str, *extra: str) -> dict[str, Any]:
    code, out, err = cli("build", str(SOFTPLUS), "--store", str(tmp / name / "store"),
                         "--out", str(tmp / name / "out"), "-j", "2", "--json", *extra)
    assert code == 0, err
    return json.loads(out)


def _shard(tmp: Path, k: int, n: int, *extra: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k in ("PATH", "TMPDIR", "HOME")}
    env.update(PYTHONPATH=str(REPO), XDG_CONFIG_HOME=str(tmp / "xdg"))
    return subprocess.Popen(
        [sys.executable, "-m", "udo_build", "build", str(SOFTPLUS), "--store",
         str(tmp / f"shard{k}" / "store"), "--out", str(tmp / f"shard{k}" / "out"), "-j", "1",
         "--json", "--shard", f"{k}/{n}", *extra],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.usefixtures("clean_env")
def test_shards_started_together_execute_each_key_once_then_the_join_builds_nothing(
        nginx_server: Nginx, keys: Keys, tmp_path: Path) -> None:
    local = _build(tmp_path, "local")
    remote = ("--remote", nginx_server.url, "--trusted-key", keys.public)
    upload = (*remote, "--remote-upload", "--signing-key", str(keys.writer_file))
    runners = [_shard(tmp_path, k, 3, *upload) for k in (1, 2, 3)]  # all at once
    shards = []
    for k, runner in enumerate(runners, 1):
        out, err = runner.communicate(timeout=600)
        assert runner.returncode == 0, err
        shard = json.loads(out)
        assert (shard["shard"], shard["out"], shard["failed"], shard["unpublished"]) == (
            f"{k}/3", None, 0, 0)
        assert not (tmp_path / f"shard{k}" / "out").exists()  # a shard writes no outputs
        shards.append(shard)
    built = [a["key"] for s in shards for a in s["actions"] if a["status"] == "built"]
    assert len(built) == len(set(built))  # no key executed twice, in all
    assert set(built) == {a["key"] for a in local["actions"] if a["status"] == "built"}
    upstream = {"opdef", "convert", "quantize", "outputs:int8"}
    assert upstream <= set(executed(shards[0]))  # the first shard's
    assert set(GATHER) <= set(executed(shards[2]))  # the last shard gathered
    prepares = [len([a for a in executed(s) if a.startswith("prepare:")]) for s in shards]
    assert sum(prepares) == len({a["key"] for a in local["actions"]
                                 if a["id"].startswith("prepare:")}) and min(prepares) > 0
    join = _build(tmp_path, "join", *upload)
    assert executed(join) == []  # everything came from the remote
    assert out_files(tmp_path / "join" / "out") == out_files(tmp_path / "local" / "out")


@pytest.mark.usefixtures("clean_env")
def test_one_shard_of_one_is_the_whole_build(nginx_server: Nginx, keys: Keys,
                                             tmp_path: Path) -> None:
    upload = ("--remote", nginx_server.url, "--trusted-key", keys.public, "--signing-key",
              str(keys.writer_file))
    alone = _build(tmp_path, "alone", "--shard", "1/1", *upload)
    assert set(GATHER) <= set(executed(alone)) and alone["unpublished"] == 0
    join = _build(tmp_path, "join", *upload)
    assert executed(join) == [] and join["cached"] == len(join["actions"])


def _softplus() -> Plan:
    return plan_recipe(load_recipe(str(SOFTPLUS), Diagnostics()))


def test_the_plan_splits_into_upstream_units_and_gathering() -> None:
    plan = _softplus()
    parts = fan_out(plan)
    assert parts.gathering == GATHER
    assert set(parts.upstream) == {a for a in plan.actions if not a.startswith(
        ("prepare:", "assemble", "run:", "check:"))}
    assert set(parts.units) == {a for a in plan.actions if a.startswith("prepare:")}
    assert all(unit == (leader,) for leader, unit in parts.units.items())
    gathering = set(plan.gathering().actions)  # it needs every record, not the op packages
    assert gathering == set(plan.actions) - {a for a in plan.actions if a.startswith("package:")}


def test_a_check_goes_with_its_run() -> None:
    plan = Plan(load_recipe(str(SOFTPLUS), Diagnostics()))
    plan.add(PlannedAction("convert", "convert", {}, {}, "convert"))
    for name in "abc":
        plan.add(PlannedAction(f"run:{name}", "run", {}, {"b": Dep("convert", "bundle")}, name))
        plan.add(PlannedAction(f"check:{name}", "check", {},
                               {"m": Dep(f"run:{name}", "metrics")}, name))
    parts = fan_out(plan)
    assert parts.upstream == ("convert",) and parts.gathering == ()
    assert parts.units == {f"run:{n}": (f"run:{n}", f"check:{n}") for n in "abc"}


def _job(plan: Plan, count: int, history: dict[str, Any]) -> ShardBuild:
    return ShardBuild(None, plan, Shard(1, count), None, None, None, 0.0,  # type: ignore[arg-type]
                      history)


def _leaders(plan: Plan, keys: dict[str, str]) -> dict[str, ActionState]:
    states = {}
    for aid, key in keys.items():
        states[aid] = ActionState(plan.actions[aid], key=key, would_run=True)
    return states


def test_the_split_balances_by_the_last_build_seconds_and_keeps_equal_keys_together() -> None:
    plan = _softplus()
    parts = fan_out(plan)
    leaders = sorted(parts.units)
    keys = {aid: f"{i // 2:064x}" for i, aid in enumerate(leaders)}  # two ids per key
    seconds = {aid: 1.0 + 7.0 * (i % 5 == 0) + 0.1 * i for i, aid in enumerate(leaders)}
    history = {aid: {"kind": "prepare", "seconds": s} for aid, s in seconds.items()}
    for count in (2, 3, 5):
        split = split_units(_job(plan, count, history), parts, _leaders(plan, keys))
        assert set(split) == set(keys.values()) and set(split.values()) == set(
            range(1, count + 1))
        loads = [0.0] * count
        for key, shard in split.items():
            loads[shard - 1] += max(seconds[a] for a, k in keys.items() if k == key)
        mean = sum(loads) / count
        assert max(abs(load - mean) for load in loads) <= 0.2 * mean, loads
        # the remote's timings (by action id) stand in for a store without history
        assert split_units(_job(plan, count, {}), parts, _leaders(plan, keys), seconds) == split


def test_without_history_the_split_is_by_kind_and_the_same_for_everyone() -> None:
    plan = _softplus()
    parts = fan_out(plan)
    keys = {aid: f"{i:064x}" for i, aid in enumerate(sorted(parts.units))}
    split = split_units(_job(plan, 3, {}), parts, _leaders(plan, keys))
    sizes = [list(split.values()).count(k) for k in (1, 2, 3)]
    assert max(sizes) - min(sizes) <= 1  # equal weights: equal counts
    # a missing action's seconds are its kind's mean in the history
    some = {sorted(parts.units)[0]: {"kind": "prepare", "seconds": 4.0}}
    assert split_units(_job(plan, 3, some), parts, _leaders(plan, keys)) == split
    assert split_units(_job(plan, 3, {}), parts, _leaders(plan, dict(reversed(
        keys.items())))) == split  # the order the leaders come in does not matter


@pytest.mark.usefixtures("clean_env")
@pytest.mark.parametrize(("value", "says"), [
    ("0/3", "'0/3': K must be from 1 to N"), ("4/3", "'4/3': K must be from 1 to N"),
    ("x/y", "'x/y' is not K/N"), ("3", "'3' is not K/N"), ("1/0", "K must be from 1 to N")])
def test_a_bad_shard_is_a_user_error(tmp_path: Path, value: str, says: str) -> None:
    code, _, err = cli("build", str(SOFTPLUS), "--store", str(tmp_path), "-n",
                       "--shard", value)
    assert code == 2 and says in err and "--shard K/N builds the K-th of N shards" in err


@pytest.mark.usefixtures("clean_env")
def test_a_shard_without_a_remote_is_refused(tmp_path: Path) -> None:
    code, _, err = cli("build", str(SOFTPLUS), "--store", str(tmp_path / "s"),
                       "--shard", "1/3")
    assert code == 2 and "no remote cache is configured" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.usefixtures("clean_env")
def test_a_shard_whose_uploads_are_refused_exits_1_with_their_count(
        nginx_server: Nginx, keys: Keys, tmp_path: Path) -> None:
    root = nginx_server.prefix / "root"
    root.mkdir(exist_ok=True)
    for space in ("ac", "cas"):  # files where the server would make folders: no PUT can land
        (root / space).write_text("")
    try:
        upload = ("--remote", nginx_server.url, "--signing-key", str(keys.writer_file),
                  "--shard", "1/2", "--json")
        code, out, err = cli("build", str(SOFTPLUS), "--store", str(tmp_path / "a"), *upload)
        summary = json.loads(out)
        built = len(executed(summary))
        assert code == 1 and summary["failed"] == 0 and built > 5
        assert summary["unpublished"] == built + 1  # and the split
        assert f"{built + 1} results of this shard could not be uploaded" in err
        assert "--remote-optional" in err
        code, out, err = cli("build", str(SOFTPLUS), "--store", str(tmp_path / "b"), *upload,
                             "--remote-optional")  # a fresh store: it builds all again
        assert code == 0 and json.loads(out)["unpublished"] == 0, err
    finally:
        for space in ("ac", "cas"):
            (root / space).unlink()


@pytest.mark.usefixtures("clean_env")
def test_a_shard_says_what_it_waited_for_in_vain(
        nginx_server: Nginx, keys: Keys, tmp_path: Path) -> None:
    (tmp_path / ".udo-build-root").write_text("")
    shutil.copytree(EXAMPLES / "softplus", tmp_path / "examples" / "softplus")
    (tmp_path / "recipes").mkdir()
    recipe = tmp_path / "recipes" / "softplus.yaml"
    recipe.write_text(SOFTPLUS.read_text())
    code, _, err = cli("build", str(recipe), "--store", str(tmp_path / "store"), "--json",
                       "--shard", "3/3", "--shard-wait", "0", "--remote", nginx_server.url,
                       "--trusted-key", keys.public, "--signing-key", str(keys.writer_file))
    assert code == 2  # no first shard ran: its upstream work is not there
    assert "the first shard's upstream work is not in the remote cache: convert" in err
    assert "--shard-wait" in err and not (tmp_path / "out").exists()
