"""The planner's scan of a model for its external data files (udo_build.model.external_files):
the files onnx itself names, found without onnx; none for a model that keeps its weights or is
not protobuf at all."""

from __future__ import annotations

from pathlib import Path

import onnx

from udo_build.model.external_files import referenced_files

from .test_external_data import mlp, saved


def test_the_scan_finds_the_files_onnx_names(tmp_path: Path) -> None:
    path = tmp_path / "two.onnx"
    model = mlp()
    onnx.save(model, path, save_as_external_data=True, all_tensors_to_one_file=False,
              size_threshold=0)
    named = sorted({e.value for i in onnx.load(path, load_external_data=False).graph.initializer
                    for e in i.external_data if e.key == "location"})
    found = referenced_files(path)
    assert sorted(location for location, _ in found) == named and len(named) == 3
    assert all(p == (tmp_path / location).resolve() for location, p in found)
    assert referenced_files(saved(tmp_path / "one")) == [
        ("weights.bin", (tmp_path / "one" / "weights.bin").resolve())]


def test_a_model_with_its_weights_inside_or_not_protobuf_names_no_files(tmp_path: Path) -> None:
    assert referenced_files(saved(tmp_path, external=False)) == []
    (tmp_path / "junk.onnx").write_bytes(b"\xff" * 64 + b"not a model")
    assert referenced_files(tmp_path / "junk.onnx") == []
