"""A no-op build is recorded and replayed (builder/uptodate.py): the replay tells the recorded
report without running the build, and anything the record relies on that changes (an input, an
output file, a blob, the recipe, an option, the environment, the action kinds) makes the build
run in full again, which then does what it must (runs, mends, heals)."""

from __future__ import annotations

import io
import json
import os
import re
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from udo_build.builder import actions, session, uptodate
from udo_build.cli import main
from udo_build.errors import Problem
from udo_build.store import filecache

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "softplus" / "ops"
RECIPE = """recipe: 1
name: tiny
package:
  name: TinyPackage
  ops:
    - config: ops/softplus.xml
      kernels: ops/kernels.py
  backends: [CPU]
"""


class Tiny:
    """A project of two real actions (opdef, package:CPU), built through the CLI."""

    def __init__(self, root: Path) -> None:
        self.root = root
        (root / "ops").mkdir()
        for name in ("softplus.xml", "kernels.py"):
            shutil.copyfile(EXAMPLES / name, root / "ops" / name)
        (root / ".udo-build-root").write_text("")
        self.recipe = root / "recipe.yaml"
        self.recipe.write_text(RECIPE)
        self.store = root / "store"
        self.out = root / "out"
        self.full = 0  # builds that ran in full

    def build(self, *extra: str) -> dict[str, Any]:
        return json.loads(self.told("--json", *extra)[0])

    def told(self, *extra: str) -> tuple[str, str]:
        """(stdout, stderr) of a build."""
        out, err = io.StringIO(), io.StringIO()
        code = main([str(self.recipe), "--store", str(self.store), "--out", str(self.out),
                     *extra], stdout=out, stderr=err, env={})
        assert code == 0, err.getvalue()
        return out.getvalue(), err.getvalue()

    def records(self) -> list[Path]:
        return sorted((self.store / uptodate.FOLDER).glob("*.json"))


@pytest.fixture
def tiny(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Tiny]:
    monkeypatch.setattr(filecache, "RACY_SECONDS", 0.0)  # no waiting for the racy window
    monkeypatch.setattr(uptodate, "RACY_NS", 0)
    monkeypatch.setattr(actions, "pristine", lambda: True)  # other tests changed the kinds
    monkeypatch.chdir(tmp_path)
    project = Tiny(tmp_path)
    real = session.run_build

    def counted(*args: Any, **kwargs: Any) -> Any:
        project.full += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(session, "run_build", counted)
    yield project


def _without_times(summary: dict[str, Any]) -> dict[str, Any]:
    return {**summary, "seconds": None}


def test_a_noop_is_recorded_then_replayed(tiny: Tiny) -> None:
    assert tiny.build()["executed"] == 2
    assert tiny.records() == []  # it ran actions: not a no-op
    noop = tiny.build()
    assert (noop["executed"], noop["cached"], tiny.full) == (0, 2, 2)
    assert len(tiny.records()) == 1
    stats = json.loads((tiny.store / "stats.json").read_bytes())["counters"]
    replayed = tiny.build()
    assert tiny.full == 2  # told from the record
    assert _without_times(replayed) == _without_times(noop)
    after = json.loads((tiny.store / "stats.json").read_bytes())["counters"]
    assert (after["builds"], after["local_hits"]) == (stats["builds"] + 1,
                                                      stats["local_hits"] + 2)


def _edit_recipe(t: Tiny) -> None:
    t.recipe.write_text(RECIPE.replace("TinyPackage", "OtherPackage"))


def _edit_named(t: Tiny) -> None:
    kernels = t.root / "ops" / "kernels.py"  # named by the recipe, read by no action here
    kernels.write_text(kernels.read_text() + "\nEXTRA = 1\n")


def _touch_recipe(t: Tiny) -> None:
    os.utime(t.recipe)  # the same bytes: its ctime changes all the same


def _delete_output(t: Tiny) -> None:
    next(p for p in (t.out / "packages").rglob("*") if p.is_file()).unlink()


def _delete_blobs(t: Tiny) -> None:
    for blob in (t.store / "cas").rglob("*"):
        if blob.is_file():
            blob.chmod(0o644)
            blob.unlink()


def _delete_entry(t: Tiny) -> None:
    next((t.store / "ac").rglob("*.json")).unlink()


def _add_config(t: Tiny) -> None:
    (t.root / "udo-build.toml").write_text("[remote]\n")


def _add_folder_in_output(t: Tiny) -> None:
    (t.out / "packages" / "new").mkdir()


CHANGES: dict[str, Callable[[Tiny], None]] = {
    "the recipe's bytes": _edit_recipe, "the recipe's times": _touch_recipe,
    "a file the recipe names": _edit_named,
    "an output file deleted": _delete_output, "the store's blobs deleted": _delete_blobs,
    "an action-cache entry deleted": _delete_entry, "a config file added": _add_config,
    "an entry added to the output folder": _add_folder_in_output,
}


@pytest.mark.parametrize("change", CHANGES)
def test_a_change_builds_in_full(tiny: Tiny, change: str) -> None:
    tiny.build()
    good = {p.relative_to(tiny.out): p.read_bytes() for p in tiny.out.rglob("*")
            if p.is_file() and not p.name.startswith(".udo-build")}
    tiny.build()
    assert tiny.records()
    CHANGES[change](tiny)
    summary = tiny.build()
    assert tiny.full == 3, f"{change}: replayed"
    if change == "the recipe's bytes":
        assert summary["executed"] == 2  # other op definitions, another package
        return
    if change in ("the store's blobs deleted", "an action-cache entry deleted"):
        assert summary["executed"] >= 1  # made again in this build
    now = {p.relative_to(tiny.out): p.read_bytes() for p in tiny.out.rglob("*")
           if p.is_file() and not p.name.startswith(".udo-build")}
    assert now == good  # mended


