"""Run statistics against the float model, and the checks with their messages."""

from __future__ import annotations

import math

import numpy as np
import pytest

from udo_build.runtime.metrics import Agreement, RunCheck


def test_exact_outputs_have_no_sqnr_and_full_agreement() -> None:
    agreement = Agreement()
    out = {"y": np.array([0.5, 2.0, -1.0])}
    agreement.add(out, out)
    assert agreement.metrics() == {"sqnr_db": None, "max_abs_error": 0.0, "top1_agreement": 1.0}


def test_signal_and_noise_add_up_over_inferences_and_tensors() -> None:
    agreement = Agreement()
    agreement.add({"a": np.array([1.0, 0.0]), "s": np.array(3.0)},
                  {"a": np.array([1.0, 0.0]), "s": np.array(2.0)})  # noise 1, signal 1 + 4
    agreement.add({"a": np.array([0.0, 1.5])}, {"a": np.array([2.0, 1.0])})  # noise 4.25
    metrics = agreement.metrics()
    assert metrics["sqnr_db"] == round(10 * math.log10(10.0 / 5.25), 3)
    assert metrics["max_abs_error"] == 2.0
    assert metrics["top1_agreement"] == 0.5  # the scalar does not count; one of two agrees


def test_single_value_outputs_give_no_top1() -> None:
    agreement = Agreement()
    agreement.add({"s": np.array([1.0])}, {"s": np.array([2.0])})
    assert agreement.metrics() == {"sqnr_db": 6.021, "max_abs_error": 1.0,
                                   "top1_agreement": None}


def test_the_worst_error_is_reported_to_four_significant_digits() -> None:
    """The float model's last bits may differ between CPU kinds: the report does not show them."""
    agreement = Agreement()
    want = np.array([1.0, 2.0, 3.0])
    agreement.add({"y": want + np.array([0.0, 0.0123456789, 0.0])}, {"y": want})
    noisy = Agreement()
    noisy.add({"y": want + np.array([0.0, 0.0123456789, 0.0])},
              {"y": np.nextafter(want, 10.0)})  # the reference one ulp off
    assert agreement.metrics()["max_abs_error"] == 0.01235
    assert noisy.metrics() == agreement.metrics()


@pytest.mark.parametrize("check, failures", [
    (RunCheck(), []),
    (RunCheck(min_sqnr_db=25), ["SQNR 20.00 dB < min_sqnr_db 25"]),
    (RunCheck(min_sqnr_db=20), []),
    (RunCheck(max_abs_error=0.01), ["max abs error 0.03208 > max_abs_error 0.01"]),
    (RunCheck(min_top1_agreement=0.9),
     ["top-1 agreement 0.750 < min_top1_agreement 0.9"]),
    (RunCheck(25, 0.01, 0.9), ["SQNR 20.00 dB < min_sqnr_db 25",
                               "max abs error 0.03208 > max_abs_error 0.01",
                               "top-1 agreement 0.750 < min_top1_agreement 0.9"]),
])
def test_checks_say_what_missed_with_the_numbers(check: RunCheck, failures: list[str]) -> None:
    metrics = {"sqnr_db": 20.0, "max_abs_error": 0.032076, "top1_agreement": 0.75}
    assert check.failures(metrics) == failures


def test_an_exact_run_passes_any_sqnr_bound_and_no_top1_passes_any_agreement() -> None:
    metrics = {"sqnr_db": None, "max_abs_error": 0.0, "top1_agreement": None}
    assert RunCheck(min_sqnr_db=200, min_top1_agreement=1.0).failures(metrics) == []


def test_check_params_hold_the_stated_bounds_only() -> None:
    check = RunCheck.from_params({"min_sqnr_db": 25})
    assert check == RunCheck(min_sqnr_db=25)
    assert check.to_params() == {"min_sqnr_db": 25}
    assert RunCheck.from_params(None) == RunCheck() and RunCheck().to_params() == {}
