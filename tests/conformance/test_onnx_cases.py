"""onnx's node conformance cases on every path users run (bench/_conformance.py): the float
session, an fp16 record and an int8 record, each through the CLI as a user runs it, bundles
written and read back.

One test per case (its id is the case's name). On no path may a case end in a bug of udo-build
(exit 3, an exception, a refusal of udo-build's own bundle, a model the HTP path cannot run at
its own static dimensions, an int8 run that is not bit-exact with the integer oracle), and no
case may do worse than its outcome in tests/conformance/baseline.json; one that does better
must record it there in the same change (`python bench/conformance.py --baseline`). docs/ops.md
must be what `bench/conformance.py --docs` writes from the package and these results.

Every case runs on every path once per session, over the machine's cores.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench"


def _script(name: str) -> ModuleType:
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, BENCH / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


harness = _script("_conformance")
bench = _script("conformance")
CASES = {c.name: c for c in harness.load_cases()}
CLAIMED = sorted(name for name, c in CASES.items() if harness.claimed(c))
BASELINE: dict[str, dict[str, str]] = (
    json.loads(bench.BASELINE.read_text(encoding="utf-8")) if bench.BASELINE.exists() else {})


@functools.cache
def _results() -> dict[tuple[str, str], Any]:
    return {(r.name, r.path): r for r in harness.run_all(list(CASES.values()))}


@pytest.mark.parametrize("name", sorted(CASES))
def test_case(name: str) -> None:
    problems = []
    for path in harness.PATHS:
        result = _results()[name, path]
        if result.outcome == harness.INTERNAL:
            problems.append(f"[{path}] a bug of udo-build: {result.detail}")
        else:
            problems.append(bench.baseline_problem(result, BASELINE.get(name, {}).get(path)))
    problems = [p for p in problems if p]
    ops = ", ".join(_results()[name, harness.FLOAT].ops)
    assert not problems, f"{name} ({ops}): " + "; ".join(problems)


def test_fp16_passes_what_the_float_path_passes() -> None:
    ratio = bench.fp16_ratio(list(_results().values()))
    assert ratio is not None
    passed, floats = ratio
    assert passed >= bench.FP16_TARGET * floats, \
        f"the fp16 path passes {passed} of the {floats} claimed cases the float path passes"


def test_most_claimed_cases_pass() -> None:
    """Refusing is allowed per case, not as a way out: most claimed cases must run."""
    passed = sum(_results()[name, harness.FLOAT].outcome == harness.PASS for name in CLAIMED)
    assert passed >= 0.7 * len(CLAIMED), f"{passed} of {len(CLAIMED)} claimed cases pass"


def test_the_baseline_names_only_cases_that_exist() -> None:
    assert set(BASELINE) == set(CASES), "run `python bench/conformance.py --baseline`"


def test_a_baseline_is_held_both_ways() -> None:
    result = harness.Result("c", ("Relu",), harness.FP16, harness.REFUSED, "exit 2: no")
    assert bench.baseline_problem(result, "refused: exit 2: another reason") == ""
    assert "worse" in bench.baseline_problem(result, "pass")
    better = harness.Result("c", ("Relu",), harness.FP16, harness.PASS)
    assert "better" in bench.baseline_problem(better, "differs: output y: 1 of 2 values differ")
    assert "no baseline" in bench.baseline_problem(better, None)
    inexact = harness.Result("c", ("Relu",), harness.INT8, harness.INEXACT, "output y: 1 of 2")
    assert "worse" in bench.baseline_problem(inexact, "differs: output y: 1 of 2 values differ")


def test_known_differences_are_cases_of_claimed_ops() -> None:
    for (name, path), reason in harness.KNOWN.items():
        assert name in CLAIMED, f"KNOWN lists {name}, no case of a claimed op"
        assert path in harness.PATHS and reason.strip(), f"KNOWN[{name!r}, {path!r}]"


def test_compare_tells_values_dtypes_and_shapes_apart() -> None:
    want = np.array([1.0, 2.0, np.nan], dtype=np.float32)
    assert harness.compare(want * (1 + 1e-4), want) == ""
    assert "1 of 3 values differ" in harness.compare(want + np.float32([0, 0.01, 0]), want)
    assert "dtype float64" in harness.compare(want.astype(np.float64), want)
    assert "shape [1, 3]" in harness.compare(want[None], want)
    assert "1 of 2" in harness.compare(np.array([1, 3]), np.array([1, 2]))


def test_bugs_are_told_from_refusals() -> None:
    refused = "error: m.onnx: node n: Pad: mode 'wrap' not supported"
    assert harness._failed(2, refused)[0] == harness.REFUSED
    assert harness._failed(3, "udo-build failed: internal error: KeyError: 'y/fill'")[0] == \
        harness.INTERNAL
    damaged = "error: m.udb: node 'r' (ReduceMax): 2 inputs; the bundle is damaged or was not"
    assert harness._failed(2, damaged)[0] == harness.INTERNAL
    dims = "failed: prepare:x\n  node Range_16 (Range) cannot run at these input dimensions"
    assert harness._failed(1, dims)[0] == harness.INTERNAL
    step = "failed: quantize (quantize): a bug of udo-build, please report it\n  KernelError"
    assert harness._failed(1, step) == (harness.INTERNAL, "exit 1: failed: quantize "
                                        "(quantize): a bug of udo-build, please report it "
                                        "KernelError")


def test_a_case_runs_every_path_through_the_cli() -> None:
    """One real case, end to end: each path passes, and a wrong expectation shows on each."""
    from types import SimpleNamespace

    case = CASES["test_relu"]
    results = harness.run_case(case)
    assert {p: r.outcome for p, r in results.items()} == dict.fromkeys(harness.PATHS,
                                                                       harness.PASS)
    (inputs, expected), = case.data_sets
    wrong = SimpleNamespace(name="wrong_relu", model=case.model, rtol=case.rtol, atol=case.atol,
                            data_sets=[(inputs, [expected[0] + 0.5])])
    for path, result in harness.run_case(wrong).items():
        assert result.outcome == harness.DIFFERS, (path, result)
        assert "values differ" in result.detail


def test_the_fp16_path_computes_in_float16() -> None:
    """A product past float16's range is inf on the fp16 path (the float path passes it)."""
    results = harness.run_case(CASES["test_reduce_prod_default_axes_keepdims_example"],
                               (harness.FLOAT, harness.FP16))
    assert results[harness.FLOAT].outcome == harness.PASS
    assert results[harness.FP16].outcome == harness.DIFFERS
    assert "max abs error inf" in results[harness.FP16].detail


def test_docs_ops_md_is_up_to_date() -> None:
    expected = bench.render_ops_doc(list(_results().values()))
    actual = bench.DOCS.read_text(encoding="utf-8") if bench.DOCS.exists() else ""
    assert actual == expected, "docs/ops.md is stale: run `python bench/conformance.py --docs`"
