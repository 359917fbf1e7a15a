"""`udo-build store stats | verify | gc | ls` through main(): output, --json, exit codes.

The commands say how long ago things happened ("1 min ago"): the clock is frozen at the store
tests' NOW for every test here, so the texts do not depend on when, or how slowly, they run.
"""

from __future__ import annotations

import io
import json
import os
import time
from pathlib import Path

import pytest

from udo_build.cli import main
from udo_build.store.locks import store_lock

from ..store.test_maintenance import DAY, NOW, Populated, add_entry, flip_byte, key, populate


def cli(*argv: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err, env=env if env is not None else {})
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(autouse=True)
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """time.time() is NOW for the commands (lock waits use time.monotonic, not frozen)."""
    monkeypatch.setattr(time, "time", lambda: NOW)


@pytest.fixture
def pop(tmp_path: Path) -> Populated:
    populated = populate(tmp_path)
    populated.store.close()
    return populated


def store_args(pop: Populated) -> list[str]:
    return ["--store", str(pop.store.root)]


@pytest.mark.parametrize("command", ["stats", "verify", "gc", "ls"])
def test_a_missing_store_is_a_user_error(tmp_path: Path, command: str) -> None:
    code, out, err = cli("store", command, "--store", str(tmp_path / "nowhere"))
    assert (code, out) == (2, "")
    assert err == (f"error: {tmp_path / 'nowhere'}: no udo-build store here; build a recipe "
                   "first, or pass --store DIR\n")
    assert not (tmp_path / "nowhere").exists()


def test_store_needs_a_subcommand() -> None:
    code, out, err = cli("store")
    assert (code, out) == (2, "")
    assert "the following arguments are required: SUBCOMMAND" in err


def test_stats_plain_and_json(pop: Populated) -> None:
    code, out, err = cli("store", "stats", *store_args(pop))
    assert (code, err) == (0, "")
    assert "  blobs                 5 (2 compressed): " in out
    assert "  action-cache entries  3: convert 1, opdef 1, package 1\n" in out
    assert "recipes (1)" in out and "demo  /src/demo.yaml  1 min ago   1" in out
    for argv in (("store", "stats", "--json"), ("store", "--json", "stats")):
        code, out, err = cli(*argv, *store_args(pop))
        data = json.loads(out)
        assert (code, err, data["ok"]) == (0, "", True)
        assert data["blobs"]["count"] == 5 and data["action_cache"]["entries"] == 3
        assert data["recipes"][0]["name"] == "demo"


def test_verify_clean_corrupt_repair(pop: Populated) -> None:
    assert cli("store", "verify", *store_args(pop)) == (
        0, "store verify: 5 blobs, 3 action-cache entries, 1 history checked: no problems\n", "")
    path = pop.store.cas.path_of(pop.opdef.digest)
    assert path is not None
    flip_byte(path)
    code, out, err = cli("store", "verify", *store_args(pop))
    assert code == 1
    assert err.startswith(f"error: {path}: corrupt blob: its bytes hash to ")
    assert err.rstrip().endswith(f"not to its name; used by action-cache entry "
                                 f"{key('opdef')[:12]} (opdef action), history of demo")
    assert out.endswith("checked: 1 problem (1 corrupt blob)\n")
    code, out, err = cli("store", "verify", "--json", *store_args(pop))
    data = json.loads(out)
    assert (code, data["ok"], data["problems"]) == (1, False, 1)
    assert data["findings"][0]["kind"] == "corrupt blob"
    assert data["findings"][0]["path"] == str(path) and data["findings"][0]["repaired"] is None

    code, out, err = cli("store", "verify", "--repair", *store_args(pop))
    assert (code, err) == (0, "")
    assert out.startswith(f"repaired: {path}: corrupt blob: ")
    assert "-> moved to quarantine/; removed the action-cache entries that use it\n" in out
    assert out.endswith("1 problem (1 corrupt blob), all repaired\n")
    code, out, err = cli("store", "verify", *store_args(pop))
    assert (code, err) == (0, "")
    assert "note: " in out and "missing history outputs" in out and "no problems; 1 note" in out


def test_verify_stale_temporary_file_is_a_note(pop: Populated) -> None:
    tmp = pop.store.root / "cas" / "ab" / ".tmp-0a1b-ab.zst"
    tmp.parent.mkdir(parents=True, exist_ok=True)
    tmp.write_bytes(b"half a blob")
    os.utime(tmp, (NOW - 300, NOW - 300))
    code, out, err = cli("store", "verify", *store_args(pop))
    assert (code, err) == (0, "")
    assert out.startswith(f"note: {tmp}: stale temporary file: left 5 min ago by a write")
    code, out, _ = cli("store", "verify", "--json", *store_args(pop))
    data = json.loads(out)
    assert data["ok"] and (data["problems"], data["notes"]) == (0, 1)
    assert data["findings"][0]["failing"] is False
    assert cli("store", "verify", "--repair", *store_args(pop))[0] == 0 and not tmp.exists()


