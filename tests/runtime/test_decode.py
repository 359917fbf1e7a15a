"""Decode chains (udo_build.runtime.decode) and their per-step metrics and checks
(udo_build.runtime.metrics): the window a fixed-size cache keeps, the mask that slides with it,
what each step's feed holds, and the problems a decode section names at its fields."""

from __future__ import annotations

import numpy as np
import pytest

from udo_build.runtime.decode import Chain, DecodeSettings, slide, window, window_problem
from udo_build.runtime.metrics import RunCheck, decode_metrics, sqnr_db

CACHE = {"present_key": "past_key", "present_value": "past_value"}
SETTINGS = DecodeSettings(4, tuple(CACHE.items()), "position", "mask")
INPUTS = {"x": (1, 1, 8), "position": (1, 1), "past_key": (1, 2, 3, 4),
          "past_value": (1, 2, 3, 4), "mask": (1, 1, 1, 4)}
OUTPUTS = {"y": (1, 1, 8), "present_key": (1, 2, 4, 4), "present_value": (1, 2, 4, 4)}


def first_feed() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {"x": rng.standard_normal((1, 1, 8)).astype(np.float32),
            "position": np.zeros((1, 1), np.int64),
            "past_key": np.zeros((1, 2, 3, 4), np.float32),
            "past_value": np.zeros((1, 2, 3, 4), np.float32),
            "mask": np.array([[[[-255.0, -255.0, -255.0, 0.0]]]], np.float32)}


def test_the_settings_round_trip_through_params() -> None:
    settings = DecodeSettings(32, tuple(CACHE.items()), "position", None, (("y", "x"),))
    params = settings.to_params()
    assert params == {"steps": 32, "feed": [["present_key", "past_key"],
                                            ["present_value", "past_value"]],
                      "position": "position", "mask": None, "next_input": [["y", "x"]]}
    assert DecodeSettings.from_params(params) == settings


def test_a_longer_present_keeps_its_newest_positions() -> None:
    present = np.arange(2 * 4 * 3).reshape(1, 2, 4, 3)
    past = window(present, (1, 2, 3, 3))
    assert np.array_equal(past, present[:, :, 1:])  # the oldest position is dropped
    assert window(present, present.shape) is not None
    assert np.array_equal(window(present, present.shape), present)


def test_the_mask_slides_and_the_entering_entry_copies_the_token_s_own() -> None:
    mask = np.array([[[[-255.0, -255.0, 0.0, 0.0]]]])
    assert slide(mask).tolist() == [[[[-255.0, 0.0, 0.0, 0.0]]]]
    boolean = np.array([[0, 0, 1]])
    assert slide(boolean).tolist() == [[0, 1, 1]]


def test_a_chain_feeds_its_cache_advances_the_position_and_slides_the_mask() -> None:
    chain = Chain(SETTINGS, first_feed())
    present_key = np.random.default_rng(1).standard_normal((1, 2, 4, 4)).astype(np.float32)
    outputs = {"y": np.ones((1, 1, 8), np.float32), "present_key": present_key,
               "present_value": present_key * 2}
    x1 = np.full((1, 1, 8), 7.0, np.float32)
    chain.advance(outputs, {"x": x1})
    feed = chain.feed
    assert np.array_equal(feed["past_key"], present_key[:, :, 1:])
    assert np.array_equal(feed["past_value"], present_key[:, :, 1:] * 2)
    assert feed["position"].tolist() == [[1]] and feed["position"].dtype == np.int64
    assert feed["mask"].tolist() == [[[[-255.0, -255.0, 0.0, 0.0]]]]
    assert np.array_equal(feed["x"], x1) and chain.step == 1
    chain.advance(outputs)  # no line for this step: x keeps its value
    assert np.array_equal(chain.feed["x"], x1) and chain.feed["position"].tolist() == [[2]]


def test_next_input_feeds_an_output_as_the_next_token() -> None:
    settings = DecodeSettings(4, tuple(CACHE.items()), next_input=(("y", "x"),))
    chain = Chain(settings, first_feed())
    y = np.full((1, 1, 8), 3.0, np.float32)
    chain.advance({"y": y, "present_key": np.zeros((1, 2, 4, 4), np.float32),
                   "present_value": np.zeros((1, 2, 4, 4), np.float32)})
    assert np.array_equal(chain.feed["x"], y)
    assert chain.feed["position"].tolist() == [[0]]  # no position: it stays


