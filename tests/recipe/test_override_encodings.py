"""Override encodings (the recipe's quantize.override_encodings, AIMET's format, the vendor
converters' --quantization_overrides) naming a tensor the model lacks: the build warns with the
names, at the recipe's field, built or cached alike; under --strict it refuses (exit 2) before
anything is published. Names the model has are applied as before."""

from __future__ import annotations

import io
import json
import os
import shutil
from pathlib import Path

import pytest

from udo_build.cli import main

EXAMPLE = Path(__file__).parents[2] / "examples/softplus"


def cli(*argv: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in argv], stdout=out, stderr=err, env={})
    return code, out.getvalue(), err.getvalue()


def _entry(name: str) -> dict[str, object]:
    return {"name": name, "dtype": "INT", "enc_type": "PER_TENSOR", "bw": 8, "is_sym": False,
            "scale": [0.01], "offset": [-128]}


@pytest.fixture
def project(tmp_path: Path) -> Path:
    shutil.copytree(EXAMPLE / "ops", tmp_path / "ops")
    shutil.copy(EXAMPLE / "model/net.onnx", tmp_path / "net.onnx")
    for i in range(2):
        shutil.copy(EXAMPLE / f"data/calib/input_0{i}.raw", tmp_path / f"in{i}.raw")
    (tmp_path / "calib.txt").write_text("in0.raw\nin1.raw\n")
    (tmp_path / "over.json").write_text(json.dumps({
        "version": "1.0.0", "activation_encodings": [_entry("input"), _entry("no_such_tensor")],
        "param_encodings": [_entry("ghost.weight")]}))
    recipe = tmp_path / "r.yaml"
    recipe.write_text(
        "recipe: 1\nname: over\npackage:\n  ops:\n"
        "    - {config: ops/softplus.xml, kernels: ops/kernels.py}\n"
        "    - {config: ops/swish.json, kernels: ops/kernels.py}\n"
        "  backends: [CPU]\nmodel:\n  onnx: net.onnx\n"
        "quantize:\n  input_list: calib.txt\n  quantizer: tf\n  report_inputs: 0\n"
        "  override_encodings: over.json\n")
    return recipe


def build(recipe: Path, *extra: str) -> tuple[int, str, str]:
    root = recipe.parent
    return cli("build", recipe, "--store", root / "store", "--out", root / "out", "-j", "1",
               *extra)


def said(err: str, level: str, project: Path) -> list[str]:
    """The lines of `err` about override encodings, each checked to say where and what."""
    lines = [line for line in err.splitlines() if "override encodings" in line]
    for line in lines:
        assert line.startswith(f"{level}: {project}:14:23: quantize.override_encodings: the "
                               f"override encodings {project.parent / 'over.json'} name 2 "
                               "tensor(s) the model lacks, ignored: ghost.weight, "
                               "no_such_tensor; check the names"), line
    return lines


def test_unknown_override_names_are_a_warning_then_refused_under_strict(project: Path) -> None:
    code, out, err = build(project, "--strict")
    assert code == 2, err
    assert len(said(err, "error", project)) == 1
    assert not (project.parent / "out/model").exists()  # nothing published
    code, out, err = build(project)
    assert code == 0, err
    assert len(said(err, "warning", project)) == 1
    quantized = project.parent / "out/model/net_quantized.encodings.json"
    names = {e["name"] for e in json.loads(quantized.read_text())["activation_encodings"]}
    assert "input" in names and "no_such_tensor" not in names
    code, out, err = build(project)  # cached: said again
    assert code == 0 and len(said(err, "warning", project)) == 1
    assert build(project, "--strict")[0] == 2
    os.remove(project.parent / "over.json")  # a known name only: no warning
    (project.parent / "over.json").write_text(json.dumps({
        "version": "1.0.0", "activation_encodings": [_entry("input")], "param_encodings": []}))
    code, out, err = build(project, "--strict")
    assert code == 0 and "override encodings" not in err, err


def test_the_quantize_command_warns_and_strict_refuses(project: Path) -> None:
    root = project.parent
    code, _, err = cli("convert", root / "net.onnx", "--opdef", root / "ops/softplus.xml",
                       "--opdef", root / "ops/swish.json", "--out", root / "net.udb")
    assert code == 0, err
    args = ("quantize", root / "net.udb", "--input-list", root / "calib.txt", "--kernels",
            root / "ops/kernels.py", "--override-encodings", root / "over.json", "--store",
            root / "store", "--out", root / "q.udb")
    code, _, err = cli(*args, "--strict")
    assert code == 2, err
    assert "name 2 tensor(s) the model lacks, ignored: ghost.weight, no_such_tensor" in err
    assert not (root / "q.udb").exists()
    code, _, err = cli(*args)
    assert code == 0, err
    assert err.startswith("warning: ") and "--override-encodings" in err
    assert "ghost.weight, no_such_tensor" in err and (root / "q.udb").exists()
