"""Generate runs (kinds/generate.py) on the tiny Llama of recipes/llm_tiny.yaml, built in a
temp store: run `gen` prefills the prompt through the AR-128 record and decodes through the
AR-1 record; the float model's tokens are a numpy Llama's recomputed over the whole sequence
without a cache; the record agrees with them above the recipe's bounds; a change of the token
count runs only the generation (and its check); a bad prompt file is an error at its line; the
report page shows the generation."""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
import yaml

from udo_build.builder.report_generation import section, speeds_of
from udo_build.cli import main
from udo_build.errors import UserError
from udo_build.recipe import load_recipe

from ..conftest import EXAMPLES, RECIPES
from ..runtime.test_generate import recomputed

RECIPE = "recipes/llm_tiny.yaml"
TOKENS = 10


def project(root: Path, tokens: int = TOKENS) -> Path:
    """A copy of the tiny recipe's project under `root`, the recipe cut to what run `gen`
    needs (one SoC, no other run: tests/examples/test_llama.py builds it whole) generating
    `tokens` tokens."""
    root.mkdir(parents=True, exist_ok=True)
    (root / ".udo-build-root").write_text("")
    for folder in ("llama", "decoder", "encoder"):
        shutil.copytree(EXAMPLES / folder, root / "examples" / folder,
                        ignore=shutil.ignore_patterns("__pycache__"))
    (root / "recipes").mkdir()
    data = yaml.safe_load((RECIPES / "llm_tiny.yaml").read_text())
    data["prepare"]["matrix"]["soc"] = ["sm8650"]
    data["run"] = [r for r in data["run"] if r["name"] == "gen"]
    data["run"][0]["generate"]["tokens"] = tokens
    fp16 = {**data["run"][0], "name": "gen16", "precision": "fp16"}  # no records: online
    data["run"].append({**fp16, "generate": {**fp16["generate"], "tokens": 4}})
    (root / RECIPE).write_text(yaml.safe_dump(data, sort_keys=False))
    return root


def build(root: Path, store: Path, code: int = 0) -> tuple[dict[str, Any], str]:
    stdout, stderr = io.StringIO(), io.StringIO()
    found = main(["build", str(root / RECIPE), "--store", str(store), "--out",
                  str(root / "out"), "--json"], stdout=stdout, stderr=stderr, env={})
    assert found == code, stderr.getvalue()
    return json.loads(stdout.getvalue()), stderr.getvalue()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, dict[str, Any]]:
    base = tmp_path_factory.mktemp("generate")
    root = project(base / "first")
    summary, _ = build(root, base / "store")
    return root, base / "store", summary


def report(root: Path, run: str = "gen") -> dict[str, Any]:
    return json.loads((root / "out" / "runs" / run / "report.json").read_text())


def test_the_float_generation_is_a_full_recompute_and_the_record_agrees(
        built: tuple[Path, Path, dict[str, Any]]) -> None:
    root, _, summary = built
    assert summary["failed"] == 0
    found = report(root)
    assert [(g["tokens"], g["online_prepare"]) for g in found["graphs"]] == [(128, False),
                                                                            (1, False)]
    generated = found["metrics"]["generate"]
    prompt = [int(t) for t in (root / "examples/llama/data/prompt.txt").read_text()
              .splitlines()[1].split()]
    assert generated["prompt_tokens"] == len(prompt) and generated["new_tokens"] == TOKENS
    tokens = generated["tokens"]
    for t, token in enumerate(tokens):  # no cache: the whole sequence so far, at once
        assert token == int(recomputed(prompt + tokens[:t]).argmax()), t
    metrics = found["metrics"]
    assert metrics["top1_agreement"] == generated["token_match"] >= 0.8
    assert metrics["sqnr_db"] >= 15 and metrics["decode"]["min_sqnr_db"] >= 15
    check = json.loads((root / "out" / "runs" / "gen" / "check.json").read_text())
    assert check["passed"] is True
    text = (root / "out" / "runs" / "gen" / "generated.txt").read_text()
    assert f"float: {' '.join(map(str, tokens))}\n" in text
    run = next(a for a in summary["actions"] if a["id"] == "run:gen")
    assert re.search(r"record prefill [\d.]+ tok/s, decode [\d.]+ tok/s", run["description"])


