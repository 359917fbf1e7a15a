"""The Llama-style decoder example (examples/llama/make_model.py, recipes/llm_tiny.yaml): the
recipe builds end to end in a temp store (packages, convert, quantize at 16-bit activations,
records for two SoCs at AR-128 and AR-1, runs checked against the float model); the emulator's
float model agrees with a numpy Llama written from the weights (grouped-query attention by
np.repeat, RoPE, RMSNorm, SwiGLU); the generator writes the committed files; the 1b size has
TinyLlama-1.1B's parameter count."""

from __future__ import annotations

import importlib.util
import io
import json
import shutil
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import numpy_helper

from udo_build.cli import main
from udo_build.ir.bundle import load_bundle
from udo_build.kernels.load import packages_for
from udo_build.model.input_list import feeds, parse_input_list
from udo_build.runtime.float_session import Session

from ..conftest import EXAMPLES, RECIPES
from .test_generators import digests

KERNELS = ("decoder/ops/kernels.py", "encoder/ops/kernels.py")
OUTPUTS = ["logits", "present_key_0", "present_value_0", "present_key_1", "present_value_1"]


def generator() -> ModuleType:
    path = EXAMPLES / "llama" / "make_model.py"
    spec = importlib.util.spec_from_file_location("udo_example_llama", path)
    assert spec is not None and spec.loader is not None
    module = sys.modules.setdefault(spec.name, importlib.util.module_from_spec(spec))
    if not hasattr(module, "SIZES"):
        spec.loader.exec_module(module)  # registered first: its dataclasses look it up
    return module


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    root = tmp_path_factory.mktemp("llama")
    (root / ".udo-build-root").write_text("")
    for folder in ("llama", "decoder", "encoder"):
        shutil.copytree(EXAMPLES / folder, root / "examples" / folder)
    (root / "recipes").mkdir()
    shutil.copy(RECIPES / "llm_tiny.yaml", root / "recipes")
    stdout, stderr = io.StringIO(), io.StringIO()
    code = main(["build", str(root / "recipes" / "llm_tiny.yaml"), "--store", str(root / "store"),
                 "--out", str(root / "out"), "--json"], stdout=stdout, stderr=stderr, env={})
    assert code == 0, stderr.getvalue()
    return root, json.loads(stdout.getvalue())


def test_the_tiny_recipe_prepares_two_socs_at_ar128_and_ar1_and_passes_its_runs(
        built: tuple[Path, dict[str, Any]]) -> None:
    """Each SoC's record holds both graphs (AR-128 and AR-1, weights once), each graph its own
    prepare joined by a combine; the runs take their graph from it."""
    root, summary = built
    assert summary["failed"] == 0 and summary["skipped"] == 0
    prepared = sorted(a["id"] for a in summary["actions"] if a["id"].startswith("prepare:"))
    assert len(prepared) == 4
    assert {p.split(":")[1].split("/")[0] for p in prepared} == {"sm8550", "sm8650"}
    assert sum("graph:ar128/" in p for p in prepared) == 2
    assert sum("graph:ar1/" in p for p in prepared) == 2
    combined = [a for a in summary["actions"] if a["id"].startswith("combine:")]
    assert len(combined) == 2 and all("2 graphs (ar1, ar128)" in a["description"]
                                      for a in combined)
    for run, graph in (("token", "ar1"), ("prompt", "ar128")):
        check = json.loads((root / "out" / "runs" / run / "check.json").read_text())
        assert check["passed"] is True and check["metrics"]["sqnr_db"] >= 30, check
        report = json.loads((root / "out" / "runs" / run / "report.json").read_text())
        assert report["online_prepare"] is False  # a prepared record serves each run
        assert report["graph"] == graph
    encodings = json.loads((root / "out" / "model" / "llama_tiny_quantized.encodings.json")
                           .read_text())
    assert {e["bw"] for e in encodings["activation_encodings"]} == {16}


def rms(x: np.ndarray, gain: np.ndarray) -> np.ndarray:
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-6) * gain


def rope(x: np.ndarray, position: np.ndarray) -> np.ndarray:
    half = x.shape[-1] // 2
    angles = position[:, None, :, None] * 10000.0 ** (-np.arange(half) * 2.0 / (2 * half))
    x1, x2 = x[..., :half], x[..., half:]
    return np.concatenate([x1 * np.cos(angles) - x2 * np.sin(angles),
                           x2 * np.cos(angles) + x1 * np.sin(angles)], axis=-1)


