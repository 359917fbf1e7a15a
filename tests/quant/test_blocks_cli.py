"""A w4a16 LPBQ build of a small token model (int64 token ids -> Gather -> MatMul) end to end
through the CLI: calibration over `name:=path` lines of token ids, LPBQ entries in the published
encodings, a record that holds the block weights packed two per byte, its run checked against
the float model, and the published encodings fed back as overrides giving the same bytes."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from udo_build.cli import main
from udo_build.errors import UserError

RECIPE = """\
recipe: 1
name: lpbq
model:
  onnx: net.onnx
quantize:
  input_list: calib.txt
  act_bitwidth: 16
  weights_bitwidth: 4
  weights_block_size: 32
  lpbq: true
{override}prepare:
  matrix:
    soc: [sm8550]
run:
  - name: smoke
    soc: sm8550
    input_list: calib.txt
    check: {{min_sqnr_db: 15}}
"""


def _project(root: Path, override: str = "") -> Path:
    rng = np.random.default_rng(7)
    table = numpy_helper.from_array(rng.standard_normal((64, 128)).astype(np.float32), "table")
    w = numpy_helper.from_array((rng.standard_normal((128, 48)) / 8).astype(np.float32), "w")
    graph = helper.make_graph(
        [helper.make_node("Gather", ["table", "ids"], ["h"], name="embed"),
         helper.make_node("MatMul", ["h", "w"], ["y"], name="proj")], "net",
        [helper.make_tensor_value_info("ids", TensorProto.INT64, [1, 8])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 8, 48])], [table, w])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.save(model, root / "net.onnx")
    lines = []
    for k, dtype in enumerate((np.float32, np.int64, np.int32)):  # SNPE's float32, native
        rng.integers(0, 64, (1, 8)).astype(dtype).tofile(root / f"ids_{k}.raw")
        lines.append(f"ids:=ids_{k}.raw\n")
    (root / "calib.txt").write_text("".join(lines))
    (root / ".udo-build-root").touch()
    (root / "lpbq.yaml").write_text(RECIPE.format(override=override))
    return root / "lpbq.yaml"


def _build(recipe: Path, root: Path) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["build", str(recipe), "--store", str(root / "store"), "--out",
                 str(root / "out")], stdout=out, stderr=err)
    return code, out.getvalue() + err.getvalue()


@pytest.mark.parametrize("dtype", ["int64", "int32"])
def test_token_ids_are_read_from_float32_and_native_raw_files(tmp_path: Path,
                                                              dtype: str) -> None:
    from udo_build.model.input_list import load_tensor

    ids = np.array([[0, 1, 7, 63, 4095, 2, 3, 5]])
    for form in (np.float32, np.dtype(dtype)):
        ids.astype(form).tofile(tmp_path / "ids.raw")
        got = load_tensor(tmp_path / "ids.raw", "ids", dtype, (1, 8))
        assert got.dtype == np.dtype(dtype) and np.array_equal(got, ids)
    (tmp_path / "ids.raw").write_bytes(b"\0" * 12)
    with pytest.raises(UserError, match=f"float32 or {dtype}"):
        load_tensor(tmp_path / "ids.raw", "ids", dtype, (1, 8))


def test_a_w4a16_lpbq_build_runs_end_to_end_and_its_encodings_round_trip(
        tmp_path: Path) -> None:
    from udo_build.compiler.record import read_record
    from udo_build.ir.bundle import read_bundle
    from udo_build.ir.qmodel import from_bundle
    from udo_build.runtime.integer import QuantizedSession

    code, text = _build(_project(tmp_path), tmp_path)
    assert code == 0, text
    published = tmp_path / "out" / "model" / "net_quantized.encodings.json"
    doc = json.loads(published.read_text())
    [w] = [e for e in doc["param_encodings"] if e["name"] == "w"]
    assert (w["enc_type"], w["bw"], w["compressed_bw"], w["block_size"]) == ("LPBQ", 8, 4, 32)
    assert len(w["per_block_int_scale"]) == 48 * 4
    deploy = read_bundle((tmp_path / "out" / "model" / "net_deploy.udb").read_bytes())
    records = [read_record(v) for k, v in deploy.parts.items() if k.endswith(".udr")]
    assert records
    body = records[0].body
    packed = [v for v in body["values"] if v.get("const", {}).get("bits") == 4]
    assert sorted(v["name"] for v in packed) == ["table", "w"]  # the embedding by rows
    # the record (its packed integers) computes what the quantized bundle does, bit for bit
    qmodel = from_bundle(read_bundle((tmp_path / "out" / "model" / "net_quantized.udb")
                                     .read_bytes()))
    ids = {"ids": np.fromfile(tmp_path / "ids_1.raw", np.int64).reshape(1, 8)}
    ours = records[0].runner().run(ids, raw=True)["y"]
    assert np.array_equal(ours, QuantizedSession(qmodel).run_quantized(ids)["y"])
    # the overrides read back give the very encodings (and bundle) the calibration chose
    again = tmp_path / "again"
    again.mkdir()
    (again / "over.json").write_bytes(published.read_bytes())
    code, text = _build(_project(again, "  override_encodings: over.json\n"), again)
    assert code == 0, text
    assert (again / "out" / "model" / "net_quantized.encodings.json").read_bytes() == \
        published.read_bytes()


@pytest.mark.parametrize("quantize, field", [
    ("  lpbq: true\n", "quantize.lpbq"),
    ("  weights_block_size: 32\n  weights_bitwidth: 16\n", "quantize.weights_block_size"),
    ("  weights_block_size: 32\n  algorithms: [adaround]\n", "quantize.algorithms"),
])
def test_block_settings_that_cannot_work_are_refused_naming_the_field(
        tmp_path: Path, quantize: str, field: str) -> None:
    (tmp_path / ".udo-build-root").touch()
    (tmp_path / "net.onnx").write_bytes(b"")
    (tmp_path / "calib.txt").write_text("x.raw\n")
    (tmp_path / "r.yaml").write_text("recipe: 1\nname: r\nmodel:\n  onnx: net.onnx\n"
                                     f"quantize:\n  input_list: calib.txt\n{quantize}")
    out, err = io.StringIO(), io.StringIO()
    code = main(["validate", str(tmp_path / "r.yaml")], stdout=out, stderr=err)
    assert code == 2 and field in out.getvalue() + err.getvalue()


def test_the_standalone_quantize_takes_block_settings_and_gives_the_recipes_bytes(
        tmp_path: Path) -> None:
    """`udo-build quantize --weights-block-size 32 --lpbq` is the recipe's quantize action: the
    same key, so the same quantized bundle and encodings (written writable, the bundle streamed
    from its parts); --lpbq without blocks is refused at its field, nothing written."""
    code, text = _build(_project(tmp_path), tmp_path)
    assert code == 0, text
    model = tmp_path / "out" / "model"
    base = ["quantize", str(model / "net.udb"), "--input-list", str(tmp_path / "calib.txt"),
            "--act-bitwidth", "16", "--weights-bitwidth", "4", "--report-inputs", "1",
            "--store", str(tmp_path / "store"), "--json"]
    out, err = io.StringIO(), io.StringIO()
    assert main([*base, "--lpbq", "--out", str(tmp_path / "bad.udb")], stdout=out,
                stderr=err) == 2
    assert "--lpbq: --lpbq needs blocks" in err.getvalue() and not list(tmp_path.glob("*.udb"))
    out, err = io.StringIO(), io.StringIO()
    code = main([*base, "--weights-block-size", "32", "--lpbq", "--out",
                 str(tmp_path / "q.udb")], stdout=out, stderr=err)
    assert code == 0, err.getvalue()
    assert json.loads(out.getvalue())["status"] == "cached"  # the recipe's action, its key
    assert (tmp_path / "q.udb").read_bytes() == (model / "net_quantized.udb").read_bytes()
    assert (tmp_path / "q.encodings.json").read_bytes() == \
        (model / "net_quantized.encodings.json").read_bytes()
    assert (tmp_path / "q.udb").stat().st_mode & 0o200  # the user's file: writable
