"""`udo-build validate` and `udo-build opdef show` through main(), and as a real process."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest

from udo_build.cli import main

from ..conftest import EXAMPLES, RECIPES

SOFTPLUS_XML = EXAMPLES / "softplus/ops/softplus.xml"


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err, env={})
    return code, out.getvalue(), err.getvalue()


def test_validate_ready_recipe_plain() -> None:
    code, out, err = cli("validate", str(RECIPES / "softplus.yaml"))
    assert (code, err) == (0, "")
    assert "recipe softplus-demo (" in out and "): valid" in out
    assert "CPU -> SoftplusPackage (2 ops), HTP -> SoftplusPackage (2 ops)" in out
    assert "prepare targets (32)" in out
    assert "sm8750  v79   8        3      input=4x3x32x32  layers=head" in out


def test_validate_ready_recipe_json() -> None:
    code, out, err = cli("validate", str(RECIPES / "softplus.yaml"), "--json")
    data = json.loads(out)
    assert (code, err, data["ok"], data["recipe"]) == (0, "", True, "softplus-demo")
    assert data["package"]["ops"] == ["Softplus", "Swish"]
    assert data["package"]["backends"] == {"CPU": "SoftplusPackage",
                                           "HTP": "SoftplusPackage"}
    assert len(data["targets"]) == 32
    assert data["targets"][0] == {
        "id": "sm8350/O2/input=1x3x32x32/tensors=logits/int8", "soc": "sm8350", "arch": "v68",
        "vtcm_mb": 4, "optimization_level": 2, "input_dimensions": {"input": [1, 3, 32, 32]},
        "outputs": {"tensors": ["logits"]}, "precision": "int8"}
    assert data["runs"][0]["name"] == "smoke"


def test_user_error_exit_code_2_without_traceback(project: Path) -> None:
    recipe = project / "r.yaml"
    recipe.write_text("recipe: 1\nname: x\nprepare:\n  matrix: {soc: [sm9999]}\n"
                      "model: {onnx: m.onnx}\n")
    code, out, err = cli("validate", str(recipe))
    assert code == 2 and out == ""
    assert "Traceback" not in err
    assert err.startswith(f"error: {recipe}:4:18: prepare.matrix.soc[0]: 'sm9999' is not a "
                          "known SoC; known: sm8350,")
    assert f"error: {recipe}:5:15: model.onnx: file not found: 'm.onnx'" in err
    code, out, err = cli("validate", str(recipe), "--json")
    data = json.loads(out)
    assert code == 2 and data["ok"] is False
    assert [(e["line"], e["field"]) for e in data["errors"]] == [
        (4, "prepare.matrix.soc[0]"), (5, "model.onnx")]


def test_unresolved_backend_in_recipe_takes_the_vendor_typing(project: Path) -> None:
    (project / "ops").mkdir()
    (project / "ops/a.xml").write_text(SOFTPLUS_XML.read_text().split(
        "<SupplementalOpDefList")[0] + "</OpDefCollection>\n")
    recipe = project / "r.yaml"
    recipe.write_text("recipe: 1\nname: x\npackage:\n  ops: [{config: ops/a.xml}]\n"
                      "  backends: [CPU]\n")
    code, out, err = cli("validate", str(recipe))
    assert code == 0, err
    assert [line.split(": ", 3)[-1] for line in err.splitlines() if "BACKEND_SPECIFIC" in line] \
        == ["op Softplus: BACKEND_SPECIFIC with no datatype for backend CPU; taken as the "
            "vendor's generators take it: 'x', 'y' FLOAT_32; to choose, give them a Datatype in "
            'a SupplementalOpDef for Softplus under <SupplementalOpDefList Backend="CPU">']


def test_missing_recipe_and_usage_errors() -> None:
    code, out, err = cli("validate", "/nonexistent/recipe.yaml")
    assert code == 2 and "error: /nonexistent/recipe.yaml: recipe not found" in err
    code, out, err = cli("frobnicate")
    assert code == 2
    code, out, err = cli()
    assert code == 2 and "validate" in out


def test_opdef_show_generic_and_resolved() -> None:
    code, out, err = cli("opdef", "show", str(SOFTPLUS_XML))
    assert (code, err) == (0, "")
    assert "package SoftplusPackage 1.0.0 (aisw)" in out
    assert "HTP: UFIXED_POINT_8, UFIXED_POINT_16, FLOAT_16, FLOAT_32 NHWC" in out
    code, out, err = cli("opdef", "show", str(SOFTPLUS_XML), "--backend", "htp", "--json")
    data = json.loads(out)
    (pkg,) = data["packages"]
    assert (code, pkg["name"], pkg["backend"]) == (0, "SoftplusPackage", "HTP")
    (op,) = pkg["ops"]
    assert op["inputs"][0]["datatypes"] == ["UFIXED_POINT_8", "UFIXED_POINT_16", "FLOAT_16",
                                            "FLOAT_32"]
    assert op["inputs"][0]["layout"] == "NHWC"
    assert op["parameters"][0]["default"] == {"kind": "scalar", "value": 1.0}


def test_console_script_runs_as_a_process() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "udo_build", "validate", str(RECIPES / "softplus.yaml"), "--json"],
        capture_output=True, text=True, check=False)
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["recipe"] == "softplus-demo"


def test_default_command_and_options_before_the_command(project: Path,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(project)
    code, out, err = cli("r.yaml", "--store", "store", "--json")  # 'store' is also a command
    assert code == 2 and "recipe not found" in err
    recipe = project / "r.yaml"
    recipe.write_text("recipe: 1\nname: tiny\n")
    store = str(project / "store")
    for argv in ([str(recipe), "--store", store, "--json"],
                 ["--store", store, str(recipe), "--json"],
                 ["--json", str(recipe), "--store", store],
                 ["-j", "1", "--store", store, "--json", str(recipe)]):
        code, out, err = cli(*argv)
        assert code == 0, (argv, err)
        assert json.loads(out)["recipe"] == "tiny"
    code, out, err = cli("--json", "validate", str(recipe))
    assert code == 0 and json.loads(out)["recipe"] == "tiny"
    code, out, err = cli("validate", "--bogus", str(recipe))
    assert code == 2 and "unrecognized arguments: --bogus" in err