def test_another_command_or_environment_is_not_replayed(
        tiny: Tiny, monkeypatch: pytest.MonkeyPatch) -> None:
    tiny.build()
    tiny.build()
    tiny.build()
    assert tiny.full == 2
    tiny.build("-j", "1")
    assert tiny.full == 3  # another command: its own record
    monkeypatch.setenv("UDO_BUILD_SOMETHING", "1")
    tiny.build()
    assert tiny.full == 4


def test_words_not_plain_are_replayed_once_parsed(tiny: Tiny) -> None:
    """`--sto` is argparse's `--store`: main looks the record up after parsing such words."""
    words = [str(tiny.recipe), "--sto", str(tiny.store), "--out", str(tiny.out), "--js"]
    tiny.build()
    told = []
    for _ in range(3):
        out = io.StringIO()
        assert main(words, stdout=out, stderr=io.StringIO(), env={}) == 0
        told.append(_without_times(json.loads(out.getvalue())))
    assert tiny.full == 2  # the first no-op of these words in full, then replayed
    assert told[0] == told[1] == told[2] and told[0]["executed"] == 0


def test_json_debug_and_the_build_command_s_name_share_one_record(tiny: Tiny) -> None:
    """They change only how a build is told: each spelling replays the one record (a full
    no-op of another record would write the report page again, changing this one's)."""
    tiny.build()
    noop = tiny.build()
    assert tiny.full == 2
    assert "tiny: 0 built, 2 cached, 0 failed, 0 skipped" in tiny.told()[0]  # no --json
    assert _without_times(tiny.build("--debug")) == _without_times(noop)
    out = io.StringIO()
    assert main(["build", "--json", str(tiny.recipe), "--store", str(tiny.store), "--out",
                 str(tiny.out)], stdout=out, stderr=io.StringIO(), env={}) == 0
    assert _without_times(json.loads(out.getvalue())) == _without_times(noop)
    assert tiny.full == 2 and len(tiny.records()) == 1


def test_changed_action_kinds_are_not_replayed(tiny: Tiny,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    tiny.build()
    tiny.build()
    monkeypatch.setattr(actions, "pristine", lambda: False)  # a test's kinds, say
    tiny.build()
    assert tiny.full == 3
    assert len(tiny.records()) == 1  # nor recorded


def test_nothing_is_recorded_within_the_racy_window(tiny: Tiny,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(uptodate, "RACY_NS", 3600 * 10**9)  # every file is recent
    tiny.build()
    tiny.build()
    assert tiny.records() == []


def test_a_changed_plugin_file_is_not_replayed(tiny: Tiny,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    plugin = tiny.root / "plugin.py"  # a plugin loaded from a file is not in sys.modules
    plugin.write_text("# kinds\n")
    monkeypatch.setattr(actions, "_plugin_files", [str(plugin)])
    tiny.build()
    tiny.build()
    tiny.build()
    assert tiny.full == 2
    plugin.write_text("# other kinds\n")
    tiny.build()
    assert tiny.full == 3


def test_the_summary_on_a_terminal_is_the_full_no_ops(tiny: Tiny) -> None:
    tiny.build()
    full = tiny.told()[0]
    replayed = tiny.told()[0]
    assert tiny.full == 2

    def untimed(text: str) -> str:
        return re.sub(r" in [0-9.]+ s", " in T s", text)

    assert untimed(replayed) == untimed(full) and "2 cached" in full


def test_warnings_of_the_recipe_and_op_definitions_are_told_again(
        tiny: Tiny, monkeypatch: pytest.MonkeyPatch) -> None:
    def tell(store: Any, members: Any, states: Any, events: Any, strict: bool) -> None:
        events.warning(Problem("an op definition warns", file="ops/softplus.xml"))

    monkeypatch.setattr(session, "_tell_overrides", tell)
    tiny.build()
    tiny.told()
    err = tiny.told()[1]
    assert tiny.full == 2 and "an op definition warns" in err


def test_a_build_that_told_another_warning_is_not_recorded(
        tiny: Tiny, monkeypatch: pytest.MonkeyPatch) -> None:
    def healed(states: Any, events: Any) -> None:
        events.warning(Problem("something was mended"))

    monkeypatch.setattr(session, "_tell_healed", healed)
    tiny.build()
    tiny.build()
    assert tiny.records() == []


@pytest.mark.parametrize("damage", ['{"schema": 1}', "[1, 2", '{"report": {"actions": [[1]]}}'])
def test_a_damaged_record_builds_in_full(tiny: Tiny, damage: str) -> None:
    tiny.build()
    noop = tiny.build()
    (record,) = tiny.records()
    doc = json.loads(record.read_text())
    if damage.startswith('{"report"'):
        doc["report"]["actions"] = [[1]]  # the rest as it was
        record.write_text(json.dumps(doc))
    else:
        record.write_text(damage)
    stats = json.loads((tiny.store / "stats.json").read_bytes())["counters"]["builds"]
    assert _without_times(tiny.build()) == _without_times(noop)
    assert tiny.full == 3
    after = json.loads((tiny.store / "stats.json").read_bytes())["counters"]["builds"]
    assert after == stats + 1  # counted once
