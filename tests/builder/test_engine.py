"""The incremental engine through `udo-build build --json`: exactly the stale actions run."""

from __future__ import annotations

import io
import json
import os
import shutil
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from udo_build.cli import main

from ..conftest import EXAMPLES
from .fakes import FAIL, fake_kinds

RECIPE = """\
recipe: 1
name: demo
package:
  name: SoftplusPackage
  ops:
    - {config: ex/ops/softplus.xml, kernels: ex/ops/kernels.py}
    - {config: ex/ops/swish.json, kernels: ex/ops/kernels.py}
  backends: [CPU, HTP]
model: {onnx: ex/model/net.onnx}
quantize: {input_list: ex/data/calib.txt}
prepare:
  matrix:
    soc: [SOCS]
    optimization_level: [2]
run:
  - {name: smoke, soc: sm8550, input_list: ex/data/test.txt}
"""


class Project:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.recipe = root / "recipe.yaml"
        self.store = root / "store"
        self.out = root / "out"
        shutil.copytree(EXAMPLES / "softplus", root / "ex",
                        ignore=shutil.ignore_patterns("make_example.py"))
        (root / ".udo-build-root").write_text("")
        self.write(["sm8550"])

    def write(self, socs: list[str], text: str = RECIPE) -> None:
        self.recipe.write_text(text.replace("SOCS", ", ".join(socs)))

    def build(self, *extra: str, code: int = 0) -> dict[str, Any]:
        out, err = io.StringIO(), io.StringIO()
        got = main(["build", str(self.recipe), "--store", str(self.store), "--out",
                    str(self.out), "-j", "1", "--json", *extra], stdout=out, stderr=err, env={})
        assert got == code, err.getvalue()
        return json.loads(out.getvalue())


def executed(summary: dict[str, Any]) -> list[str]:
    return [a["id"] for a in summary["actions"] if a["status"] == "built"]


@pytest.fixture
def project(tmp_path: Path) -> Iterator[Project]:
    with fake_kinds():
        yield Project(tmp_path)


def test_cold_then_noop(project: Project) -> None:
    first = project.build()
    assert executed(first) == [
        "opdef", "package:CPU", "package:HTP", "convert", "quantize", "outputs:int8",
        "prepare:sm8550/O2/native/default/int8", "assemble", "run:smoke"]
    assert (first["executed"], first["cached"], first["failed"]) == (9, 0, 0)
    again = project.build()
    assert (again["executed"], again["cached"], again["hit_rate"]) == (0, 9, 1.0)
    assert [a["key"] for a in again["actions"]] == [a["key"] for a in first["actions"]]


def test_touching_without_changing_bytes_runs_nothing(project: Project) -> None:
    project.build()
    later = time.time() + 5
    for path in (project.root / "ex").rglob("*"):
        if path.is_file():
            os.utime(path, (later, later))
    os.utime(project.recipe, (later, later))
    assert project.build()["executed"] == 0


def test_comments_and_key_order_in_the_recipe_change_nothing(project: Project) -> None:
    project.build()
    text = project.recipe.read_text().replace("recipe: 1\nname: demo\n",
                                              "# a comment\nname: demo   # here too\nrecipe: 1\n")
    project.recipe.write_text(text)
    assert project.build()["executed"] == 0


def test_calibration_data_reruns_quantize_and_downstream_only(project: Project) -> None:
    project.build()
    calib = project.root / "ex/data/calib/input_03.raw"
    data = np.fromfile(calib, "<f4")
    (data * 3).astype("<f4").tofile(calib)  # wider activations: other encodings
    assert executed(project.build()) == [
        "quantize", "outputs:int8", "prepare:sm8550/O2/native/default/int8", "assemble",
        "run:smoke"]


def test_a_calibration_change_that_keeps_the_encodings_stops_at_quantize(project: Project
                                                                          ) -> None:
    project.build()
    calib = project.root / "ex/data/calib/input_03.raw"
    data = bytearray(calib.read_bytes())
    data[0] ^= 1  # the last bit of one value: the encodings come out the same
    calib.write_bytes(bytes(data))
    assert executed(project.build()) == ["quantize"]


def test_renaming_the_input_list_reruns_nothing(project: Project) -> None:
    project.build()
    os.rename(project.root / "ex/data/calib.txt", project.root / "ex/data/calibration.txt")
    project.recipe.write_text(project.recipe.read_text().replace("calib.txt",
                                                                 "calibration.txt"))
    assert project.build()["executed"] == 0


def test_adding_a_soc_runs_its_prepare_then_assemble_and_runs(project: Project) -> None:
    project.build()
    project.write(["sm8550", "ssg2115p"])  # v73 like sm8550, with 2 MB of VTCM
    assert executed(project.build()) == [
        "prepare:ssg2115p/O2/native/default/int8", "assemble", "run:smoke"]


