"""`udo-build prepare` (cli/prepare.py): a record from a bundle without a recipe, with the
trace of the rules that fired and why a rule did not match."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

import pytest

from udo_build.cli import prepare as prepare_cli
from udo_build.cli.reporter import Reporter
from udo_build.compiler import read_record
from udo_build.errors import UserError

from .helpers import SOFTPLUS, softplus_bundle


def run(*argv: str) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    prepare_cli.add_arguments(parser, argparse.ArgumentParser(add_help=False))
    out = io.StringIO()
    code = prepare_cli.run(parser.parse_args(argv), Reporter(out, io.StringIO(), "plain"))
    return code, out.getvalue()


def test_prepare_a_record_with_a_trace(tmp_path: Path) -> None:
    bundle, _ = softplus_bundle()
    (tmp_path / "net.udb").write_bytes(bundle.to_bytes())
    out = tmp_path / "net.udr"
    code, text = run(str(tmp_path / "net.udb"), "--soc", "sm8550", "--level", "2",
                     "--input-dims", "input=2,3,32,32", "--outputs", "layers=conv2",
                     "--kernels", str(SOFTPLUS / "ops" / "kernels.py"), "--out", str(out),
                     "--trace", "--why", "cancel_transposes")
    assert code == 0
    assert "cancel_transposes: fired 0x; did not match:" in text
    assert "expected Transpose, found SoftplusPackage::Softplus" in text
    record = read_record(out.read_bytes())
    assert record.key["arch"] == "v73" and record.key["output_tensors"] == ["conv2_out"]
    assert record.key["input_dimensions"] == {"input": [2, 3, 32, 32]}


@pytest.mark.parametrize("argv,message", [
    (("--soc", "sm7325"), "VTCM size is not public"),
    (("--arch", "v73"), "give --soc, or --arch and --vtcm-mb"),
    (("--soc", "sm8550", "--outputs", "heads=x"), "is not default, layers="),
])
def test_bad_arguments(tmp_path: Path, argv: tuple[str, ...], message: str) -> None:
    bundle, _ = softplus_bundle()
    (tmp_path / "net.udb").write_bytes(bundle.to_bytes())
    with pytest.raises(UserError, match=message):
        run(str(tmp_path / "net.udb"), *argv, "--out", str(tmp_path / "r.udr"))