def llama(w: dict[str, np.ndarray], feed: dict[str, np.ndarray], size: Any) -> dict:
    """The decoder in float64 numpy, from the weights by name."""
    s, dh, group = feed["input_ids"].shape[1], size.head_dim, size.heads // size.kv_heads
    out = {}

    def heads(x: np.ndarray, count: int) -> np.ndarray:
        return x.reshape(1, s, count, dh).transpose(0, 2, 1, 3)

    x = w["embed_tokens.weight"][feed["input_ids"]]
    position = feed["position_ids"].astype(np.float64)
    for i in range(size.layers):
        p = f"layers.{i}"
        h = rms(x, w[f"{p}.input_norm.weight"])
        q = rope(heads(h @ w[f"{p}.self_attn.q_proj.weight"], size.heads), position)
        k = rope(heads(h @ w[f"{p}.self_attn.k_proj.weight"], size.kv_heads), position)
        v = heads(h @ w[f"{p}.self_attn.v_proj.weight"], size.kv_heads)
        keys = out[f"present_key_{i}"] = np.concatenate([feed[f"past_key_{i}"], k], axis=2)
        values = out[f"present_value_{i}"] = np.concatenate([feed[f"past_value_{i}"], v], axis=2)
        scores = q @ np.repeat(keys, group, axis=1).transpose(0, 1, 3, 2) / np.sqrt(dh)
        scores = np.exp(scores + feed["attention_mask"] - np.max(scores, -1, keepdims=True))
        context = (scores / scores.sum(-1, keepdims=True)) @ np.repeat(values, group, axis=1)
        x = x + context.transpose(0, 2, 1, 3).reshape(1, s, -1) @ w[f"{p}.self_attn.o_proj.weight"]
        h2 = rms(x, w[f"{p}.post_norm.weight"])
        gate = h2 @ w[f"{p}.mlp.gate_proj.weight"]
        x = x + (gate / (1 + np.exp(-gate)) * (h2 @ w[f"{p}.mlp.up_proj.weight"])) \
            @ w[f"{p}.mlp.down_proj.weight"]
    out["logits"] = rms(x, w["norm.weight"]) @ w["logits.weight"]
    return out


def test_the_float_model_agrees_with_a_numpy_llama(built: tuple[Path, dict[str, Any]]) -> None:
    root, _ = built
    bundle = load_bundle(root / "out" / "model" / "llama_tiny.udb")
    session = Session(bundle.model, packages_for(bundle, [EXAMPLES / k for k in KERNELS]))
    proto = onnx.load(EXAMPLES / "llama" / "model" / "llama_tiny.onnx")
    weights = {t.name: numpy_helper.to_array(t).astype(np.float64)
               for t in proto.graph.initializer if t.data_type == onnx.TensorProto.FLOAT}
    listing = parse_input_list(EXAMPLES / "llama" / "data" / "test_ar128.txt")
    compared = 0
    for feed in feeds(listing, list(bundle.model.graph.inputs)):
        want = llama(weights, {k: np.asarray(v) for k, v in feed.items()},
                     generator().SIZES["tiny"])
        got = session.run(feed, OUTPUTS)
        for name in OUTPUTS:
            scale = float(np.max(np.abs(want[name])))
            assert np.max(np.abs(got[name] - want[name])) <= 1e-4 * scale, name
            compared += 1
    assert compared == len(OUTPUTS) * len(listing.inferences) > 0


def test_the_generator_writes_the_committed_files(tmp_path: Path) -> None:
    copy = tmp_path / "llama"
    shutil.copytree(EXAMPLES / "llama", copy, ignore=shutil.ignore_patterns("model", "data"))
    subprocess.run([sys.executable, str(copy / "make_model.py"), "--example"], check=True,
                   capture_output=True)
    expected = digests(EXAMPLES / "llama")
    assert expected and digests(copy) == expected


def test_the_sizes_count_their_parameters() -> None:
    sizes = generator().SIZES
    assert sizes["1b"].parameters() == 1_100_048_384  # TinyLlama-1.1B's count
    proto = onnx.load(EXAMPLES / "llama" / "model" / "llama_tiny.onnx")
    weights = sum(int(np.prod(t.dims)) for t in proto.graph.initializer
                  if t.name.endswith(".weight"))
    assert weights == sizes["tiny"].parameters() <= 20_000_000
