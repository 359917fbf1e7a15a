"""Standalone `run` and `prepare` agree with a recipe: `run --soc` executes a record (the
deployable bundle's, or one prepared in memory) on the integer path of a quantized bundle, with
the same numbers as the recipe's run; `prepare` takes the bundle's precision by default."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from udo_build.cli import main

from ..conftest import EXAMPLES

RECIPE = """recipe: 1
name: small
package:
  name: SoftplusPackage
  domain: aisw
  version: "1.0.0"
  ops:
    - {config: ex/ops/softplus.xml, kernels: ex/ops/kernels.py}
    - {config: ex/ops/swish.json, kernels: ex/ops/kernels.py}
  backends: [CPU]
model: {onnx: ex/model/net.onnx}
quantize: {input_list: ex/data/calib.txt, quantizer: tf}
prepare:
  matrix: {soc: [sm8550], outputs: [{tensors: [logits]}]}
run:
  - {name: smoke, soc: sm8550, input_list: ex/data/test.txt, outputs: {tensors: [logits]}}
"""
KERNELS = ["--kernels", str(EXAMPLES / "softplus/ops/kernels.py")]
TEST_LIST = str(EXAMPLES / "softplus/data/test.txt")


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err, env={})
    return code, out.getvalue(), err.getvalue()


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("small")
    (root / ".udo-build-root").write_text("")
    shutil.copytree(EXAMPLES / "softplus", root / "ex")
    (root / "r.yaml").write_text(RECIPE)
    code, _, err = cli("build", str(root / "r.yaml"), "--store", str(root / "store"),
                       "--out", str(root / "out"), "--no-remote")
    assert code == 0, err
    return root


def results(folder: Path) -> list[bytes]:
    return [(folder / f"Result_{i}/logits.raw").read_bytes() for i in range(4)]


def run_json(*argv: str) -> dict:
    code, out, err = cli("run", *argv, "--json")
    assert code == 0, err
    return json.loads(out)


def test_run_on_the_deployable_record_equals_the_recipe_run(built: Path) -> None:
    deploy = built / "out/model/net_deploy.udb"
    report = run_json(str(deploy), "--input-list", TEST_LIST, "--output-dir",
                      str(built / "r1"), "--soc", "sm8550", "--outputs", "logits", *KERNELS)
    assert report["record"] == "softplus_net/v73/8MB/O2/input=1x3x32x32/logits/int8"
    assert report["online_prepare"] is False
    assert results(built / "r1") == results(built / "out/runs/smoke")


def test_run_prepares_the_integer_record_of_a_quantized_bundle(built: Path) -> None:
    quantized = built / "out/model/net_quantized.udb"
    report = run_json(str(quantized), "--input-list", TEST_LIST, "--output-dir",
                      str(built / "r2"), "--soc", "sm8550", "--precision", "int8",
                      "--optimization-level", "2", "--outputs", "logits", *KERNELS)
    assert report["online_prepare"] is True and report["record"] is None
    assert results(built / "r2") == results(built / "out/runs/smoke")
    # the float runtime (no --soc) gives other numbers: the integer path ran above
    run_json(str(quantized), "--input-list", TEST_LIST, "--output-dir", str(built / "r3"),
             "--outputs", "logits", *KERNELS)
    assert results(built / "r3") != results(built / "r2")


def test_run_at_other_input_dims(built: Path, tmp_path: Path) -> None:
    rng = np.random.default_rng(1)
    np.save(tmp_path / "b2.npy", rng.standard_normal((2, 3, 32, 32)).astype("float32"))
    (tmp_path / "b2.txt").write_text("b2.npy\n")
    quantized = str(built / "out/model/net_quantized.udb")
    for extra in ([], ["--soc", "sm8650"]):
        run_json(quantized, "--input-list", str(tmp_path / "b2.txt"), "--output-dir",
                 str(tmp_path / f"o{len(extra)}"), "--input-dims", "input=2,3,32,32",
                 *extra, *KERNELS)
        assert np.load(tmp_path / f"o{len(extra)}/Result_0/logits.npy").shape == (2, 10)


def test_run_refuses_bad_options(built: Path) -> None:
    bundle = str(built / "out/model/net_quantized.udb")
    base = ["run", bundle, "--input-list", TEST_LIST, "--output-dir", str(built / "bad"),
            *KERNELS]
    code, _, err = cli(*base, "--soc", "sm0000")
    assert code == 2 and "--soc sm0000 is not a known SoC; SoCs with a known VTCM size: " in err
    assert "sm8550" in err
    code, _, err = cli(*base, "--soc", "sm8550", "--input-dims", "image=1,3,32,32")
    assert code == 2 and "--input-dims names 'image', which is not an input" in err
    code, _, err = cli(*base, "--soc", "sm8550", "--input-dims", "input=1,3,32")
    assert code == 2 and "the input has rank 4, these dimensions have 3" in err
    code, _, err = cli(*base, "--precision", "int8")
    assert code == 2 and "give --soc too" in err
    assert not (built / "bad").exists()


def test_prepare_defaults_to_the_bundles_precision(built: Path) -> None:
    for name, precision in (("net_quantized", "int8"), ("net", "fp16")):
        code, out, err = cli("prepare", str(built / f"out/model/{name}.udb"), "--soc", "sm8550",
                             "--out", str(built / f"{name}.udr"), "--json", *KERNELS)
        assert code == 0, err
        assert json.loads(out)["key"]["precision"] == precision


@pytest.mark.parametrize("soc", [[], ["--soc", "sm8550"]])
def test_run_gives_the_same_files_on_any_number_of_workers(built: Path, soc: list[str],
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """The four inferences in this process, and over two and three workers: the same bytes."""
    from udo_build.runtime import pool

    quantized = str(built / "out/model/net_quantized.udb")
    found = []
    for cores in (1, 2, 3):
        monkeypatch.setattr(pool, "available_cores", lambda cores=cores: cores)
        out = built / f"w{cores}{len(soc)}"
        run_json(quantized, "--input-list", TEST_LIST, "--output-dir", str(out),
                 "--outputs", "logits", *soc, *KERNELS)
        found.append(results(out))
    assert found[0] == found[1] == found[2]
