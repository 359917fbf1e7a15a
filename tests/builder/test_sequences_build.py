"""Calibration over token sequences (`quantize.sequences`, kinds/sequences.py) through the CLI
on the tiny Llama of recipes/llm_tiny.yaml (tests/builder/test_generate.py's project, run
`gen` only): the feeds are an action of their own, quantize reads them as an input list, the
generation agrees with the float model better than after calibrating on an input list of
stand-in caches, a change of the sequences re-runs calibration and what follows only, and
mistakes are errors at their field."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import yaml

from udo_build.builder.plan import Dep, plan_recipe
from udo_build.cli import main
from udo_build.recipe import load_recipe

from .test_generate import RECIPE, build, project

CACHE = {"past": "past_{kind}_{layer}", "present": "present_{kind}_{layer}"}


def with_sequences(root: Path, lengths: tuple[int, ...] = (30, 200, 250), seed: int = 5
                   ) -> Path:
    """The project's recipe calibrated over random token sequences of these lengths."""
    rng = np.random.default_rng(seed)
    (root / "recipes" / "sequences.txt").write_text("# calibration\n" + "".join(
        " ".join(map(str, rng.integers(0, 512, n))) + "\n" for n in lengths))
    data = yaml.safe_load((root / RECIPE).read_text())
    q = {k: v for k, v in data["quantize"].items() if k not in ("input_list", "sequences")}
    data["quantize"] = {"sequences": "sequences.txt", "cache": CACHE, **q}
    data["run"] = [r for r in data["run"] if r["name"] == "gen"]
    (root / RECIPE).write_text(yaml.safe_dump(data, sort_keys=False))
    return root


def gen(root: Path) -> dict[str, Any]:
    return json.loads((root / "out" / "runs" / "gen" / "report.json").read_text())["metrics"]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, Any]]:
    base = tmp_path_factory.mktemp("sequences")
    root = with_sequences(project(base / "project"))
    summary, _ = build(root, base / "store")
    return root, base / "store", summary


def test_the_feeds_are_an_action_and_calibrate_quantize(
        built: tuple[Path, Path, dict[str, Any]]) -> None:
    root, _, summary = built
    actions = {a["id"]: a for a in summary["actions"]}
    feeds = actions["sequence-feeds"]
    assert feeds["status"] == "built"  # 30 tokens: 1 step of 128; 200 and 250: 2 each
    assert "5 calibration inputs from 3 token sequences" in feeds["description"]
    plan = plan_recipe(load_recipe(root / RECIPE))
    assert plan.actions["quantize"].inputs["feeds"] == Dep("sequence-feeds", "feeds")
    assert "input_list" not in plan.actions["quantize"].inputs
    assert plan.actions["quantize"].label.endswith("over 3 token sequences")


def test_the_models_own_caches_calibrate_better_than_stand_ins(
        built: tuple[Path, Path, dict[str, Any]], tmp_path: Path) -> None:
    """An input list of the example (calib_ar128) holds random stand-ins for the past keys and
    values; the sequences give the model's own (22.3 dB and 90% of the tokens, against 33.0 dB
    and all of them, when written)."""
    root, _, _ = built
    listed = project(tmp_path / "listed")
    data = yaml.safe_load((listed / RECIPE).read_text())
    q = {k: v for k, v in data["quantize"].items() if k not in ("sequences", "cache")}
    data["quantize"] = {"input_list": "../examples/llama/data/calib_ar128.txt", **q}
    data["run"] = [{k: v for k, v in r.items() if k != "check"}  # it misses the recipe's
                   for r in data["run"] if r["name"] == "gen"]
    (listed / RECIPE).write_text(yaml.safe_dump(data, sort_keys=False))
    build(listed, tmp_path / "store")
    ours, theirs = gen(root), gen(listed)
    assert ours["sqnr_db"] >= theirs["sqnr_db"] + 6.0, (ours["sqnr_db"], theirs["sqnr_db"])
    assert ours["top1_agreement"] >= theirs["top1_agreement"]


def test_changing_the_sequences_reruns_calibration_and_what_follows_only(
        built: tuple[Path, Path, dict[str, Any]], tmp_path: Path) -> None:
    root, store, _ = built
    copy = project(tmp_path / "copy")
    with_sequences(copy, lengths=(30, 200, 250), seed=6)
    summary, _ = build(copy, store)
    status = {a["id"]: a["status"] for a in summary["actions"]}
    assert status["sequence-feeds"] == status["quantize"] == "built"
    assert status["convert"] == status["opdef"] == "cached"
    again, _ = build(copy, store)
    assert {a["status"] for a in again["actions"]} == {"cached"}


