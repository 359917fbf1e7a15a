"""Mixed precision (udo_build.quant.mixed_precision, mixed_search): the units of two models, a
composed choice equal to what the quantize step makes from the same widths, the greedy's
choices on a known noise model, and a search whose choice meets its target when measured
apart on the integer path."""

from __future__ import annotations

import math

import numpy as np
import pytest

from udo_build.quant.algorithm_settings import Widths
from udo_build.quant.mixed_precision import ACTIVATION, WEIGHT, Candidates, OutputNoise, Unit
from udo_build.quant.mixed_search import (
    NoiseModel,
    Unreachable,
    greedy,
    record_bytes,
    relative_noise,
    search,
)
from udo_build.quant.pipeline import quantize_model

from .algo_models import chain_model, concat_model, feeds

SETTINGS = {"act_bitwidth": 8, "weights_bitwidth": 8, "bias_bitwidth": 32, "per_channel": True,
            "quantizer": "enhanced"}


@pytest.fixture(scope="module")
def candidates() -> Candidates:
    model = chain_model()
    return Candidates.of(quantize_model(model, {}, feeds(4), SETTINGS),
                         quantize_model(model, {}, feeds(4), {**SETTINGS, "act_bitwidth": 16,
                                                              "weights_bitwidth": 4}))


def test_units_are_the_encoded_activations_and_the_weights(candidates: Candidates) -> None:
    acts = [u.name for u in candidates.units if u.kind == ACTIVATION]
    weights = [u.name for u in candidates.units if u.kind == WEIGHT]
    assert acts == ["x", "r0", "c1", "c2", "p2", "a3", "g", "y"]  # f shares g's (Flatten)
    assert candidates.roots["f"] == "g"
    assert weights == ["conv0::w", "w1", "w2", "w3", "w4"]
    assert all((u.reference, u.alternate) == ((8, 16) if u.kind == ACTIVATION else (8, 4))
               for u in candidates.units)


@pytest.mark.parametrize("alternate", [4, 16])
def test_a_composed_choice_is_what_quantize_makes_of_its_widths(alternate: int) -> None:
    model = chain_model()
    reference = quantize_model(model, {}, feeds(4), SETTINGS)
    other = quantize_model(model, {}, feeds(4), {**SETTINGS, "act_bitwidth": 16,
                                                 "weights_bitwidth": alternate})
    found = Candidates.of(reference, other)
    widths = Widths.of({"r0": 16, "g": 16}, {"w2": alternate, "w4": alternate})
    made = quantize_model(model, {}, feeds(4), SETTINGS, widths=widths)
    composed = found.compose(widths)
    assert composed.activations == made.activations and composed.params == made.params
    assert made.activations["f"].bitwidth == 16  # it shares g's encoding
    assert made.params["w2"][0].bitwidth == alternate and made.params["w3"][0].bitwidth == 8
    assert Widths.from_bytes(widths.to_bytes()) == widths


def unit(name: str, kind: str = ACTIVATION, reference: int = 8, alternate: int = 16) -> Unit:
    return Unit(kind, name, name, "Conv", 0, reference, alternate)


def test_the_greedy_takes_the_most_noise_per_byte_first() -> None:
    a, b, w = unit("a"), unit("b"), unit("w", WEIGHT, 8, 4)
    # the highest's noise 1e-4; alone at its low width a adds 6e-4, b 3e-4, w (at 4) 2e-4
    model = NoiseModel(40.0, {a: -10 * math.log10(7e-4), b: -10 * math.log10(4e-4),
                              w: -10 * math.log10(3e-4)})
    sizes = {a: 1000, b: 100, w: 10_000}  # b removes the most per byte, then a, then w
    assert model.predict({a: 8, b: 8, w: 4}) == pytest.approx(1.2e-3)
    assert greedy(model, [a, b, w], sizes, 1.05e-3) == {a: 8, b: 16, w: 4}
    assert greedy(model, [a, b, w], sizes, 6.5e-4) == {a: 16, b: 8, w: 4}  # b dropped again
    assert greedy(model, [a, b, w], sizes, 5e-5) is None  # below the highest's own noise
    assert model.predict({a: 16, b: 16, w: 8}) == pytest.approx(1e-4)


