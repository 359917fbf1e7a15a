"""The vendor tools' forms of the options udo-build has, through `udo_build.cli.main`: the
converters' multi-value `--udo_config_paths A B` (and the option repeated), `-udo`, `-opc`,
`-i`, `-o`, `-d NAME DIMS`; the package generators' `-p`, `-o`. Each gives what udo-build's own
spelling gives, byte for byte."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from udo_build.cli import main

DATA = Path(__file__).parents[1] / "package/data"
TWO = DATA / "two_packages.json"  # ActivationPackage (HardSwish), ClampPackage (ClampMin)
SOFTPLUS = Path(__file__).parents[2] / "examples/softplus/ops/softplus.xml"


def cli(*argv: str | Path) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main([str(a) for a in argv], stdout=out, stderr=err, env={})
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def model(tmp_path: Path) -> Path:
    """A model using ClampPackage's ClampMin and SoftplusPackage's Softplus, input x of [1, 4]."""
    import onnx
    from onnx import TensorProto, helper

    nodes = [helper.make_node("ClampMin", ["x"], ["c"], domain="ClampPackage", name="clamp"),
             helper.make_node("Softplus", ["c"], ["y"], domain="aisw", name="softplus")]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, ["n", 4])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, ["n", 4])])
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph, opset_imports=[
        helper.make_opsetid("", 17), helper.make_opsetid("ClampPackage", 1),
        helper.make_opsetid("aisw", 1)]), path)
    return path


def _converted(tmp_path: Path, out: str, *argv: str | Path) -> bytes:
    """The bundle `convert ARGV OUT <file>` writes (OUT: the output option's spelling)."""
    path = tmp_path / f"{len(list(tmp_path.glob('*.udb')))}.udb"
    code, _, err = cli("convert", *argv, out, path)
    assert code == 0, err
    return path.read_bytes()


def test_converter_forms_give_udo_builds_own_bundle(tmp_path: Path, model: Path) -> None:
    own = _converted(tmp_path, "--out", model, "--opdef", TWO, "--opdef", SOFTPLUS,
                     "--input-dims", "x=2,4")
    assert _converted(tmp_path, "-o", "-i", model, "--udo_config_paths", TWO, SOFTPLUS,
                      "-d", "x", "2,4") == own
    assert _converted(tmp_path, "--output_path", model, "-udo", TWO, "-opc", SOFTPLUS,
                      "--input_dim", "x", "2,4") == own
    assert _converted(tmp_path, "-o", "--input_network", model, "--op_package_config", TWO,
                      "--udo_config_paths", SOFTPLUS, "--input-dims", "x=2,4") == own
    code, out, _ = cli("info", tmp_path / "1.udb", "--json")
    assert json.loads(out)["udos"] == ["ClampPackage::ClampMin", "SoftplusPackage::Softplus"]


def test_a_model_after_the_config_paths_is_named_in_the_error(tmp_path: Path,
                                                               model: Path) -> None:
    code, out, err = cli("convert", "--udo_config_paths", TWO, model, "--out", tmp_path / "x.udb")
    assert (code, out) == (2, "")
    assert err.splitlines() == [
        f"error: no model given; {model} was read as an op config: --opdef/--udo_config_paths "
        "take every value that follows; put the model first, or name it with -i"]
    code, _, err = cli("convert", model, "-i", model, "--out", tmp_path / "x.udb")
    assert code == 2 and "the model is given twice" in err
    code, _, err = cli("convert", model, "-d", "x", "--out", tmp_path / "x.udb")
    assert code == 2 and "expected 2 arguments" in err


def test_package_generator_forms(tmp_path: Path) -> None:
    code, out, err = cli("package", "-p", TWO, SOFTPLUS, "--backend", "CPU", "-o",
                         tmp_path / "out", "--store", tmp_path / "store", "--json")
    assert code == 0, err
    assert sorted(p["package"] for p in json.loads(out)["packages"]) == [
        "ActivationPackage", "ClampPackage", "SoftplusPackage"]
    code, _, err = cli("package", "--backend", "CPU", "-o", tmp_path / "out")
    assert code == 2 and "no op config given" in err
