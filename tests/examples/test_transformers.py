"""The transformer examples end to end: the encoder block (fused RMSNorm UDO) and the decoder
block with a KV cache (RoPE and RMSNorm UDOs) build from their ready recipes in a temp store
(packages, convert, quantize at 16-bit activations, prepare for two SoCs, runs checked against
the float model); the emulator's float model agrees with onnxruntime running the same block
with the custom ops decomposed into standard ops; 16-bit activations beat 8-bit; the generators
write the committed files."""

from __future__ import annotations

import importlib.util
import io
import json
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

from udo_build.cli import main
from udo_build.ir.bundle import load_bundle
from udo_build.kernels.load import packages_for
from udo_build.model.input_list import feeds, parse_input_list
from udo_build.runtime.float_session import Session

from ..conftest import EXAMPLES, RECIPES
from .test_generators import digests

ort = pytest.importorskip("onnxruntime")


@dataclass(frozen=True)
class Example:
    recipe: str
    folder: str  # examples/<folder>
    model: str  # the converted bundle's stem in out/model/
    kernels: tuple[str, ...]  # relative to examples/
    test_list: str  # relative to examples/<folder>/data
    records: int  # distinct cache records the matrix prepares
    runs: tuple[str, ...]


ENCODER = Example("encoder.yaml", "encoder", "encoder", ("encoder/ops/kernels.py",),
                  "test.txt", 4, ("smoke", "tokens32"))
DECODER = Example("decoder.yaml", "decoder", "decoder",
                  ("decoder/ops/kernels.py", "encoder/ops/kernels.py"), "test.txt", 4,
                  ("step", "token"))


class Project:
    """recipes/ and both examples/ folders copied into a temp project with its own store."""

    def __init__(self, root: Path) -> None:
        (root / ".udo-build-root").write_text("")
        for folder in ("encoder", "decoder"):
            shutil.copytree(EXAMPLES / folder, root / "examples" / folder)
        shutil.copytree(RECIPES, root / "recipes")
        self.root = root

    def build(self, recipe: str, out: str) -> dict[str, Any]:
        stdout, stderr = io.StringIO(), io.StringIO()
        code = main(["build", str(self.root / "recipes" / recipe), "--store",
                     str(self.root / "store"), "--out", str(self.root / out), "--json"],
                    stdout=stdout, stderr=stderr, env={})
        assert code == 0, stderr.getvalue()
        return json.loads(stdout.getvalue())

    def sqnr(self, out: str, run: str) -> float:
        report = json.loads((self.root / out / "runs" / run / "check.json").read_text())
        assert report["passed"] is True, report
        return report["metrics"]["sqnr_db"]


@pytest.fixture(scope="module")
def project(tmp_path_factory: pytest.TempPathFactory) -> Project:
    return Project(tmp_path_factory.mktemp("transformers"))


