"""`udo-build quantize BUNDLE --input-list LIST ... --out Q.udb`: the recipe's quantize action
run without a recipe, through the store; the same settings give the recipe's bytes."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import pytest

from udo_build.cli import build_parser, main

EXAMPLE = Path(__file__).parents[2] / "examples" / "softplus"
RECIPE = """\
recipe: 1
name: q
package:
  name: SoftplusPackage
  ops:
    - {config: ops/softplus.xml, kernels: ops/kernels.py}
    - {config: ops/swish.json, kernels: ops/kernels.py}
  backends: [CPU]
model:
  onnx: model/net.onnx
quantize:
  input_list: data/calib.txt
  act_bitwidth: 16
  per_channel: true
  quantizer: enhanced
"""


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    return main(list(argv), stdout=out, stderr=err), out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A project like examples/softplus (four calibration inputs), its recipe built."""
    root = tmp_path_factory.mktemp("project")
    (root / ".udo-build-root").touch()
    for folder in ("model", "ops"):
        shutil.copytree(EXAMPLE / folder, root / folder)
    (root / "data" / "calib").mkdir(parents=True)
    for k in range(4):
        shutil.copy(EXAMPLE / "data" / "calib" / f"input_{k:02d}.raw", root / "data" / "calib")
    (root / "data" / "calib.txt").write_text(
        "".join(f"calib/input_{k:02d}.raw\n" for k in range(4)))
    (root / "q.yaml").write_text(RECIPE)
    code, _, err = cli("build", str(root / "q.yaml"), "--store", str(root / "store"),
                       "--out", str(root / "out"))
    assert code == 0, err
    return root


def _quantize(root: Path, *argv: str) -> tuple[int, str, str]:
    return cli("quantize", *argv, "--input_list", str(root / "data" / "calib.txt"),
               "--kernels", str(root / "ops" / "kernels.py"), "--json")


def test_the_command_gives_the_recipes_bytes_and_shares_its_store(built: Path,
                                                                  tmp_path: Path) -> None:
    float_bundle = str(built / "out" / "model" / "net.udb")
    recipe_q = built / "out" / "model" / "net_quantized.udb"
    settings = ("--act_bitwidth", "16", "--use_per_channel_quantization",
                "--use_enhanced_quantizer")
    code, out, err = _quantize(built, "--input_dlc", float_bundle, *settings, "--store",
                               str(tmp_path / "store"), "--output_dlc", str(tmp_path / "q.udb"))
    assert code == 0, err
    report = json.loads(out)
    assert report["status"] == "built" and report["encodings"].endswith("q.encodings.json")
    assert (tmp_path / "q.udb").read_bytes() == recipe_q.read_bytes()
    assert (tmp_path / "q.encodings.json").read_bytes() == (
        built / "out" / "model" / "net_quantized.encodings.json").read_bytes()
    # the recipe's store already holds this action: the same key
    code, out, err = _quantize(built, float_bundle, *settings, "--store",
                               str(built / "store"), "--out", str(tmp_path / "again.udb"))
    assert code == 0 and json.loads(out)["status"] == "cached", err
    assert (tmp_path / "again.udb").read_bytes() == recipe_q.read_bytes()
    # another setting, other bytes
    code, out, err = _quantize(built, float_bundle, "--per-channel", "--act-bitwidth", "16",
                               "--store", str(tmp_path / "store"),
                               "--out", str(tmp_path / "tf.udb"))
    assert code == 0 and json.loads(out)["settings"]["quantizer"] == "tf", err
    assert (tmp_path / "tf.udb").read_bytes() != recipe_q.read_bytes()


def test_without_out_the_vendor_default_name_beside_the_bundle(built: Path,
                                                               tmp_path: Path) -> None:
    shutil.copy(built / "out" / "model" / "net.udb", tmp_path / "net.udb")
    code, _, err = _quantize(built, str(tmp_path / "net.udb"), "--store", str(built / "store"))
    assert code == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "net.udb", "net_quantized.encodings.json", "net_quantized.udb"]