def test_the_fp16_path_generates_on_records_prepared_online_and_says_so(
        built: tuple[Path, Path, dict[str, Any]]) -> None:
    root, _, summary = built
    found = report(root, "gen16")
    assert [(g["tokens"], g["online_prepare"]) for g in found["graphs"]] == [(128, True),
                                                                            (1, True)]
    assert found["online_prepare"] is True and "AR-1: no record" in found["warning"]
    metrics = found["metrics"]
    assert metrics["top1_agreement"] == 1.0 and metrics["sqnr_db"] >= 40
    assert metrics["generate"]["tokens"] == report(root)["metrics"]["generate"]["tokens"][:4]
    run = next(a for a in summary["actions"] if a["id"] == "run:gen16")
    assert "ONLINE PREPARE" in run["description"]


def test_the_page_shows_the_generation(built: tuple[Path, Path, dict[str, Any]]) -> None:
    root, _, _ = built
    page = (root / "out.report.html").read_text()
    assert "<h2>Generation: gen</h2>" in page and "id=\"generated-gen\"" in page
    assert "record tokens/s" in page and "SQNR per decode step: gen" in page


def test_changing_the_token_count_runs_only_the_generation(
        built: tuple[Path, Path, dict[str, Any]], tmp_path: Path) -> None:
    first, store, _ = built
    root = project(tmp_path / "second", tokens=6)
    summary, _ = build(root, store)
    assert sorted(a["id"] for a in summary["actions"] if a["status"] == "built") == [
        "check:gen", "run:gen"]
    # greedy: the shorter generation is the longer one's beginning
    assert report(root)["metrics"]["generate"]["tokens"] == \
        report(first)["metrics"]["generate"]["tokens"][:6]


def test_a_bad_prompt_file_is_an_error_at_its_line(built: tuple[Path, Path, dict[str, Any]],
                                                   tmp_path: Path) -> None:
    _, store, _ = built
    root = project(tmp_path / "third")
    (root / "examples/llama/data/prompt.txt").write_text("# tokens\n12 7\n3 seven 9\n")
    summary, stderr = build(root, store, code=2)
    failed = [a for a in summary["actions"] if a["status"] == "failed"]
    assert [a["id"] for a in failed] == ["run:gen", "run:gen16"]  # both read that prompt
    problem = failed[0]["error"][0]
    assert problem["file"].endswith("prompt.txt") and (problem["line"], problem["column"]) == (3, 3)
    assert "'seven'" in problem["message"]


def test_a_generate_run_takes_no_input_list(tmp_path: Path) -> None:
    root = project(tmp_path)
    recipe = root / RECIPE
    data = yaml.safe_load(recipe.read_text())
    data["run"][0]["input_list"] = "../examples/llama/data/test_ar1.txt"
    recipe.write_text(yaml.safe_dump(data))
    with pytest.raises(UserError) as error:
        load_recipe(recipe)
    assert error.value.problems[0].field == "run[0].input_list"


def test_the_section_reads_the_speeds_the_description_says() -> None:
    speeds = speeds_of("generate g on sm8650: ...; record prefill 13.4 tok/s, decode 38.8 "
                       "tok/s; float prefill -, decode 115.2 tok/s")
    assert speeds == {"record": ("13.4", "38.8")}  # "-" has no unit: not a speed
    html = section("<g>", {"tokens": [5, 6], "record_tokens": [5, 7], "match": [True, False],
                           "token_match": 0.5, "first_mismatch": 1, "prompt_tokens": 3,
                           "prompt_steps": 1, "prefill": 4, "new_tokens": 2},
                   {"sqnr_db": [{"logits": 30.0}, {"logits": 12.5}]}, speeds, False)
    assert "&lt;g&gt;" in html and "<g>" not in html
    assert "<td>1</td><td>6</td><td><span class=\"miss\">7</span></td><td>NO</td>" \
           "<td>12.50</td>" in html
    assert "prefill 13.4, decode 38.8" in html and "step 1 (a free-running" in html


def test_validate_names_the_cache_the_model_lacks(tmp_path: Path) -> None:
    """Without generate.cache the convention is optimum's names, which this model does not
    use: `validate` says so at the run's generate section, with the model's inputs."""
    root = project(tmp_path)
    recipe = root / RECIPE
    data = yaml.safe_load(recipe.read_text())
    del data["run"][0]["generate"]["cache"]
    recipe.write_text(yaml.safe_dump(data, sort_keys=False))
    stdout, stderr = io.StringIO(), io.StringIO()
    assert main(["validate", str(recipe)], stdout=stdout, stderr=stderr, env={}) == 2
    assert re.search(r"llm_tiny.yaml:\d+:\d+: run\[0\].generate: the model has no cache input "
                     r"'past_key_values.0.key'", stderr.getvalue()), stderr.getvalue()
    assert "past_key_0" in stderr.getvalue()