def generator(example: Example) -> ModuleType:
    path = EXAMPLES / example.folder / "make_example.py"
    spec = importlib.util.spec_from_file_location(f"udo_example_{example.folder}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("example", [ENCODER, DECODER], ids=["encoder", "decoder"])
def test_the_recipe_builds_prepares_two_socs_and_passes_its_checks_at_16_bits(
        project: Project, example: Example) -> None:
    summary = project.build(example.recipe, example.folder)
    assert summary["failed"] == 0 and summary["skipped"] == 0
    ids = {a["id"] for a in summary["actions"]}
    assert {"package:CPU", "package:HTP", "convert", "quantize", "assemble"} <= ids
    prepared = [a for a in summary["actions"] if a["id"].startswith("prepare:")]
    assert {a["id"].split(":")[1].split("/")[0] for a in prepared} == {"sm8550", "sm8650"}
    assert len(prepared) == example.records and all(a["id"].endswith("/int8") for a in prepared)
    for run in example.runs:
        assert project.sqnr(example.folder, run) >= 30  # the recipe's check says so too
        report = json.loads((project.root / example.folder / "runs" / run / "report.json")
                            .read_text())
        assert report["online_prepare"] is False  # a prepared record serves every run
    encodings = json.loads((project.root / example.folder / "model" /
                            f"{example.model}_quantized.encodings.json").read_text())
    assert {e["bw"] for e in encodings["activation_encodings"]} == {16}


@pytest.mark.parametrize("example", [ENCODER, DECODER], ids=["encoder", "decoder"])
def test_the_float_model_agrees_with_onnxruntime_on_the_decomposed_block(
        project: Project, example: Example) -> None:
    out = project.root / example.folder
    if not (out / "model" / f"{example.model}.udb").exists():
        project.build(example.recipe, example.folder)
    bundle = load_bundle(out / "model" / f"{example.model}.udb")
    kernels = [project.root / "examples" / k for k in example.kernels]
    session = Session(bundle.model, packages_for(bundle, kernels))
    reference = ort.InferenceSession(
        generator(example).build_model(reference=True).SerializeToString(),
        providers=["CPUExecutionProvider"])
    listing = parse_input_list(project.root / "examples" / example.folder / "data" /
                               example.test_list)
    names = [o.name for o in reference.get_outputs()]
    compared = 0
    for feed in feeds(listing, list(bundle.model.graph.inputs)):
        want = dict(zip(names, reference.run(names, feed), strict=True))
        got = session.run(feed, names)
        for name in names:
            scale = float(np.max(np.abs(want[name])))
            assert np.max(np.abs(got[name] - want[name])) <= 1e-4 * scale, name
            compared += 1
    assert compared == len(names) * len(listing.inferences) > 0


def test_16_bit_activations_lose_less_than_8_bits(project: Project) -> None:
    for example in (ENCODER, DECODER):
        recipe = project.root / "recipes" / example.recipe
        text = recipe.read_text()
        assert "act_bitwidth: 16" in text
        eight = project.root / "recipes" / f"8bit_{example.recipe}"
        eight.write_text(text.replace("act_bitwidth: 16", "act_bitwidth: 8")
                         .replace("    check: {min_sqnr_db: 30, max_drift_db: 1}\n", "")
                         .replace("min_sqnr_db: 30", "min_sqnr_db: 20"))
        project.build(eight.name, f"{example.folder}_8bit")
        if not (project.root / example.folder / "runs").exists():
            project.build(example.recipe, example.folder)
        for run in example.runs:
            bits16 = project.sqnr(example.folder, run)
            bits8 = project.sqnr(f"{example.folder}_8bit", run)
            print(f"{example.folder} {run}: {bits8:.1f} dB at 8 bits, {bits16:.1f} dB at 16")
            assert bits16 > bits8 + 3
    decode = {bits: json.loads((project.root / folder / "runs" / "decode" / "report.json")
                               .read_text())["metrics"] for bits, folder in
              ((8, "decoder_8bit"), (16, "decoder"))}
    for bits, metrics in decode.items():  # the decode run, unchecked at 8 bits
        print(f"decoder decode at {bits} bits: {metrics['sqnr_db']:.1f} dB, worst step "
              f"{metrics['decode']['min_sqnr_db']:.1f} dB, drift "
              f"{metrics['decode']['drift_db']:.2f} dB")
    assert decode[16]["sqnr_db"] > decode[8]["sqnr_db"] + 3


def test_the_generators_write_the_committed_files(tmp_path: Path) -> None:
    for folder in ("encoder", "decoder"):  # the decoder's script imports the encoder's
        shutil.copytree(EXAMPLES / folder, tmp_path / folder,
                        ignore=shutil.ignore_patterns("model", "data", "__pycache__"))
    for folder in ("encoder", "decoder"):
        subprocess.run([sys.executable, str(tmp_path / folder / "make_example.py")], check=True,
                       capture_output=True)
        expected = {k: v for k, v in digests(EXAMPLES / folder).items()
                    if k.startswith(("model", "data"))}
        assert expected and digests(tmp_path / folder) == expected


# -- the decoder's decode run: 32 chained steps ---------------------------------------------------

def decoded(project: Project) -> dict[str, Any]:
    """The decode run's report.json (the decoder recipe built once for the module)."""
    path = project.root / "decoder" / "runs" / "decode" / "report.json"
    if not path.exists():
        project.build(DECODER.recipe, DECODER.folder)
    return json.loads(path.read_text())


def test_the_decode_run_reports_32_per_step_sqnrs_without_drift_at_16_bits(
        project: Project) -> None:
    report = decoded(project)
    decode = report["metrics"]["decode"]
    steps = decode["sqnr_db"]
    assert report["inferences"] == len(steps) == 32 and report["online_prepare"] is False
    assert all(set(s) == {"y", "present_key", "present_value"} for s in steps)
    assert all(v is not None and v >= 30 for s in steps for v in s.values())
    assert decode["min_sqnr_db"] == min(v for s in steps for v in s.values())
    assert decode["window"] == 4 and decode["drift_db"] <= 1.0
    for name in ("y", "present_key", "present_value"):
        first = sum(s[name] for s in steps[:4]) / 4
        last = sum(s[name] for s in steps[-4:]) / 4
        assert first - last <= decode["drift_db"] + 1e-3
    check = json.loads((project.root / "decoder" / "runs" / "decode" / "check.json")
                       .read_text())
    assert check["passed"] is True and check["checks"] == {"min_sqnr_db": 30,
                                                          "max_drift_db": 1}
    print(f"decode: SQNR per step first {steps[0]}, last {steps[-1]}, min "
          f"{decode['min_sqnr_db']} dB at {decode['min_at']}, drift {decode['drift_db']} dB "
          f"({decode['drift_of']})")


def float_chain(project: Project, feed_forward: bool = True) -> list[dict[str, np.ndarray]]:
    """The float model's outputs at each step of the decode run's chain, as the recipe's
    decode section says; feed_forward=False: every step keeps the first step's empty cache
    and mask (the cache not fed), for the test that this would be caught."""
    from dataclasses import replace as with_

    from udo_build.model.input_list import load_tensor
    from udo_build.recipe import load_recipe
    from udo_build.runtime.decode import Chain

    recipe = load_recipe(project.root / "recipes" / DECODER.recipe)
    run = next(r for r in recipe.runs if r.name == "decode")
    assert run.decode is not None
    bundle = load_bundle(project.root / "decoder" / "model" / "decoder.udb")
    session = Session(bundle.model, packages_for(
        bundle, [project.root / "examples" / k for k in DECODER.kernels]))
    listing = parse_input_list(run.input_list)
    inputs = list(bundle.model.graph.inputs)
    first = next(feeds(with_(listing, inferences=listing.inferences[:1]), inputs))
    settings = run.decode if feed_forward else with_(run.decode, feed=(), mask=None)
    chain, found = Chain(settings, first), []
    for t in range(run.decode.steps):
        found.append(session.run(chain.feed, ["y", "present_key", "present_value"]))
        if t + 1 < len(listing.inferences):
            entry = listing.inferences[t + 1][0]
            chain.advance(found[-1], {"x": load_tensor(entry.path, "x", "float32", (1, 1, 64))})
    return found


def recorded(project: Project, t: int) -> dict[str, np.ndarray]:
    folder = project.root / "decoder" / "runs" / "decode" / f"Result_{t}"
    return {n: np.load(folder / f"{n}.npy") for n in ("y", "present_key", "present_value")}


def test_each_step_s_past_is_the_step_before_s_present(project: Project) -> None:
    """The record's chain: step t+1's present holds step t's present without its oldest
    position (through the past input's 16-bit encoding); the float reference of every step is
    the float model run on the float chain's own cache: the per-step SQNRs the run recorded
    are those of the record's outputs against it, and not against an unfed cache."""
    from udo_build.runtime.metrics import sqnr_db

    steps = decoded(project)["metrics"]["decode"]["sqnr_db"]
    encodings = {e["name"]: e for e in json.loads(
        (project.root / "decoder" / "model" / "decoder_quantized.encodings.json").read_text())
        ["activation_encodings"]}
    for t in range(31):
        now, after = recorded(project, t), recorded(project, t + 1)
        for name, past in (("present_key", "past_key"), ("present_value", "past_value")):
            scale, offset = encodings[past]["scale"][0], encodings[past]["offset"][0]
            fed = np.clip(now[name][:, :, 1:], scale * offset, scale * (offset + 65535))
            assert np.max(np.abs(after[name][:, :, :-1] - fed)) < 1e-3  # a few 16-bit steps
    fed = float_chain(project)
    for t in (0, 1, 2, 15, 31):
        got = recorded(project, t)
        for name, value in fed[t].items():
            assert sqnr_db(got[name], value) == pytest.approx(steps[t][name], abs=0.01)
    unfed = float_chain(project, feed_forward=False)
    assert all(np.array_equal(unfed[0][n], fed[0][n]) for n in fed[0])  # step 0 alike
    off = [abs(sqnr_db(recorded(project, 1)[n], unfed[1][n]) - steps[1][n]) for n in fed[1]]
    assert max(off) > 10  # an unfed reference would give other figures from step 1 on


def test_the_report_page_shows_the_decode_steps(project: Project) -> None:
    decoded(project)
    page = (project.root / "decoder.report.html").read_text()
    section = page[page.index("<h2>SQNR per decode step: decode</h2>"):]
    section = section[:section.index("</section>")]
    assert section.count("<polyline") == 3 and section.count("<tr><td>") == 32
    assert "<th>present_key</th><th>present_value</th><th>y</th>" in section


def test_changing_the_steps_reruns_only_the_decode_run_and_its_check(project: Project) -> None:
    decoded(project)
    recipe = project.root / "recipes" / "decoder_24.yaml"
    recipe.write_text((project.root / "recipes" / DECODER.recipe).read_text()
                      .replace("steps: 32", "steps: 24"))
    summary = project.build(recipe.name, "decoder_24")
    built = {a["id"] for a in summary["actions"] if a["status"] == "built"}
    assert built == {"run:decode", "check:decode"}
    report = json.loads((project.root / "decoder_24" / "runs" / "decode" / "report.json")
                        .read_text())
    assert len(report["metrics"]["decode"]["sqnr_db"]) == report["inferences"] == 24


@pytest.mark.parametrize(("old", "new", "field", "says"), [
    ("present_value: past_value}", "present_kv: past_value}", "feed.present_kv",
     "'present_kv' is not an output of the model"),
    ("present_value: past_value}", "present_value: attention_mask}", "feed.present_value",
     "output 'present_value' [1, 4, 32, 16] cannot feed input 'attention_mask' [1, 1, 1, 32]"),
])
def test_a_bad_decode_entry_is_exit_2_at_its_field(project: Project, old: str, new: str,
                                                   field: str, says: str) -> None:
    text = (project.root / "recipes" / DECODER.recipe).read_text()
    assert old in text
    recipe = project.root / "recipes" / "bad_decode.yaml"
    recipe.write_text(text.replace(old, new))
    line = next(i for i, t in enumerate(recipe.read_text().splitlines(), 1) if new in t)
    for command in (["validate", str(recipe)],
                    ["build", str(recipe), "--store", str(project.root / "store"), "--out",
                     str(project.root / "bad_decode")]):
        stderr = io.StringIO()
        assert main(command, stdout=io.StringIO(), stderr=stderr, env={}) == 2
        assert f"bad_decode.yaml:{line}:" in stderr.getvalue()
        assert f"run[2].decode.{field}: {says}" in stderr.getvalue(), stderr.getvalue()
