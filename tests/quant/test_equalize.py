"""Cross-layer equalization and high-bias absorption (udo_build.quant.equalize): the float function
is unchanged, the channel ranges of each pair are equalized, pairs through a ReLU6 are skipped,
high biases move into the next layer, and quantizing the equalized model is more accurate."""

from __future__ import annotations

import numpy as np

from udo_build.quant.equalize import equalize_model
from udo_build.quant.fold import fold_for_quantization
from udo_build.quant.pipeline import quantize_model
from udo_build.runtime.float_session import Session
from udo_build.runtime.integer import QuantizedSession

from .algo_models import absorbing_model, chain_model, feeds

LOW_BITS = {"act_bitwidth": 8, "weights_bitwidth": 4, "per_channel": False,
            "quantizer": "enhanced"}


def outputs(model, inputs, name="y"):
    session = Session(model)
    return [session.run(feed, [name])[name] for feed in inputs]


def sqnr(reference, approx) -> float:
    r = np.concatenate([a.ravel() for a in reference]).astype(np.float64)
    q = np.concatenate([a.ravel() for a in approx]).astype(np.float64)
    return float(10 * np.log10(np.sum(r * r) / np.sum((r - q) ** 2)))


def test_cle_keeps_the_float_function_and_equalizes_each_pair() -> None:
    model = chain_model()
    done = equalize_model(model, absorb=False)
    assert [(p.first.name, p.second.name, p.between) for p in done.pairs] == [
        ("conv0", "dw", ("Relu",)), ("dw", "conv2", ()), ("conv2", "conv3", ("PRelu",))]
    inputs = feeds(3)
    for before, after in zip(outputs(model, inputs), outputs(done.model, inputs), strict=True):
        np.testing.assert_allclose(after, before, rtol=1e-5, atol=1e-5 * np.abs(before).max())
    w = done.model.weights
    dw, conv2 = w[done.pairs[1].first.inputs[1]], w[done.pairs[1].second.inputs[1]]
    r1 = np.abs(dw).reshape(8, -1).max(axis=1)
    r2 = np.abs(conv2).max(axis=(0, 2, 3))
    np.testing.assert_allclose(r1, r2, rtol=0.01)  # converged: both sides sqrt(r1 r2)
    folded = fold_for_quantization(model).weights[done.pairs[1].first.inputs[1]]
    spread = np.abs(folded).reshape(8, -1).max(axis=1)
    assert spread.max() / spread.min() > 50 > r1.max() / r1.min()


def test_a_relu6_between_two_layers_stops_the_pair() -> None:
    done = equalize_model(chain_model(relu6=True), absorb=False)
    assert ("conv2", "conv3") not in [(p.first.name, p.second.name) for p in done.pairs]
    assert len(done.pairs) == 2


def test_high_bias_moves_into_the_next_layer_keeping_the_function() -> None:
    model = absorbing_model()
    plain, absorbed = equalize_model(model, absorb=False), equalize_model(model)
    assert absorbed.absorbed == 1
    bias = plain.pairs[0].first.inputs[2]
    moved = plain.model.weights[bias] - absorbed.model.weights[bias]
    assert np.all(moved > 0)  # c = beta - 3 |gamma| > 0 per channel
    inputs = feeds(4)
    pre = absorbed.pairs[0].first.outputs[0]
    low = [Session(absorbed.model).run(f, [pre])[pre].min() for f in inputs]
    assert min(low) >= 0  # the pre-activation stayed above c: relu(x - c) + c == relu(x)
    for before, after in zip(outputs(model, inputs), outputs(absorbed.model, inputs),
                             strict=True):
        np.testing.assert_allclose(after, before, rtol=1e-4, atol=1e-4 * np.abs(before).max())


def test_equalizing_improves_low_bit_per_tensor_quantization() -> None:
    model = chain_model()
    calibration, held_out = feeds(8), feeds(8, seed=5)
    reference = outputs(model, held_out)

    def accuracy(float_model) -> float:
        qmodel = quantize_model(float_model, {}, calibration, LOW_BITS)
        session = QuantizedSession(qmodel)
        return sqnr(reference, [session.run(f, ["y"])["y"] for f in held_out])

    assert accuracy(equalize_model(model).model) > accuracy(model) + 6


def test_equalized_bytes_repeat() -> None:
    one, two = equalize_model(chain_model()), equalize_model(chain_model())
    assert one.model.digest() == two.model.digest()
    assert one.rounds == two.rounds > 1
