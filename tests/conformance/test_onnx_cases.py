"""onnx's node conformance cases of the ops the default package claims (bench/_conformance.py):
each passes (float32 within rtol 1e-3, atol 1e-5), is refused with a "not supported" user
error, or is a known difference listed with its reason; none ends in an internal error.

One test per case (its id is the case's name). A kernel added to the package brings its cases
in: they must then pass or be refused cleanly. docs/ops.md must be what `bench/conformance.py
--docs` writes from the package and these results.
"""

from __future__ import annotations

import importlib.util
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
CASES = {c.name: c for c in harness.load_cases()}
CLAIMED = sorted(name for name, c in CASES.items() if harness.claimed(c))
_results: dict[str, Any] = {}


def _result(name: str) -> Any:
    if name not in _results:
        _results[name] = harness.run_case(CASES[name])
    return _results[name]


@pytest.mark.parametrize("name", CLAIMED)
def test_case(name: str) -> None:
    result = _result(name)
    assert result.outcome in (harness.PASS, harness.REFUSED, harness.KNOWN_DIFFERENCE), \
        f"{name} ({', '.join(result.ops)}): {result.outcome}: {result.detail}"
    if result.outcome == harness.REFUSED:  # a refusal names the node, tensor or domain
        assert any(w in result.detail for w in ("node ", "tensor ", "initializer ", "domain")), \
            result.detail


def test_known_differences_are_cases_of_claimed_ops() -> None:
    for name, reason in harness.KNOWN.items():
        assert name in CLAIMED, f"KNOWN lists {name}, no case of a claimed op"
        assert reason.strip(), f"KNOWN[{name!r}] gives no reason"


def test_most_claimed_cases_pass() -> None:
    """Refusing is allowed per case, not as a way out: most claimed cases must run."""
    passed = sum(_result(name).outcome == harness.PASS for name in CLAIMED)
    assert passed >= 0.7 * len(CLAIMED), f"{passed} of {len(CLAIMED)} claimed cases pass"


def test_compare_tells_values_dtypes_and_shapes_apart() -> None:
    want = np.array([1.0, 2.0, np.nan], dtype=np.float32)
    assert harness.compare(want * (1 + 1e-4), want) == ""
    assert "1 of 3 values differ" in harness.compare(want + np.float32([0, 0.01, 0]), want)
    assert "dtype float64" in harness.compare(want.astype(np.float64), want)
    assert "shape [1, 3]" in harness.compare(want[None], want)
    assert "1 of 2" in harness.compare(np.array([1, 3]), np.array([1, 2]))


def test_an_internal_error_is_classified_as_such() -> None:
    from udo_build.errors import UserError

    assert harness._classify(UserError("node n: Pad: mode 'wrap' not supported"))[0] == \
        harness.REFUSED
    assert harness._classify(UserError("shape inference fails"))[0] == harness.INTERNAL
    assert harness._classify(KeyError("x"))[0] == harness.INTERNAL


def test_docs_ops_md_is_up_to_date() -> None:
    bench = _script("conformance")
    results = [_result(name) if name in CLAIMED else harness.run_case(case)
               for name, case in CASES.items()]
    expected = bench.render_ops_doc(results)
    actual = bench.DOCS.read_text(encoding="utf-8") if bench.DOCS.exists() else ""
    assert actual == expected, "docs/ops.md is stale: run `python bench/conformance.py --docs`"
