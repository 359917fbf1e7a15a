"""A recipe whose model keeps its weights in an external data file builds end to end: the file is
a keyed source of the convert step (changing it converts again and re-runs what follows), a
location that leads out of the model's folder is refused at planning with the model file and
the field, and the converted bundle is a file of parts whose large weights are blobs of their
own."""

from __future__ import annotations

import hashlib
import io
import json
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from udo_build.builder.plan import Source, plan_recipe
from udo_build.cli import main
from udo_build.errors import UserError
from udo_build.ir.bundle import Bundle, load_bundle
from udo_build.model.onnx_import import import_onnx, load_onnx
from udo_build.recipe import load_recipe
from udo_build.store import Store
from udo_build.store.parts import parse_layout

RNG = np.random.default_rng(3)
W = (RNG.standard_normal((256, 1536)) / 16).astype(np.float32)  # 1.5 MiB: a part of its own
B = RNG.standard_normal(1536).astype(np.float32)

RECIPE = """\
recipe: 1
name: external-data
model:
  onnx: model/net.onnx
prepare:
  matrix:
    soc: [sm8550]
    precision: [fp16]
run:
  - name: smoke
    soc: sm8550
    precision: fp16
    input_list: data/inputs.txt
    check: {min_sqnr_db: 30}
"""


def model() -> onnx.ModelProto:
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]), helper.make_node("Add", ["h", "b"],
                                                                          ["y"])]
    graph = helper.make_graph(nodes, "ext", [helper.make_tensor_value_info("x", 1, [1, 256])],
                              [helper.make_tensor_value_info("y", 1, [1, 1536])],
                              [numpy_helper.from_array(W, "w"), numpy_helper.from_array(B, "b")])
    made = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    made.ir_version = 8
    return made


def project(root: Path, location: str = "net.weights") -> Path:
    (root / "model").mkdir(parents=True)
    (root / ".udo-build-root").write_text("")
    path = root / "model" / "net.onnx"
    onnx.save(model(), path, save_as_external_data=True, all_tensors_to_one_file=True,
              location="net.weights", size_threshold=0)
    if location != "net.weights":  # the same model naming another location
        saved = onnx.load(path, load_external_data=False)
        for init in saved.graph.initializer:
            for entry in init.external_data:
                if entry.key == "location":
                    entry.value = location
        path.write_bytes(saved.SerializeToString())
    (root / "data").mkdir()
    RNG.standard_normal((1, 256)).astype(np.float32).tofile(root / "data" / "x.raw")
    (root / "data" / "inputs.txt").write_text("x:=x.raw\n")
    (root / "recipe.yaml").write_text(RECIPE)
    return root / "recipe.yaml"


def build(root: Path, code: int = 0) -> tuple[dict[str, Any], str]:
    out, err = io.StringIO(), io.StringIO()
    got = main(["build", str(root / "recipe.yaml"), "--store", str(root / "store"), "--out",
                str(root / "out"), "--json"], stdout=out, stderr=err, env={})
    assert got == code, err.getvalue()
    return (json.loads(out.getvalue()) if code == 0 else {}), err.getvalue()


def built(summary: dict[str, Any]) -> list[str]:
    return sorted(a["id"] for a in summary["actions"] if a["status"] == "built")


@pytest.fixture(scope="module")
def first(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    root = tmp_path_factory.mktemp("extdata")
    project(root)
    return root, build(root)[0]


def test_a_recipe_whose_model_has_external_data_builds_end_to_end(
        first: tuple[Path, dict[str, Any]]) -> None:
    root, summary = first
    assert summary["failed"] == 0 and "convert" in built(summary)
    check = json.loads((root / "out" / "runs" / "smoke" / "check.json").read_text())
    assert check["passed"] is True
    # the bundle is the one the model gives converted from its folder, weights and all
    path = root / "model" / "net.onnx"
    want = Bundle(import_onnx(load_onnx(path), file=str(path)), None,
                  {"producer": "udo-build convert 1"}).to_bytes()
    assert (root / "out" / "model" / "net.udb").read_bytes() == want
    assert np.array_equal(load_bundle(root / "out" / "model" / "net.udb").model.weights["w"], W)


def test_the_converted_bundle_is_a_file_of_parts_its_large_weight_a_blob(
        first: tuple[Path, dict[str, Any]]) -> None:
    root, summary = first
    store = Store(root / "store")
    key = next(a["key"] for a in summary["actions"] if a["id"] == "convert")
    result = store.ac.get(key)
    assert result is not None
    output = result.outputs["bundle"]
    layout = parse_layout(store.cas.get(output.digest) or b"")
    assert output.type == "tree" and layout is not None
    weight = hashlib.sha256(W.tobytes()).hexdigest()
    assert weight in {p.digest for p in layout.parts}  # the weight's bytes, a blob of its own
    assert store.cas.get(weight) == W.tobytes()
    assert max(p.size for p in layout.parts if p.digest != weight) < W.nbytes / 4


def test_changing_the_external_data_converts_again_and_reruns_what_follows(
        tmp_path: Path) -> None:
    project(tmp_path)
    build(tmp_path)
    again, _ = build(tmp_path)
    assert built(again) == []
    data = tmp_path / "model" / "net.weights"
    changed = bytearray(data.read_bytes())
    changed[:4] = np.float32(0.5).tobytes()  # w[0, 0]: same size, other weights
    data.write_bytes(bytes(changed))
    third, _ = build(tmp_path)
    assert {"convert", "assemble", "run:smoke"} <= set(built(third))
    assert any(a.startswith("prepare:") for a in built(third))
    weights = load_bundle(tmp_path / "out" / "model" / "net.udb").model.weights["w"]
    assert weights[0, 0] == np.float32(0.5)


@pytest.mark.parametrize("location", ["../outside.weights", "/tmp/net.weights"])
def test_a_location_leading_out_of_the_project_is_refused_at_planning(
        tmp_path: Path, location: str) -> None:
    project(tmp_path / "p", location)
    (tmp_path / "outside.weights").write_bytes((tmp_path / "p/model/net.weights").read_bytes())
    _, err = build(tmp_path / "p", code=2)
    assert "net.onnx" in err and "graph.initializer[0].external_data.location" in err
    assert repr(location) in err and "leaves the model's folder" in err
    with pytest.raises(UserError) as refused:  # by the plan, before any step runs
        plan_recipe(load_recipe(tmp_path / "p" / "recipe.yaml"))
    assert refused.value.problems[0].field == "graph.initializer[0].external_data.location"


def test_the_plan_keys_each_external_data_file_of_the_model(tmp_path: Path) -> None:
    plan = plan_recipe(load_recipe(project(tmp_path)))
    convert = plan.actions["convert"]
    assert convert.params == {"external_data": ["net.weights"]}
    assert convert.inputs["external_data[0]"] == Source((tmp_path / "model" /
                                                          "net.weights").resolve())
