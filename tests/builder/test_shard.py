"""Sharded CI (`udo-build RECIPE --shard K/N`): N runners, each with an empty store, split the
softplus recipe through one remote cache (a real nginx WebDAV server); the last shard waits for
the others' work in the remote and builds what needs several shards (assemble and the run of
the deployable bundle); the build without --shard (the join) then executes nothing and writes
the output folder a local build writes, byte for byte. Shards are disjoint, cover every
action, and do not depend on the hash seed or where the project lives."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from udo_build.builder.engine import SAME_KEY
from udo_build.builder.plan import JOIN, Dep, Plan, PlannedAction, Shard, owners, plan_recipe
from udo_build.errors import Diagnostics
from udo_build.recipe import load_recipe

from ..conftest import EXAMPLES, RECIPES, REPO
from ..store import remote_fixtures
from ..store.nginx import Nginx
from ..store.remote_fixtures import Keys, cli, executed, out_files

clean_env, keys, nginx_server = (remote_fixtures.clean_env, remote_fixtures.keys,
                                 remote_fixtures.nginx_server)  # the remote tests' fixtures

SOFTPLUS = RECIPES / "softplus.yaml"
GATHER = ["assemble", "run:smoke", "check:smoke"]  # what needs the records of every shard


def _build(tmp: Path, name: str, *extra: str) -> dict[str, Any]:
    code, out, err = cli("build", str(SOFTPLUS), "--store", str(tmp / name / "store"),
                         "--out", str(tmp / name / "out"), "-j", "2", "--json", *extra)
    assert code == 0, err
    return json.loads(out)


@pytest.mark.usefixtures("clean_env")
def test_three_shards_then_a_join_build_what_a_local_build_does(
        nginx_server: Nginx, keys: Keys, tmp_path: Path) -> None:
    local = _build(tmp_path, "local")
    remote = ("--remote", nginx_server.url, "--trusted-key", keys.public)
    upload = (*remote, "--remote-upload", "--signing-key", str(keys.writer_file))
    plan = plan_recipe(load_recipe(str(SOFTPLUS), Diagnostics()))
    owner = owners(plan, 3)
    built_keys: list[str] = []
    for k in (1, 2, 3):  # one after the other: later shards find the upstream in the remote
        shard = _build(tmp_path, f"shard{k}", "--shard", f"{k}/3", *upload)
        assert (shard["shard"], shard["out"], shard["failed"]) == (f"{k}/3", None, 0)
        assert not (tmp_path / f"shard{k}" / "out").exists()  # a shard writes no outputs
        gathered = set(plan.gathering(3).actions) if k == 3 else set()  # the last shard's
        assert {a["id"] for a in shard["actions"]} == set(plan.shard(Shard(k, 3)).actions) | \
            gathered
        assert {a for a, o in owner.items() if o == k} <= set(executed(shard)) | {
            a["id"] for a in shard["actions"] if a.get("source") == "remote"
            or a.get("reason", "").startswith(SAME_KEY)}
        built_keys += [a["key"] for a in shard["actions"] if a["status"] == "built"]
    assert len(built_keys) == len(set(built_keys))  # no work done twice
    assert set(built_keys) == {a["key"] for a in local["actions"] if a["status"] == "built"}
    assert set(GATHER) <= set(executed(shard))  # the last shard gathered
    join = _build(tmp_path, "join", *upload)
    assert executed(join) == []  # everything came from the remote
    assert out_files(tmp_path / "join" / "out") == out_files(tmp_path / "local" / "out")
    again = _build(tmp_path, "again", *remote)  # an empty store: all remote hits
    assert (again["executed"], again["cached"]) == (0, len(plan.actions))
    assert out_files(tmp_path / "again" / "out") == out_files(tmp_path / "local" / "out")


def test_shards_are_disjoint_and_cover_every_action() -> None:
    plan = plan_recipe(load_recipe(str(SOFTPLUS), Diagnostics()))
    for count in (1, 3, 7):
        owner = owners(plan, count)
        assert set(owner) == set(plan.actions) and set(owner.values()) <= {JOIN, *range(
            1, count + 1)}
        assert sorted(a for a, o in owner.items() if o == JOIN) == sorted(GATHER * (count > 1))
        shards = [plan.shard(Shard(k, count)).actions for k in range(1, count + 1)]
        for k, actions in enumerate(shards, 1):  # its own, and only what they need besides
            assert all(owner[a] == k or plan.actions[a].kind not in ("prepare", "run")
                       for a in actions)
        prepares = [a for a in plan.actions if a.startswith("prepare:")]
        assert sorted(a for s in shards for a in s if a.startswith("prepare:")) \
            == sorted(prepares)
    assert list(plan.shard(Shard(1, 1)).actions) == list(plan.actions)  # one shard: all
    sizes = [sum(1 for o in owners(plan, 3).values() if o == k) for k in (1, 2, 3)]
    assert sum(sizes) == len(plan.actions) - len(GATHER) and min(sizes) >= 5


def test_a_check_goes_with_its_run_and_upstream_is_shared() -> None:
    recipe = load_recipe(str(SOFTPLUS), Diagnostics())
    plan = Plan(recipe)
    plan.add(PlannedAction("convert", "convert", {}, {}, "convert"))
    for name in "abcdefgh":
        plan.add(PlannedAction(f"run:{name}", "run", {}, {"b": Dep("convert", "bundle")}, name))
        plan.add(PlannedAction(f"check:{name}", "check", {},
                               {"m": Dep(f"run:{name}", "metrics")}, name))
    owner = owners(plan, 3)
    assert all(owner[f"check:{n}"] == owner[f"run:{n}"] != JOIN for n in "abcdefgh")
    assert len({owner[f"run:{n}"] for n in "abcdefgh"}) == 3
    for k in (1, 2, 3):  # every shard needs the conversion: each looks it up or builds it
        assert "convert" in plan.shard(Shard(k, 3)).actions
    only = plan.select(["run:a", "check:b"]).shard(Shard(owner["run:a"], 3)).actions
    assert "run:a" in only and "run:b" not in only


def _copy(root: Path) -> Path:
    (root / "recipes").mkdir(parents=True)
    (root / ".udo-build-root").write_text("")
    shutil.copy(SOFTPLUS, root / "recipes" / "softplus.yaml")
    shutil.copytree(EXAMPLES / "softplus", root / "examples" / "softplus",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return root


def test_the_shard_of_an_action_depends_on_its_id_only(tmp_path: Path) -> None:
    found = []
    for folder, seed in (("a", "1"), ("b" * 30 + "/deeper/project", "4242")):
        root = _copy(tmp_path / folder)
        env = {k: v for k, v in os.environ.items() if k in ("PATH", "TMPDIR")}
        env.update(PYTHONPATH=str(REPO), PYTHONHASHSEED=seed, HOME=str(tmp_path / "home"),
                   XDG_CONFIG_HOME=str(tmp_path / "home"))
        done = subprocess.run(
            [sys.executable, "-m", "udo_build", "build", "recipes/softplus.yaml", "-n",
             "--shard", "2/3", "--store", "store", "--no-remote", "--json"],
            cwd=root, env=env, capture_output=True, text=True, check=False)
        assert done.returncode == 0, done.stderr
        found.append([a["id"] for a in json.loads(done.stdout)["actions"]])
    assert found[0] == found[1] and 0 < len(found[0]) < 41
    # sha256 of the id, as every machine computes it: pinned, so a change is deliberate
    assert "prepare:sm8550/O3/input=4x3x32x32/tensors=logits/int8" in found[0]
    assert "prepare:sm8550/O2/input=4x3x32x32/tensors=logits/int8" not in found[0]


@pytest.mark.usefixtures("clean_env")
@pytest.mark.parametrize(("value", "says"), [
    ("0/3", "'0/3': K must be from 1 to N"), ("4/3", "'4/3': K must be from 1 to N"),
    ("x/y", "'x/y' is not K/N"), ("3", "'3' is not K/N"), ("1/0", "K must be from 1 to N")])
def test_a_bad_shard_is_a_user_error(tmp_path: Path, value: str, says: str) -> None:
    code, _, err = cli("build", str(SOFTPLUS), "--store", str(tmp_path), "-n",
                       "--shard", value)
    assert code == 2 and says in err and "--shard K/N builds the K-th of N shards" in err


@pytest.mark.usefixtures("clean_env")
def test_a_shard_that_could_not_upload_is_refused(tmp_path: Path) -> None:
    code, _, err = cli("build", str(SOFTPLUS), "--store", str(tmp_path / "s"),
                       "--shard", "1/3")
    assert code == 2 and "no remote cache is configured" in err
    assert not (tmp_path / "out").exists()


@pytest.mark.usefixtures("clean_env")
def test_the_last_shard_says_what_it_waited_for_in_vain(
        nginx_server: Nginx, keys: Keys, tmp_path: Path) -> None:
    (tmp_path / ".udo-build-root").write_text("")
    shutil.copytree(EXAMPLES / "softplus", tmp_path / "examples" / "softplus")
    (tmp_path / "recipes").mkdir()
    recipe = tmp_path / "recipes" / "softplus.yaml"  # other records: no shard has built them
    recipe.write_text(SOFTPLUS.read_text().replace("quantizer: enhanced", "quantizer: tf"))
    code, _, err = cli("build", str(recipe), "--store", str(tmp_path / "store"), "--json",
                       "--shard", "3/3", "--shard-wait", "0", "--remote", nginx_server.url,
                       "--trusted-key", keys.public, "--signing-key", str(keys.writer_file))
    assert code == 2
    assert "the other shards' work is not in the remote cache: prepare:" in err
    assert "--shard-wait" in err