def test_a_soc_of_a_new_arch_also_regenerates_the_htp_package(project: Project) -> None:
    project.build()
    project.write(["sm8550", "sm8650"])  # v75: the HTP package gains a build target
    assert executed(project.build()) == [
        "package:HTP", "prepare:sm8650/O2/native/default/int8", "assemble", "run:smoke"]


def test_socs_with_equal_arch_and_vtcm_share_one_record(project: Project) -> None:
    project.write(["sm8450", "sm8475", "sxr2230p"])  # all v69 with 8 MB
    summary = project.build()
    prepares = [a for a in summary["actions"] if a["kind"] == "prepare"]
    assert len({a["key"] for a in prepares}) == 1
    assert Counter(a["status"] for a in prepares) == {"built": 1, "cached": 2}


def test_editing_an_op_config_reruns_its_chain_and_reverting_is_cached(project: Project) -> None:
    project.build()
    xml = project.root / "ex/ops/softplus.xml"
    original = xml.read_text()
    xml.write_text(original.replace("<Default>1.0</Default>", "<Default>2.0</Default>"))
    assert executed(project.build()) == [
        "opdef", "package:CPU", "package:HTP", "convert", "quantize", "outputs:int8",
        "prepare:sm8550/O2/native/default/int8", "assemble", "run:smoke"]
    xml.write_text(original)
    assert project.build()["executed"] == 0


def test_an_unchanged_output_stops_the_rebuild_early(project: Project) -> None:
    project.build()
    xml = project.root / "ex/ops/softplus.xml"
    xml.write_text(xml.read_text().replace("<!-- Softplus:", "<!-- edited. Softplus:"))
    # the packages copy the config; the model steps see equal definitions and stay cached
    assert executed(project.build()) == ["opdef", "package:CPU", "package:HTP"]


def test_changing_a_kernel_reruns_what_uses_it(project: Project) -> None:
    project.build()
    kernels = project.root / "ex/ops/kernels.py"
    kernels.write_text(kernels.read_text() + "\n# tuned\n")
    assert executed(project.build()) == []  # a comment: the kernels key by their code
    kernels.write_text(kernels.read_text() + "\nTUNED = True\n")
    # calibration and prepare (which the kernels' rules may change) rerun, make the same bytes:
    # the assembled bundle stays cached
    assert executed(project.build()) == [
        "quantize", "prepare:sm8550/O2/native/default/int8", "run:smoke"]
    kernels.write_text(kernels.read_text().replace("/ beta).astype", "/ (2 * beta)).astype"))
    assert executed(project.build()) == [
        "quantize", "outputs:int8", "prepare:sm8550/O2/native/default/int8", "assemble",
        "run:smoke"]


def test_a_failure_stops_the_build_and_poisons_nothing(project: Project) -> None:
    kernels = project.root / "ex/ops/kernels.py"
    good = kernels.read_text()
    kernels.write_text(good.replace('    """x * sigmoid(beta * x)."""',
                                    '    """x * sigmoid(beta * x)."""\n'
                                    '    raise ValueError("not tuned yet")'))
    failed = project.build(code=1)  # calibration runs the user's kernel: their step fails
    status = {a["id"]: a["status"] for a in failed["actions"]}
    assert status["quantize"] == "failed" and status["convert"] == "built"
    assert status["run:smoke"] == "skipped"
    quantize = next(a for a in failed["actions"] if a["id"] == "quantize")
    calib = project.root / "ex/data/calib.txt"
    assert quantize["error"] == [{"message": f"run: calibration input 0 (line 1 of {calib}): "
                                             "SoftplusPackage::Swish (node swish1) raised "
                                             "ValueError: not tuned yet"}]
    kernels.write_text(good)
    fixed = project.build()
    assert executed(fixed) == ["quantize", "outputs:int8",
                               "prepare:sm8550/O2/native/default/int8", "assemble", "run:smoke"]


def test_fail_fast_and_keep_going(project: Project) -> None:
    # the package and convert kinds are real (no failure injection): fail a stand-in prepare
    project.write(["sm8550", "sm8650"])
    FAIL.add("prepare:arch=v73")
    stopped = project.build(code=1)
    status = {a["id"]: a["status"] for a in stopped["actions"]}
    assert status["prepare:sm8550/O2/native/default/int8"] == "failed"
    assert status["prepare:sm8650/O2/native/default/int8"] == "skipped"
    going = project.build("--keep-going", code=1)
    status = {a["id"]: a["status"] for a in going["actions"]}
    assert status["prepare:sm8550/O2/native/default/int8"] == "failed"
    assert status["prepare:sm8650/O2/native/default/int8"] == "built"
    assert status["assemble"] == "skipped" and status["run:smoke"] == "skipped"


def test_dry_run_runs_and_writes_nothing(project: Project) -> None:
    dry = project.build("--dry-run")
    assert dry["executed"] == 0 and dry["dry_run"] is True
    assert [a["id"] for a in dry["actions"] if a["would_run"]] == [
        a["id"] for a in dry["actions"]]
    assert not project.out.exists()
    assert not (project.store / "history").exists()


