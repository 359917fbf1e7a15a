"""The build checks the C++ op bodies against the numpy kernels (`package.native_check`): the
shipped example (recipes/softplus-cpu.yaml, examples/softplus/cpu/ops/Softplus.cpp) agrees; a
body edited wrongly fails the build (exit 1) naming the op, the node, the input and the worst
element, and reruns nothing but the check; the tolerance is the recipe's; a compile error names
the user's file; the report page shows the comparison; the comparison itself (pure) on NaN,
infinities and the worst element."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from udo_build.cli import main
from udo_build.package.native_check import Comparison, OpFigures, Tolerance, _compare_node

from ..conftest import EXAMPLES, RECIPES
from .helpers import need_gxx

BODY = "examples/softplus/cpu/ops/Softplus.cpp"
RIGHT = "std::log1p(std::exp(-std::fabs(bx)))"
WRONG = "std::log1p(std::exp(-std::fabs(bx))) * 0.5f"  # off by up to log(2) / 2 / beta


def build(root: Path, *extra: str) -> tuple[int, dict, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["build", str(root / "recipes/softplus-cpu.yaml"), "--store",
                 str(root / "store"), "--out", str(root / "out/softplus-cpu"), "--json",
                 *extra], stdout=out, stderr=err, env={})
    return code, json.loads(out.getvalue()), err.getvalue()


def statuses(doc: dict) -> dict[str, str]:
    return {a["id"]: a["status"] for a in doc["actions"]}


@pytest.fixture(scope="module")
def example(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """The shipped example built once in a temp project: (its folder, the build's JSON)."""
    need_gxx()
    root = tmp_path_factory.mktemp("native")
    (root / ".udo-build-root").touch()
    shutil.copytree(EXAMPLES / "softplus", root / "examples/softplus")
    (root / "recipes").mkdir()
    shutil.copy(RECIPES / "softplus-cpu.yaml", root / "recipes")
    code, doc, err = build(root)
    assert code == 0, err
    return root, doc


def test_the_example_agrees_with_its_numpy_kernel(example: tuple[Path, dict]) -> None:
    root, doc = example
    assert statuses(doc)["native-check"] == "built"
    found = json.loads((root / "out/softplus-cpu/native/check.json").read_text())
    (softplus,) = found["ops"]
    assert (softplus["op"], softplus["nodes"], softplus["passed"]) == ("Softplus",
                                                                       ["softplus1"], True)
    assert found["inputs"] == softplus["calls"] == 16  # every calibration input
    assert softplus["elements"] == 16 * 8 * 32 * 32 and softplus["failing_elements"] == 0
    assert 0 <= softplus["max_abs_error"] < 1e-5
    assert found["unchecked"] == [{"op": "Swish", "why": "no C++ body written"}]
    assert found["tolerance"] == {"atol": 1e-5, "rtol": 1e-4} and found["passed"]
    page = (root / "out/softplus-cpu.report.html").read_text()
    assert "C++ op bodies against the numpy kernels" in page and "not checked: no C++" in page


def test_a_wrong_body_fails_naming_the_op_input_and_element(example: tuple[Path, dict]) -> None:
    root, _ = example
    body = root / BODY
    right = body.read_text()
    assert RIGHT in right
    body.write_text(right.replace(RIGHT, WRONG))
    try:
        code, doc, err = build(root)
        assert code == 1, err
        ran = {k for k, v in statuses(doc).items() if v != "cached"}
        assert ran == {"native-check"}  # the C++ reruns the check alone
        message = next(a for a in doc["actions"] if a["id"] == "native-check")["error"][0]
        text = message["message"]
        assert "Softplus: the C++ differs from the numpy kernel beyond atol 1e-05" in text
        assert "node softplus1, input " in text and "(calib.txt line " in text
        assert "output softplus1_out[0, " in text and ": C++ " in text and ", numpy " in text
        assert "Softplus" in err and "native-check" in err
        page = (root / "out/softplus-cpu.report.html").read_text()
        assert "the C++ differs from the numpy kernel" in page
        # a tolerance that admits the difference passes, rerunning the check alone
        recipe = root / "recipes/softplus-cpu.yaml"
        stated = recipe.read_text()
        recipe.write_text(stated.replace("atol: 1.0e-5", "atol: 0.5"))
        try:
            code, doc, err = build(root)
            assert code == 0, err
            assert {k for k, v in statuses(doc).items() if v != "cached"} == {"native-check"}
            found = json.loads((root / "out/softplus-cpu/native/check.json").read_text())
            assert 0.3 < found["ops"][0]["max_abs_error"] < 0.35  # log(2) / 2 at x = 0
        finally:
            recipe.write_text(stated)
    finally:
        body.write_text(right)
    code, doc, _ = build(root)  # back to the right body: everything from the cache
    assert code == 0 and set(statuses(doc).values()) == {"cached"}


def test_a_compile_error_names_the_users_file(example: tuple[Path, dict]) -> None:
    root, _ = example
    body = root / BODY
    right = body.read_text()
    body.write_text(right.replace(RIGHT, "undeclared_thing"))
    try:
        code, doc, err = build(root)
    finally:
        body.write_text(right)
    assert code == 2, err
    problem = next(a for a in doc["actions"] if a["id"] == "native-check")["error"][0]
    assert problem["file"].endswith("cpu/ops/Softplus.cpp") and problem["line"]
    assert "undeclared_thing" in problem["message"]


def test_a_recipe_without_cpp_to_check_is_refused(example: tuple[Path, dict]) -> None:
    root, _ = example
    recipe = root / "recipes/bad.yaml"
    text = (root / "recipes/softplus-cpu.yaml").read_text()
    recipe.write_text(text.replace("    sources: ../examples/softplus/cpu", "")
                      .replace("backends: [CPU, HTP]", "backends: [HTP]"))
    out, err = io.StringIO(), io.StringIO()
    code = main(["build", str(recipe), "--store", str(root / "store"), "-n"], stdout=out,
                stderr=err, env={})
    assert code == 2
    text = err.getvalue()
    assert "package.native_check" in text and "there is no C++ to check" in text


def _figures(want: list[float], got: list[float], tolerance: Tolerance) -> OpFigures:
    found = Comparison(tolerance, 1, {"Op": OpFigures("Op")}, {})
    node = SimpleNamespace(op="Op", name="n", outputs=("y",))
    _compare_node(found, node, np.array(want, np.float32), np.array(got, np.float32), 0, "l1")
    return found.ops["Op"]


def test_the_comparison_rule() -> None:
    tol = Tolerance(1e-3, 1e-2)
    ok = _figures([1.0, np.nan, np.inf, -np.inf, 100.0], [1.0005, np.nan, np.inf, -np.inf, 100.9],
                  tol)
    assert ok.failing == 0 and ok.elements == 5
    bad = _figures([0.0, 1.0, np.inf, 2.0], [0.0, np.nan, 5.0, 2.0], tol)
    assert bad.failing == 2  # NaN for 1.0, and a finite value for an infinity
    assert bad.worst is not None and bad.worst.index == (1,)  # the first of the unbounded ones
    worst = _figures([1.0, 10.0, 0.0], [1.5, 10.5, 0.002], tol).worst
    assert worst is not None and worst.index == (0,)  # 0.5 / 0.011 beats 0.5 / 0.101


def test_the_kind_keys_the_tolerance_it_reads() -> None:
    """The kind spells Tolerance's key parameters itself (importing it would import numpy on
    a no-op build): they must stay the same."""
    from udo_build.builder.kinds.native_check import NATIVE_CHECK_KEY_PARAMS
    from udo_build.package.native_check import Tolerance

    assert NATIVE_CHECK_KEY_PARAMS[:len(Tolerance.KEY_PARAMS)] == Tolerance.KEY_PARAMS