@pytest.mark.parametrize(("argv", "expected"), [
    (["nope.udb"], "nope.udb: BUNDLE: no such bundle"),
    (["{q}"], "BUNDLE: the bundle is already quantized"),
    (["{f}", "--out", "q.bin"], "--out: the quantized bundle's name ends in .bin"),
    (["{f}", "--float-fallback"], "--float-fallback: --float-fallback keeps only the override"),
    (["{f}", "--override-encodings", "none.json"], "none.json: --override-encodings: no such"),
    (["{f}", "--input_list", "{bad}"], "bad.txt:1: input file not found: 'missing.raw'"),
    (["{f}", "--out", "{f}"], "net.udb: --out: --out names the float bundle being quantized"),
    (["{f}", "--out", "{bad}/../no/q.udb"], "no: --out: the folder to write the quantized"),
])
def test_errors_name_the_file_and_the_field(built: Path, tmp_path: Path, argv: list[str],
                                           expected: str) -> None:
    (tmp_path / "bad.txt").write_text("missing.raw\n")
    names = {"q": built / "out" / "model" / "net_quantized.udb", "bad": tmp_path / "bad.txt",
             "f": built / "out" / "model" / "net.udb"}
    argv = [a.format(**names) for a in argv]
    code, _, err = cli("quantize", *argv[:1], "--input_list",
                       str(built / "data" / "calib.txt"), *argv[1:],
                       "--store", str(tmp_path / "store"))
    assert code == 2 and expected in err, err
    assert not list(tmp_path.glob("*.udb"))


def test_custom_ops_need_their_kernels_and_an_unwritten_one_fails_the_step(
        built: Path, tmp_path: Path) -> None:
    float_bundle = str(built / "out" / "model" / "net.udb")
    code, _, err = cli("quantize", float_bundle, "--input-list",
                       str(built / "data" / "calib.txt"), "--store", str(tmp_path / "store"),
                       "--out", str(tmp_path / "q.udb"))
    assert code == 2 and "uses custom ops Softplus, Swish" in err and "--kernels" in err
    stub = tmp_path / "stub_kernels.py"
    stub.write_bytes(_stub(built / "ops"))
    code, _, err = cli("quantize", float_bundle, "--input-list",
                       str(built / "data" / "calib.txt"), "--kernels", str(stub),
                       "--store", str(tmp_path / "store"), "--out", str(tmp_path / "q.udb"))
    assert code == 1, err
    assert "kernel not written: Softplus in " in err and "stub_kernels.py: write its" in err
    assert not (tmp_path / "q.udb").exists()


def test_vendor_spellings_reach_the_same_settings() -> None:
    vendor = build_parser(["quantize"]).parse_args([
        "quantize", "--input_dlc", "b.udb", "--input_list", "l.txt", "--output_dlc", "q.udb",
        "--act_bw", "16", "--weights_bitwidth", "4", "--bias_bitwidth", "8", "--axis_quant",
        "--act_quantizer", "symmetric", "--quantization_overrides", "o.json",
        "--float_fallback"])
    ours = build_parser(["quantize"]).parse_args([
        "quantize", "--input-list", "l.txt", "--out", "q.udb", "--act-bitwidth", "16",
        "--weights-bitwidth", "4", "--bias-bitwidth", "8", "--per-channel", "--quantizer",
        "symmetric", "--override-encodings", "o.json", "--float-fallback"])
    fields = ("input_list", "out", "act_bitwidth", "weights_bitwidth", "bias_bitwidth",
              "per_channel", "quantizer", "override_encodings", "float_fallback")
    assert [getattr(vendor, f) for f in fields] == [getattr(ours, f) for f in fields]
    assert (vendor.input_dlc, ours.bundle) == ("b.udb", None)


def _stub(ops: Path) -> bytes:
    """The kernels stub the package generator (and init) writes for the example's two ops."""
    from udo_build.errors import Diagnostics
    from udo_build.opdef import load_config
    from udo_build.package.generate import kernels_stub
    from udo_build.package.stub import stub_ops

    loaded = [(op, path.name) for path in (ops / "softplus.xml", ops / "swish.json")
              for package in load_config(path, Diagnostics()) for op in package.ops]
    return kernels_stub("SoftplusPackage", stub_ops(loaded))