def test_a_unit_measured_quieter_alone_than_the_highest_adds_no_noise() -> None:
    a = unit("a")
    model = NoiseModel(40.0, {a: 40.5})  # the measure's own noise: no gain to count
    assert model.extra(a, 8) == 0.0 and model.predict({a: 8}) == pytest.approx(1e-4)


def test_a_target_out_of_reach_names_the_best_measured() -> None:
    a = unit("a")
    measured = {8: 30.0, 16: 29.0}  # the high width measures worse than the reference
    with pytest.raises(Unreachable) as info:
        search([a], {a: 33.0}, 30.0, {a: 10}, 31.0, lambda bits: measured[bits[a]])
    assert (info.value.best_db, info.value.highest_db) == (30.0, 29.0)


@pytest.mark.parametrize("measured_db, chosen", [(33.5, (8, 16)), (31.5, (16, 16))])
def test_the_search_takes_the_first_choice_measured_to_meet_its_target(
        measured_db: float, chosen: tuple[int, int]) -> None:
    """The highest is measured first; b, the larger noise alone at 8 bits, is raised first
    (predicted 34 dB). Measured at 33.5 dB it is the answer; at 31.5 the budget tightens until
    the greedy asks the highest again, which is then the answer."""
    a, b = unit("a"), unit("b")
    sensitivity = {a: 34.0, b: 31.0}  # alone at 8 bits, the other at 16
    measured = {(16, 16): 36.0, (8, 16): measured_db}
    result = search([a, b], sensitivity, 30.0, {a: 10, b: 10}, 33.0,
                    lambda bits: measured[bits[a], bits[b]])
    assert (result.chosen.bits[a], result.chosen.bits[b]) == chosen
    assert [t.sqnr_db for t in result.tried] == [36.0, measured_db]
    assert result.tried[1].predicted_db == pytest.approx(34.0, abs=0.01)
    assert relative_noise(math.inf) == 0.0


def test_the_search_meets_its_target_on_the_integer_path(candidates: Candidates) -> None:
    from udo_build.runtime.float_session import Session
    from udo_build.runtime.integer import QuantizedSession

    held_out = feeds(3, seed=7)
    measure = OutputNoise(candidates, {}, held_out)
    alone = measure.sqnr_db([candidates.low_alone(u) for u in candidates.units])
    reference_db = measure.sqnr_db([Widths()])[0]
    sizes = {u: 64 for u in candidates.units}
    target = reference_db - 3  # room for 4-bit weights: a smaller record
    result = search(candidates.units, dict(zip(candidates.units, alone, strict=True)),
                    reference_db, sizes, target,
                    lambda bits: measure.sqnr_db([candidates.widths(bits)])[0])
    chosen = candidates.compose(candidates.widths(result.chosen.bits))
    assert record_bytes(chosen) < record_bytes(candidates.reference)
    exact, approx = Session(chosen.model), QuantizedSession(chosen)
    ref = np.concatenate([exact.run(f, ["y"])["y"].ravel() for f in held_out]).astype(float)
    got = np.concatenate([approx.run(f, ["y"])["y"].ravel() for f in held_out])
    assert 10 * math.log10(np.sum(ref ** 2) / np.sum((ref - got) ** 2)) >= target


def test_tensors_rounded_onto_a_readers_grid_follow_its_unit() -> None:
    model = concat_model()
    reference = quantize_model(model, {}, feeds(4), SETTINGS)
    found = Candidates.of(reference, quantize_model(model, {}, feeds(4),
                                                    {**SETTINGS, "act_bitwidth": 16}))
    assert [u.name for u in found.units if u.kind == ACTIVATION] == ["x", "c0", "p0", "r", "y"]
    assert found.roots["k"] == "r"  # the Concat's output is rounded onto the Relu's
    widths = Widths.of({"r": 16}, {})
    made = quantize_model(model, {}, feeds(4), SETTINGS, widths=widths)
    assert found.compose(widths).activations == made.activations
    assert made.activations["k"].bitwidth == made.activations["r"].bitwidth == 16
    assert made.activations["c0"].bitwidth == 8