def test_verify_malformed_entry_exit_1_then_repaired(pop: Populated) -> None:
    entry = pop.store.ac.path_of(key("convert"))
    entry.write_text('{"schema": "udo-build/action-result", "vers')
    code, _, err = cli("store", "verify", *store_args(pop))
    assert code == 1
    assert err == (f"error: {entry}: malformed action-cache entry: not JSON (truncated or "
                   "overwritten)\n")
    assert cli("store", "verify", "--repair", *store_args(pop))[0] == 0
    assert not entry.exists()


def test_gc_plain_json_dry_run(pop: Populated) -> None:
    store = pop.store
    add_entry(store, "convert", {"bundle": pop.bundle}, age_days=10)
    code, out, err = cli("store", "gc", "--older-than", "5", "--dry-run", *store_args(pop))
    assert (code, err) == (0, "")
    assert out.startswith("store gc (dry run): would remove 1 action-cache entry (")
    assert "1 blob (2.9 KiB)" in out and store.ac.path_of(key("convert")).exists()
    code, out, err = cli("store", "gc", "--older-than", "5", "--json", *store_args(pop))
    data = json.loads(out)
    assert (code, err, data["ok"], data["dry_run"]) == (0, "", True, False)
    assert data["removed"]["blobs"] == {"count": 1, "bytes": 3000}
    assert data["kept"]["entries"] == 2 and data["kept"]["referenced_entries"] == 1
    assert not store.ac.path_of(key("convert")).exists()
    code, out, err = cli("store", "gc", *store_args(pop))
    assert (code, err) == (0, "")
    assert out.startswith("store gc: nothing to remove\n  kept 4 blobs (")
    assert out.endswith(" and 2 action-cache entries (1 used by the last build of a recipe)\n")


def test_gc_max_size_and_its_errors(pop: Populated) -> None:
    code, out, err = cli("store", "gc", "--max-size", "10 bytes", *store_args(pop))
    assert code == 0 and "removed 2 action-cache entries" in out
    assert "warning: the blobs kept take " in err and "over --max-size 10 B" in err
    assert "add --include-referenced" in err
    code, _, err = cli("store", "gc", "--max-size", "lots", *store_args(pop))
    assert code == 2 and "not a size: 'lots'" in err
    code, _, err = cli("store", "gc", "--older-than", "-1", *store_args(pop))
    assert code == 2 and "must be 0 or more days" in err


def test_gc_while_a_build_runs(pop: Populated) -> None:
    with store_lock(pop.store.root, exclusive=False):
        code, out, err = cli("store", "gc", "--wait", "0.1", *store_args(pop))
        assert code == 2 and out == ""
        assert err.startswith(f"error: {pop.store.root}: a build is running on this store; "
                              "waited 0.1 s")
        code, out, _ = cli("store", "gc", "--wait", "0.1", "--json", *store_args(pop))
        assert code == 2 and json.loads(out)["ok"] is False
        assert cli("store", "verify", "--repair", "--wait", "0.1", *store_args(pop))[0] == 2


def test_ls_plain_rich_json_and_kind(pop: Populated) -> None:
    add_entry(pop.store, "convert", {"bundle": pop.bundle}, age_days=2)
    code, out, err = cli("store", "ls", *store_args(pop))
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[0] == "action cache (3 entries)"
    assert lines[1].split() == ["key", "kind", "description", "outputs", "last", "used",
                                "referenced"]
    assert lines[-1].split() == [key("convert")[:12], "convert", "convert", "action",
                                 "bundle", "2.9", "KiB", "2", "d", "ago", "no"]
    assert any(line.split()[1:2] == ["opdef"] and line.endswith("yes") for line in lines)
    code, out, _ = cli("store", "ls", *store_args(pop), env={"FORCE_COLOR": "1"})
    assert code == 0 and key("convert")[:12] in out and ("━" in out or "─" in out)
    code, out, _ = cli("store", "ls", "--json", "--kind", "package", *store_args(pop))
    data = json.loads(out)
    assert code == 0 and [e["kind"] for e in data["entries"]] == ["package"]
    assert data["entries"][0]["outputs"]["package"]["type"] == "tree"
    assert data["entries"][0]["last_used"] > NOW - DAY
    code, out, _ = cli("store", "ls", "--kind", "prepare", *store_args(pop))
    assert (code, out) == (0, "no action-cache entries of kind prepare; kinds here: convert, "
                              "opdef, package\n")