@pytest.mark.parametrize(("change", "field", "message"), [
    (lambda q: q.update(input_list="x.txt"), "quantize.sequences", "both input_list and"),
    (lambda q: q.pop("sequences"), "quantize.cache", "there are none"),
    (lambda q: q.pop("cache") and q.pop("sequences"), "quantize", "'input_list'"),
])
def test_mistakes_about_the_calibration_are_errors_at_their_field(
        tmp_path: Path, change: Any, field: str, message: str) -> None:
    root = with_sequences(project(tmp_path / "p"))
    data = yaml.safe_load((root / RECIPE).read_text())
    change(data["quantize"])
    (root / RECIPE).write_text(yaml.safe_dump(data, sort_keys=False))
    stderr = io.StringIO()
    code = main(["validate", str(root / RECIPE)], stdout=io.StringIO(), stderr=stderr, env={})
    assert code == 2, stderr.getvalue()
    assert field in stderr.getvalue() and message in stderr.getvalue()


def test_a_bad_token_id_fails_the_feeds_at_its_line(tmp_path: Path) -> None:
    root = with_sequences(project(tmp_path / "p"))
    path = root / "recipes" / "sequences.txt"
    path.write_text(path.read_text() + "1 2 99999\n")
    _, stderr = build(root, tmp_path / "store", code=2)
    assert "sequences.txt:5:5" in stderr and "'99999' is not a token id" in stderr


def _standalone(root: Path, store: Path, out: Path, *extra: str) -> tuple[int, str, str]:
    """`udo-build quantize` on the recipe's float bundle with its settings and kernels."""
    stdout, stderr = io.StringIO(), io.StringIO()
    code = main(["quantize", str(root / "out" / "model" / "llama_tiny.udb"),
                 "--act-bitwidth", "16", "--weights-bitwidth", "8", "--per-channel",
                 "--kernels", str(root / "examples" / "decoder" / "ops" / "kernels.py"),
                 "--kernels", str(root / "examples" / "encoder" / "ops" / "kernels.py"),
                 "--store", str(store), "--out", str(out), "--json", *extra],
                stdout=stdout, stderr=stderr, env={})
    return code, stdout.getvalue(), stderr.getvalue()


def test_the_standalone_quantize_calibrates_over_sequences_with_the_recipes_key(
        built: tuple[Path, Path, dict[str, Any]], tmp_path: Path) -> None:
    """`udo-build quantize --sequences FILE --cache ...` plans the recipe's sequence-feeds and
    quantize actions: the same keys, so both are cached and the bytes are the recipe's."""
    root, store, _ = built
    sequences = str(root / "recipes" / "sequences.txt")
    cache = [f"--cache={k}={v}" for k, v in CACHE.items()]
    before = set((store / "ac").rglob("*"))
    code, out, err = _standalone(root, store, tmp_path / "q.udb", "--sequences", sequences,
                                 *cache)
    assert code == 0, err
    report = json.loads(out)
    # the recipe's result: its 3 sequences' 5 steps
    assert report["status"] == "cached" and "over 5 inputs" in report["description"], report
    new = [json.loads(p.read_text())["kind"] for p in set((store / "ac").rglob("*")) - before
           if p.is_file()]
    assert new == ["bundle-file"]  # the feeds too were the recipe's: not made again
    published = root / "out" / "model" / "llama_tiny_quantized.udb"
    assert (tmp_path / "q.udb").read_bytes() == published.read_bytes()
    assert (tmp_path / "q.encodings.json").read_bytes() == \
        published.with_name("llama_tiny_quantized.encodings.json").read_bytes()


@pytest.mark.parametrize(("extra", "message"), [
    (["--cache", "past=p_{kind}_{layer}"], "--cache: --cache names the cache of token"),
    (["--sequences", "S", "--cache", "pats=x"], "--cache: --cache 'pats=x' is not NAME=VALUE"),
    (["--sequences", "S", "--cache", "masked=-1e4", "--cache", "masked=-9"],
     "--cache names masked twice"),
    (["--sequences", "S", "--cache", "masked=low"], "masked is a number"),
    (["--sequences", "missing.txt"], "--sequences: no such file"),
])
def test_the_standalone_sequences_mistakes_are_errors_at_their_option(
        built: tuple[Path, Path, dict[str, Any]], tmp_path: Path, extra: list[str],
        message: str) -> None:
    root, _, _ = built
    extra = [str(root / "recipes" / "sequences.txt") if e == "S" else
             str(tmp_path / e) if e == "missing.txt" else e for e in extra]
    if "--sequences" not in extra:
        extra = ["--input-list", str(root / "recipes" / "sequences.txt"), *extra]
    code, _, err = _standalone(root, tmp_path / "store", tmp_path / "q.udb", *extra)
    assert code == 2 and message in err, err
    assert not list(tmp_path.glob("q.*"))
