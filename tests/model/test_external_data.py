"""ONNX models with external data: converted to the same bundle as the same model in one file,
weights mapped rather than read at import, bundles written streamed or as parts with the same
bytes, and every bad reference refused with the tensor, the file and the field."""

from __future__ import annotations

import io
import os
import re
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from udo_build.errors import UserError
from udo_build.ir.bundle import Bundle, bundle_segments, load_bundle, write_bundle_to
from udo_build.model.external_data import LazyWeights
from udo_build.model.onnx_import import import_onnx, load_onnx

RNG = np.random.default_rng(7)
W1 = RNG.standard_normal((256, 128)).astype(np.float32)  # over SMALL_EXTERNAL: kept outside
W2 = RNG.standard_normal((128, 8)).astype(np.float32)
SHAPE = np.array([1, 8], np.int64)


def mlp() -> onnx.ModelProto:
    nodes = [helper.make_node("MatMul", ["x", "w1"], ["h"]), helper.make_node("Relu", ["h"], ["r"]),
             helper.make_node("MatMul", ["r", "w2"], ["m"]),
             helper.make_node("Reshape", ["m", "shape"], ["y"])]
    inits = [numpy_helper.from_array(W1, "w1"), numpy_helper.from_array(W2, "w2"),
             numpy_helper.from_array(SHAPE, "shape")]
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", 1, [1, 256])],
                              [helper.make_tensor_value_info("y", 1, [1, 8])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def saved(folder: Path, external: bool = True) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / ("ext.onnx" if external else "inline.onnx")
    if external:  # every tensor outside, the Reshape's shape too
        onnx.save(mlp(), path, save_as_external_data=True, all_tensors_to_one_file=True,
                  location="weights.bin", size_threshold=0)
    else:
        onnx.save(mlp(), path)
    return path


def edited(path: Path, tensor: str, **entries: str) -> Path:
    """The model at `path` with one initializer's external data entries changed."""
    model = onnx.load(path, load_external_data=False)
    init = next(i for i in model.graph.initializer if i.name == tensor)
    given = {e.key: e.value for e in init.external_data} | entries
    del init.external_data[:]
    for key, value in given.items():
        init.external_data.add(key=key, value=value)
    out = path.with_name("edited.onnx")
    out.write_bytes(model.SerializeToString())
    return out


def convert(path: Path) -> Bundle:
    return Bundle(import_onnx(load_onnx(path), file=str(path)))


def test_external_data_converts_to_the_bundle_of_the_same_model_in_one_file(
        tmp_path: Path) -> None:
    inline = convert(saved(tmp_path, external=False)).to_bytes()
    bundle = convert(saved(tmp_path))
    assert isinstance(bundle.model.weights, LazyWeights)
    assert bundle.model.weights.streamed("w1") is not None
    assert bundle.model.weights.streamed("w2") is None
    assert bundle.to_bytes() == inline


def test_weights_are_mapped_not_read_at_import(tmp_path: Path) -> None:
    weights = convert(saved(tmp_path)).model.weights
    assert isinstance(weights["w1"], np.memmap)
    np.testing.assert_array_equal(weights["w1"], W1)
    assert not isinstance(weights["w2"], np.memmap)  # small: read with the model
    np.testing.assert_array_equal(weights["w2"], W2)


def test_streamed_and_parts_writers_give_the_same_bytes(tmp_path: Path) -> None:
    bundle = convert(saved(tmp_path))
    whole = bundle.to_bytes()
    streamed = io.BytesIO()
    assert write_bundle_to(bundle, streamed) == len(whole)
    assert streamed.getvalue() == whole
    segments, size = bundle_segments(bundle)
    assert size == len(whole) and len(segments) > 2  # the head, then each weight a part
    rebuilt = bytearray(size)
    for offset, data in segments:
        rebuilt[offset:offset + len(data)] = data
    assert bytes(rebuilt) == whole


def test_load_bundle_maps_the_file_and_checks_it(tmp_path: Path) -> None:
    data = convert(saved(tmp_path)).to_bytes()
    (tmp_path / "b.udb").write_bytes(data)
    np.testing.assert_array_equal(load_bundle(tmp_path / "b.udb").model.weights["w2"], W2)
    broken = bytearray(data)
    broken[-5] ^= 0xFF  # inside the last part
    (tmp_path / "bad.udb").write_bytes(bytes(broken))
    with pytest.raises(UserError, match="corrupt"):
        load_bundle(tmp_path / "bad.udb")


@pytest.mark.parametrize(("entries", "message", "field"), [
    ({"location": "/etc/passwd"}, "leaves the model's folder", "location"),
    ({"location": "../weights.bin"}, "leaves the model's folder", "location"),
    ({"location": "sub/../../x.bin"}, "leaves the model's folder", "location"),
    ({"location": "missing.bin"}, "missing.bin not found", "location"),
    ({"location": ""}, "names no location", "location"),
    ({"offset": "-4"}, "offset '-4' is not a whole number", "offset"),
    ({"offset": "1000000"}, "lie past the end of weights.bin", "external_data"),
    ({"length": "12"}, "holds 12 bytes for it, but float32 of shape [256, 128] is 131072",
     "length"),
])
def test_a_bad_reference_is_refused_naming_tensor_file_and_field(
        tmp_path: Path, entries: dict[str, str], message: str, field: str) -> None:
    path = edited(saved(tmp_path), "w1", **entries)
    with pytest.raises(UserError, match=re.escape(message)) as caught:
        load_onnx(path)
    problem = caught.value.problems[0]
    assert "initializer w1" in problem.message and str(path) in str(problem.file)
    assert problem.field.startswith("graph.initializer[0].") and field in problem.field


def test_a_symlink_out_of_the_folder_is_refused(tmp_path: Path) -> None:
    path = saved(tmp_path / "model")
    outside = tmp_path / "outside.bin"
    (tmp_path / "model" / "weights.bin").rename(outside)
    os.symlink(outside, tmp_path / "model" / "weights.bin")
    with pytest.raises(UserError, match="leads out of the model's folder"):
        load_onnx(path)


def test_a_symlink_inside_the_folder_is_followed(tmp_path: Path) -> None:
    path = saved(tmp_path)
    (tmp_path / "weights.bin").rename(tmp_path / "real.bin")
    os.symlink("real.bin", tmp_path / "weights.bin")
    assert convert(path).to_bytes() == convert(saved(tmp_path / "b", external=False)).to_bytes()


def test_an_unsupported_dtype_in_external_data_is_refused(tmp_path: Path) -> None:
    model = onnx.load(saved(tmp_path), load_external_data=False)
    model.graph.initializer[0].data_type = TensorProto.BFLOAT16
    path = tmp_path / "bf16.onnx"
    path.write_bytes(model.SerializeToString())
    with pytest.raises(UserError, match="data type 16 is not supported in external data"):
        load_onnx(path)


def test_a_model_with_external_data_not_read_by_load_onnx_is_refused(tmp_path: Path) -> None:
    model = onnx.load(saved(tmp_path), load_external_data=False)
    with pytest.raises(UserError, match="the model's folder is not known"):
        import_onnx(model, file="ext.onnx")


def test_a_file_that_shrank_after_loading_is_a_clear_error(tmp_path: Path) -> None:
    path = saved(tmp_path)
    model = import_onnx(load_onnx(path), file=str(path))
    with open(tmp_path / "weights.bin", "r+b") as fh:
        fh.truncate(100)
    with pytest.raises(UserError, match="ended early"):
        Bundle(model).to_bytes()