def test_selected_actions_build_with_what_they_need(project: Project) -> None:
    summary = project.build("convert")
    assert executed(summary) == ["opdef", "convert"]
    # quantize, the outputs it holds and the prepare
    assert project.build("prepare:*")["executed"] == 3
    out, err = io.StringIO(), io.StringIO()
    assert main(["build", str(project.recipe), "nothing:*", "--store", str(project.store)],
                stdout=out, stderr=err, env={}) == 2
    assert "no action matches 'nothing:*'" in err.getvalue()


def test_a_corrupt_input_blob_makes_its_producer_run_again(project: Project) -> None:
    first = project.build()
    convert = next(a for a in first["actions"] if a["id"] == "convert")
    entry = json.loads((project.store / "ac" / convert["key"][:2] /
                        f"{convert['key']}.json").read_text())
    digest = entry["outputs"]["bundle"]["digest"]
    blob = next((project.store / "cas" / digest[:2]).glob(f"{digest}*"))
    blob.chmod(0o644)
    blob.write_bytes(b"tampered")
    kernels = project.root / "ex/ops/kernels.py"  # quantize must run, and reads the bundle
    kernels.write_text(kernels.read_text() + "\nTUNED = True\n")
    summary = project.build()
    assert executed(summary) == ["convert", "quantize", "prepare:sm8550/O2/native/default/int8",
                                 "run:smoke"]
    assert len(list((project.store / "quarantine").iterdir())) == 1


def test_the_output_folder_follows_the_recipe(project: Project) -> None:
    project.build()
    files = sorted(str(p.relative_to(project.out)) for p in project.out.rglob("*")
                   if p.is_file())
    assert files == [
        ".udo-build-lock", ".udo-build-manifest.json", "model/net.udb", "model/net_deploy.udb",
        "model/net_quantized.encodings.json", "model/net_quantized.udb",
        "opdef/CPU/SoftplusPackage.json", "opdef/HTP/SoftplusPackage.json",
        "opdef/SoftplusPackage.json",
        *(f"packages/CPU/SoftplusPackage/{f}" for f in (
            "Makefile", "config/softplus.xml", "config/swish.json",
            "include/SoftplusPackage.hpp", "makefiles/Makefile.android-aarch64",
            "makefiles/Makefile.linux-x86_64", "package.json",
            "src/SoftplusPackageInterface.cpp", "src/ops/Softplus.cpp", "src/ops/Swish.cpp")),
        *(f"packages/HTP/SoftplusPackage/{f}" for f in (
            "Makefile", "config/softplus.xml", "config/swish.json",
            "include/SoftplusPackage.hpp", "package.json",
            "src/SoftplusPackageInterface.cpp", "src/ops/Softplus.cpp", "src/ops/Swish.cpp")),
        "quant/layers.json",
        *(f"runs/smoke/{f}" for f in (
            "Result_0/logits.npy", "Result_0/logits.raw", "Result_1/logits.npy",
            "Result_1/logits.raw", "Result_2/logits.npy", "Result_2/logits.raw",
            "Result_3/logits.npy", "Result_3/logits.raw", "report.json"))]
    (project.out / "notes.txt").write_text("mine")
    project.recipe.write_text(project.recipe.read_text().replace("[CPU, HTP]", "[HTP]"))
    project.build()
    assert not (project.out / "packages/CPU").exists()
    assert not (project.out / "opdef/CPU").exists()
    assert (project.out / "notes.txt").read_text() == "mine"
    assert (project.out / "packages/HTP/SoftplusPackage/Makefile").exists()


def test_parallel_workers_build_the_same(project: Project) -> None:
    serial = project.build()
    shutil.rmtree(project.store)
    out, err = io.StringIO(), io.StringIO()
    code = main(["build", str(project.recipe), "--store", str(project.store), "--out",
                 str(project.out), "-j", "2", "--json"], stdout=out, stderr=err, env={})
    assert code == 0, err.getvalue()
    parallel = json.loads(out.getvalue())
    assert parallel["executed"] == 9
    assert [a["key"] for a in parallel["actions"]] == [a["key"] for a in serial["actions"]]


def test_an_error_raised_while_a_ctrl_c_unwinds_is_the_interrupt() -> None:
    """A file closed under an action by Ctrl-C's unwinding (EBADF in a `finally`) is the
    interrupt (exit 130), not a bug of udo-build (exit 3)."""
    from udo_build.errors import during_interrupt

    def unwinding() -> None:
        try:
            raise KeyboardInterrupt
        finally:
            raise OSError(9, "Bad file descriptor")

    try:
        unwinding()
    except OSError as exc:
        assert during_interrupt(exc)
    assert not during_interrupt(OSError(9, "Bad file descriptor"))
    try:
        try:
            raise ValueError("a real bug")
        except ValueError as inner:
            raise OSError(5, "I/O error") from inner
    except OSError as exc:
        assert not during_interrupt(exc)