def test_settings_the_model_can_follow_have_no_problems() -> None:
    assert SETTINGS.problems(INPUTS, OUTPUTS, ["y", "present_key", "present_value"]) == []
    assert SETTINGS.problems(INPUTS, OUTPUTS, None) == []


@pytest.mark.parametrize(("settings", "requested", "field", "says"), [
    (DecodeSettings(2, (("present_kv", "past_key"),)), None, "feed.present_kv",
     "'present_kv' is not an output of the model"),
    (DecodeSettings(2, (("present_key", "past_key"),)), ["y"], "feed.present_key",
     "the run's outputs do not include 'present_key'"),
    (DecodeSettings(2, (("present_key", "past"),)), None, "feed.present_key",
     "'past' is not an input of the model"),
    (DecodeSettings(2, (("present_key", "mask"),)), None, "feed.present_key",
     "output 'present_key' [1, 2, 4, 4] cannot feed input 'mask' [1, 1, 1, 4]"),
    (DecodeSettings(2, (("y", "past_key"),)), None, "feed.y", "rank 3 is not 4"),
    (DecodeSettings(2, tuple(CACHE.items()), mask="past_key"), None, "mask",
     "input 'past_key' is already derived by decode.feed.present_key"),
    (DecodeSettings(2, tuple(CACHE.items()), position="pos"), None, "position",
     "'pos' is not an input of the model"),
    (DecodeSettings(2, tuple(CACHE.items()), next_input=(("y", "past_value"),)), None,
     "next_input.y", "already derived by decode.feed.present_value"),
])
def test_a_decode_field_the_model_cannot_follow_is_named(
        settings: DecodeSettings, requested: list[str] | None, field: str, says: str) -> None:
    problems = settings.problems(INPUTS, OUTPUTS, requested)
    assert problems and problems[0][0] == field and says in problems[0][1], problems


def test_a_shorter_output_or_two_differing_axes_cannot_feed() -> None:
    assert window_problem((1, 2, 2, 4), (1, 2, 3, 4)) == "axis 2 is shorter (2 < 3)"
    assert "2 axes" in str(window_problem((1, 3, 4, 4), (1, 2, 3, 4)))
    assert window_problem(None, (1, 2)) is None


def test_decode_metrics_list_every_step_the_worst_and_the_drift() -> None:
    steps = [{"y": 40.0 - t * 0.5, "cache": 50.0} for t in range(16)]
    metrics = decode_metrics(steps)
    assert len(metrics["sqnr_db"]) == 16 and metrics["window"] == 2
    assert metrics["min_sqnr_db"] == 32.5 and metrics["min_at"] == [15, "y"]
    # y: mean of steps 0-1 (39.75) less mean of steps 14-15 (32.75)
    assert metrics["drift_db"] == 7.0 and metrics["drift_of"] == "y"
    exact = decode_metrics([{"y": None}, {"y": None}])
    assert exact["min_sqnr_db"] is None and exact["drift_db"] is None


def test_a_decode_check_bounds_the_worst_step_and_the_drift() -> None:
    steps = [{"y": 40.0 - t * 0.5} for t in range(16)]
    metrics = {"sqnr_db": 36.0, "max_abs_error": 0.1, "top1_agreement": None,
               "decode": decode_metrics(steps)}
    failures = RunCheck(min_sqnr_db=35, max_drift_db=1).failures(metrics)
    assert failures == ["step 15 y: SQNR 32.50 dB < min_sqnr_db 35",
                        "drift 7.00 dB over 16 steps (y: first 2 steps vs last) > "
                        "max_drift_db 1"]
    assert RunCheck(min_sqnr_db=30, max_drift_db=8).failures(metrics) == []
    plain = {"sqnr_db": 36.0, "max_abs_error": 0.1, "top1_agreement": None}
    assert "does not decode" in RunCheck(max_drift_db=1).failures(plain)[0]


def test_sqnr_of_one_tensor() -> None:
    want = np.ones(100)
    assert sqnr_db(want, want) is None
    assert sqnr_db(want * 1.01, want) == pytest.approx(40.0, abs=1e-3)
