"""The SNPE input_list format and loading its tensors."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from udo_build.errors import UserError
from udo_build.ir import TensorInfo
from udo_build.model.input_list import feeds, parse_input_list


def test_header_lines_names_and_hash_in_paths(tmp_path: Path) -> None:
    (tmp_path / "d#1").mkdir()
    for name in ("a.raw", "b.raw", "d#1/c.raw"):
        (tmp_path / name).write_bytes(np.zeros(4, "<f4").tobytes())
    listing = tmp_path / "list.txt"
    listing.write_text("#layer1 layer2\n%out1\n\na.raw\nx:=b.raw y:=d#1/c.raw\n")
    parsed = parse_input_list(listing)
    assert (parsed.output_layers, parsed.output_tensors) == (("layer1", "layer2"), ("out1",))
    assert [[(e.name, e.path.name, e.line) for e in inf] for inf in parsed.inferences] == [
        [(None, "a.raw", 4)], [("x", "b.raw", 5), ("y", "c.raw", 5)]]


def test_missing_files_and_escapes(tmp_path: Path) -> None:
    (tmp_path / "p").mkdir()
    listing = tmp_path / "p" / "list.txt"
    listing.write_text("nope.raw\n../outside.raw\n")
    (tmp_path / "outside.raw").write_bytes(b"")
    with pytest.raises(UserError) as info:
        parse_input_list(listing, root=tmp_path / "p")
    assert [(p.line, p.message.split(" (")[0]) for p in info.value.problems] == [
        (1, "input file not found: 'nope.raw'"),
        (2, f"'../outside.raw' leads outside the project folder {tmp_path / 'p'}")]


def test_raw_sizes_are_checked_with_the_shape_they_imply(tmp_path: Path) -> None:
    (tmp_path / "x.raw").write_bytes(np.arange(6, dtype="<f4").tobytes())
    (tmp_path / "y.npy").write_bytes(b"")
    np.save(tmp_path / "y.npy", np.ones((2, 3), "float32"))
    listing = tmp_path / "l.txt"
    listing.write_text("x.raw\ny.npy\n")
    inputs = [TensorInfo("in", "float32", (2, 3))]
    got = list(feeds(parse_input_list(listing), inputs))
    np.testing.assert_array_equal(got[0]["in"], np.arange(6, dtype="float32").reshape(2, 3))
    np.testing.assert_array_equal(got[1]["in"], np.ones((2, 3)))
    with pytest.raises(UserError) as info:
        list(feeds(parse_input_list(listing), [TensorInfo("in", "float32", (1, 3, 4))]))
    assert info.value.problem.message == (
        "input 'in': expected 48 bytes (float32 [1, 3, 4]), found 24 bytes (6 float32 values)")


def test_names_must_match_the_model(tmp_path: Path) -> None:
    (tmp_path / "a.raw").write_bytes(np.zeros(2, "<f4").tobytes())
    listing = tmp_path / "l.txt"
    listing.write_text("bad:=a.raw\n")
    with pytest.raises(UserError) as info:
        list(feeds(parse_input_list(listing), [TensorInfo("in", "float32", (2,))]))
    assert (info.value.problem.line, info.value.problem.message) == (
        1, "'bad' does not name a model input")


def test_files_are_read_at_the_dimensions_a_run_gives(tmp_path: Path) -> None:
    (tmp_path / "x.raw").write_bytes(np.arange(8, dtype="<f4").tobytes())
    listing = tmp_path / "l.txt"
    listing.write_text("x.raw\n")
    inputs = [TensorInfo("in", "float32", (1, 4))]
    got = list(feeds(parse_input_list(listing), inputs, {"in": [2, 4]}))
    assert got[0]["in"].shape == (2, 4)
    with pytest.raises(UserError):  # at the model's own dimensions the file is too long
        list(feeds(parse_input_list(listing), inputs))
