"""`udo-build key generate | public`, `udo-build cache push | pull`, the remote settings (options,
environment, config files) and the cache counters of `store stats`, through main() against a
real nginx WebDAV server."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest

from udo_build.store.remote.trust import load_signing_key, parse_public_key

from ..builder.fakes import fake_kinds
from ..builder.test_engine import Project
from ..store.nginx import Nginx
from ..store.remote_fixtures import Keys, build, chain_key, cli, entry_files

pytestmark = pytest.mark.usefixtures("clean_env")


def test_key_generate_writes_a_private_key_only_its_owner_reads(tmp_path: Path) -> None:
    path = tmp_path / "keys" / "ci.key"
    code, out, err = cli("key", "generate", "--name", "ci-1", "--out", str(path))
    assert code == 0 and out.count("\n") == 1 and out.startswith("ci-1:")
    assert "keep it secret" in err and "trusted_keys" in err
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    public = parse_public_key(out.strip())
    assert load_signing_key(path).public() == public
    assert cli("key", "public", str(path)) == (0, out, "")
    code, _, err = cli("key", "generate", "--out", str(path))
    assert code == 2 and "already there; it is kept" in err and "--force" in err
    code, again, _ = cli("key", "generate", "--out", str(path), "--force", "--json")
    doc = json.loads(again)
    assert code == 0 and doc["public_key"] != out.strip() and doc["name"].startswith("udo-build-")
    assert load_signing_key(path).public().line == doc["public_key"]


def test_key_generate_defaults_to_the_user_config_folder(tmp_path: Path) -> None:
    code, out, _ = cli("key", "generate", "--name", "me")
    assert code == 0
    assert load_signing_key(tmp_path / "xdg-config/udo-build/signing-key").public().line \
        == out.strip()
    code, _, err = cli("key", "generate", "--name", "not:a name")
    assert code == 2 and "--name" in err
    (tmp_path / "bad.key").write_text("me:bm90IGEga2V5\n")
    code, _, err = cli("key", "public", str(tmp_path / "bad.key"))
    assert code == 2 and "has 9 bytes, not 32 or 64" in err


def _push(project: Project, server: Nginx, keys: Keys, *extra: str) -> tuple[int, dict, str]:
    code, out, err = cli("cache", "push", str(project.recipe), "--store", str(project.store),
                         "--remote", server.url, "--signing-key", str(keys.writer_file),
                         "--json", *extra)
    return code, json.loads(out), err


def _pull(project: Project, server: Nginx, keys: Keys, *extra: str) -> tuple[int, dict, str]:
    code, out, err = cli("cache", "pull", str(project.recipe), "--store", str(project.store),
                         "--remote", server.url, "--trusted-key", keys.public, "--json", *extra)
    return code, json.loads(out), err


def test_push_then_pull_moves_a_recipes_artifacts(nginx_server: Nginx, keys: Keys,
                                                  tmp_path: Path) -> None:
    with fake_kinds() as calls:
        source = Project(tmp_path / "a")
        built, _ = build(source)  # no remote: a local build
        code, pushed, err = _push(source, nginx_server, keys)
        assert (code, err, pushed["ok"], pushed["counts"]) == (0, "", True, {"pushed": 9})
        assert set(entry_files(nginx_server)) == {a["key"] for a in built["actions"]} | {
            chain_key(source, a["id"]) for a in built["actions"]}  # and index entries
        other = Project(tmp_path / "b")
        code, pulled, err = _pull(other, nginx_server, keys)
        assert (code, err, pulled["counts"]) == (0, "", {"pulled": 9})
        assert pulled["remote"]["bytes_downloaded"] > 0
        calls.clear()
        summary, _ = build(other)  # no remote: everything is in the local store now
        assert (summary["executed"], calls) == (0, [])
        code, again, _ = _pull(other, nginx_server, keys)
        assert (code, again["counts"]) == (0, {"local": 9})
        code, out, _ = cli("cache", "pull", str(other.recipe), "--store", str(other.store),
                           "--remote", nginx_server.url, "--trusted-key", keys.public)
    assert code == 0
    assert out.startswith(f"demo: pulled 0 actions from {nginx_server.url} (0 B); 9 were "
                          "already here\n")


def test_pull_lists_what_the_remote_lacks(nginx_server: Nginx, keys: Keys,
                                          tmp_path: Path) -> None:
    with fake_kinds():
        source = Project(tmp_path / "a")
        build(source)
        code, pushed, _ = _push(source, nginx_server, keys, "convert")  # convert and opdef
        assert (code, pushed["counts"]) == (0, {"pushed": 2})
        other = Project(tmp_path / "b")
        code, pulled, _ = _pull(other, nginx_server, keys)
        rows = {r["id"]: r for r in pulled["actions"]}
        assert code == 0 and pulled["counts"] == {"pulled": 2, "missing": 7}
        assert rows["quantize"]["reason"] == "not in the remote cache"
        assert rows["assemble"]["reason"].startswith("needs prepare:")
        code, out, _ = cli("cache", "push", str(other.recipe), "--store", str(other.store),
                           "--remote", nginx_server.url, "--signing-key", str(keys.writer_file))
    assert code == 0 and out.startswith(f"demo: pushed 2 actions to {nginx_server.url}")
    assert "  missing    package:CPU: not built in this store\n" in out


def test_push_and_pull_need_a_remote_and_push_a_signing_key(
        nginx_server: Nginx, keys: Keys, tmp_path: Path) -> None:
    with fake_kinds():
        project = Project(tmp_path / "a")
        build(project)
        recipe, store = str(project.recipe), str(project.store)
        code, _, err = cli("cache", "pull", recipe, "--store", store)
        assert code == 2 and "no remote cache is configured" in err
        code, _, err = cli("cache", "push", recipe, "--store", store, "--remote",
                           nginx_server.url)
        assert code == 2 and "no signing key is set" in err
        nginx_server.kill()
        code, out, err = cli("cache", "push", recipe, "--store", store, "--remote",
                             nginx_server.url, "--signing-key", str(keys.writer_file), "--json")
    assert code == 1 and not json.loads(out)["ok"]
    assert err.count("remote cache unreachable") == 1


def test_settings_from_a_config_file_the_environment_and_ci(
        nginx_server: Nginx, keys: Keys, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with fake_kinds():
        writer = Project(tmp_path / "a")
        (writer.root / "udo-build.toml").write_text(
            f'[remote]\nurl = "{nginx_server.url}"\nsigning_key = "{keys.writer_file}"\n'
            'colour = "blue"\n')
        summary, err = build(writer)  # uploads are off by default
        assert summary["remote"] is None and "unknown setting 'colour' ignored" in err
        assert "no trusted keys" in err
        summary, _ = build(writer, "--ci", "--no-remote")
        assert summary["remote"] is None
        (writer.root / "ex/data/calib/input_03.raw").write_bytes(b"\0" * 12288)
        summary, _ = build(writer, "--ci")
        assert summary["remote"]["entries_uploaded"] == summary["executed"] == 5
        monkeypatch.setenv("UDO_BUILD_REMOTE", nginx_server.url)
        monkeypatch.setenv("UDO_BUILD_TRUSTED_KEYS", f"  {keys.public}, ")
        reader = Project(tmp_path / "b")
        (reader.root / "ex/data/calib/input_03.raw").write_bytes(b"\0" * 12288)
        summary, err = build(reader)  # what the writer built since it uploads: 5 hits
        assert (summary["remote"]["hits"], summary["executed"], err) == (5, 4, "")
        monkeypatch.setenv("UDO_BUILD_REMOTE_UPLOAD", "1")
        summary, err = build(Project(tmp_path / "c"))
        assert "uploads are on, but no signing key is set: not uploading" in err
        monkeypatch.setenv("UDO_BUILD_TRUSTED_KEYS", "ci-1:no-key!")
        code, _, err = cli("build", str(writer.recipe), "--store", str(writer.store))
        assert code == 2
        assert "error: $UDO_BUILD_TRUSTED_KEYS: the public key 'ci-1' is not valid base64" in err
        monkeypatch.delenv("UDO_BUILD_TRUSTED_KEYS")
        (writer.root / "udo-build.toml").write_text("[remote]\nretries = 99\n")
        code, _, err = cli("build", str(writer.recipe), "--store", str(writer.store))
    assert code == 2
    assert err == (f"error: {writer.root / 'udo-build.toml'}: remote.retries: must be a whole "
                   "number from 0 to 10, not 99\n")


def test_store_stats_shows_the_cache_counters(nginx_server: Nginx, keys: Keys,
                                              tmp_path: Path) -> None:
    with fake_kinds():
        project = Project(tmp_path / "a")
        code, out, _ = cli("store", "stats", "--store", str(project.store))
        assert code == 2  # no store yet
        build(project, "--remote", nginx_server.url, "--remote-upload", "--signing-key",
              str(keys.writer_file))
        build(project)
        code, out, err = cli("build", str(project.recipe), "--store", str(project.store),
                             "--out", str(project.out), "--remote", nginx_server.url,
                             "--trusted-key", keys.public)
        assert code == 0 and f"  remote cache {nginx_server.url}: 0 hits, 0 misses\n" in out
        code, out, _ = cli("store", "stats", "--store", str(project.store))
    assert code == 0
    assert "  builds counted        3 since " in out
    assert "  local cache           18 hits, 9 misses\n" in out
    assert "  remote cache          0 hits, 9 misses; 0 B downloaded in 0 blobs\n" in out
    assert "  uploaded              9 entries, " in out
    assert "  refused from remote   0\n" in out
