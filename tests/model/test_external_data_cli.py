"""`udo-build convert` on a model with external data writes the bundle as a stream: the bytes of
the same model converted in memory, without ever holding the bundle's bytes whole."""

from __future__ import annotations

import io
from pathlib import Path

import pytest

from udo_build.cli import main
from udo_build.ir.bundle import Bundle

from .test_external_data import convert, saved


def test_convert_streams_a_model_with_external_data_to_its_bundle(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = saved(tmp_path / "model")
    want = convert(path).with_parts(meta={"producer": "udo-build convert 1"}).to_bytes()

    def whole(self: Bundle) -> bytes:
        raise AssertionError("the bundle was made whole in memory")

    monkeypatch.setattr(Bundle, "to_bytes", whole)
    out, err = io.StringIO(), io.StringIO()
    code = main(["convert", str(path), "--out", str(tmp_path / "net.udb")], stdout=out,
                stderr=err, env={})
    assert code == 0, err.getvalue()
    assert (tmp_path / "net.udb").read_bytes() == want
