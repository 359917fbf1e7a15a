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
                         .replace("min_sqnr_db: 30", "min_sqnr_db: 20"))
        project.build(eight.name, f"{example.folder}_8bit")
        if not (project.root / example.folder / "runs").exists():
            project.build(example.recipe, example.folder)
        for run in example.runs:
            bits16 = project.sqnr(example.folder, run)
            bits8 = project.sqnr(f"{example.folder}_8bit", run)
            print(f"{example.folder} {run}: {bits8:.1f} dB at 8 bits, {bits16:.1f} dB at 16")
            assert bits16 > bits8 + 3


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
