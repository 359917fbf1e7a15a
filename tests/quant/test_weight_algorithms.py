"""Bias correction and AdaRound (udo_build.quant.bias_correction, adaround): bias correction makes
a quantized layer's mean output over the calibration data the float layer's (checked with the
float session on the layer's grid weights and grid input); AdaRound lowers a layer's
reconstruction error against nearest rounding, keeps every weight on its grid within one step of
the nearest, and gives the same bytes run after run and under another hash seed. (On the layer
that reads the white-noise input, nearest rounding is already optimal in expectation: there the
learned rounding only wins on the data it learned from.)"""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np

from udo_build.ir import Graph, Model, TensorInfo
from udo_build.quant.adaround import AdaroundSettings, adaround, round_layer
from udo_build.quant.bias_correction import correct_biases, w_on_grid
from udo_build.quant.layer_inputs import gather, layers_of, on_grid, rows_of
from udo_build.quant.pipeline import quantize_model
from udo_build.runtime.float_session import Session
from udo_build.runtime.integer import QuantizedSession

from .algo_models import absorbing_model, chain_model, feeds

SETTINGS = {"act_bitwidth": 8, "weights_bitwidth": 4, "per_channel": False,
            "quantizer": "enhanced"}
ROOT = Path(__file__).resolve().parents[2]


def first_layer_means(qmodel, inputs) -> tuple[np.ndarray, np.ndarray]:
    """Per channel means of the first Conv's output over `inputs`: the float layer, and the
    quantized layer (its weights on their grid, its input on its encoding's grid), both run by
    the float session on a one-node model."""
    node = qmodel.model.graph.nodes[0]
    w, b = (qmodel.model.weights[n] for n in node.inputs[1:3])
    grid_w = w_on_grid(rows_of(node, w).astype(np.float64), qmodel.params[node.inputs[1]])
    x_enc = qmodel.activations[node.inputs[0]]

    def mean(weights, transform) -> np.ndarray:
        graph = Graph("one", qmodel.model.graph.inputs, (TensorInfo(node.outputs[0], "float32"),),
                      (node,))
        session = Session(Model(graph, {node.inputs[1]: weights, node.inputs[2]: b}))
        out = [session.run({"x": transform(f["x"])}, [node.outputs[0]])[node.outputs[0]]
               for f in inputs]
        return np.mean(np.stack(out), axis=(0, 1, 3, 4))

    grid_x = lambda x: (on_grid(x, x_enc) * x_enc.scale).astype(np.float32)  # noqa: E731
    return (mean(w, lambda x: x),
            mean(grid_w.reshape(w.shape).astype(np.float32), grid_x))


def test_bias_correction_removes_the_mean_error_on_the_calibration_data() -> None:
    calibration = feeds(6)
    qmodel = quantize_model(chain_model(), {}, calibration, SETTINGS)
    float_mean, quant_mean = first_layer_means(qmodel, calibration)
    corrected, count = correct_biases(qmodel, {}, calibration, len(calibration))
    assert count == len(layers_of(qmodel)) == 5
    _, quant_after = first_layer_means(corrected, calibration)  # the corrected bias in both
    error_before = np.abs(quant_mean - float_mean).max()
    assert error_before > 1e-2
    assert np.abs(quant_after - float_mean).max() < 1e-3 * error_before


def test_bias_correction_after_adaround_compares_with_the_float_weights() -> None:
    calibration = feeds(6)
    qmodel = quantize_model(chain_model(), {}, calibration, SETTINGS)
    rounded, _ = adaround(qmodel, {}, calibration, 6, AdaroundSettings(iterations=20, samples=64))
    float_mean, _ = first_layer_means(qmodel, calibration)  # the weights before AdaRound
    errors = []
    for reference in (qmodel.model.weights, None):  # None: the rounded weights stand for float
        corrected, _ = correct_biases(rounded, {}, calibration, 6, reference)
        errors.append(np.abs(first_layer_means(corrected, calibration)[1] - float_mean).max())
    assert errors[1] > 1e-2  # AdaRound's own rounding shifted the mean, and it stayed
    assert errors[0] < 1e-3 * errors[1]


def test_bias_correction_gives_a_layer_without_bias_one_with_encodings() -> None:
    model = absorbing_model()
    conv = model.graph.nodes[0]
    bare = replace(model.graph, nodes=(conv, model.graph.nodes[3].__class__.make(
        "conv1", "Conv", ["x", "w1"], ["y"], {"kernel_shape": [1, 1]})),
        outputs=(TensorInfo("y", "float32", (1, 3, 8, 8)),))
    w1 = np.random.default_rng(3).standard_normal((3, 4, 1, 1)).astype(np.float32)
    qmodel = quantize_model(Model(bare, {**model.weights, "w1": w1}), {}, feeds(4), SETTINGS)
    corrected, _ = correct_biases(qmodel, {}, feeds(4), 4)
    added = [n for n in corrected.model.graph.nodes if n.name == "conv1"][0].inputs[2]
    assert added in corrected.model.weights and added in corrected.params
    QuantizedSession(corrected).run(feeds(1)[0], ["y"])  # the integer path reads it


def reconstruction(rows, grid_rows, columns, scale_x) -> float:
    x = np.concatenate(columns, axis=2)[0] * scale_x  # [K, P]
    return float(np.sum(((grid_rows - rows) @ x) ** 2))


def test_adaround_lowers_the_reconstruction_error_and_stays_on_the_grid() -> None:
    calibration = feeds(6)
    qmodel = quantize_model(chain_model(), {}, calibration, SETTINGS)
    layers = [layer for layer in layers_of(qmodel) if layer.groups == 1]
    gather(qmodel, {}, calibration, layers, samples=256, count=6, seed=0)
    checked = feeds(6, seed=9)
    fresh = [replace(layer, columns=[]) for layer in layers]
    gather(qmodel, {}, checked, fresh, samples=256, count=6, seed=1)
    for layer, other in zip(layers, fresh, strict=True):
        name = layer.node.inputs[1]
        rows = rows_of(layer.node, qmodel.model.weights[name]).astype(np.float64)
        encs = qmodel.params[name]
        learned = round_layer(rows, encs, layer, AdaroundSettings(iterations=150))
        nearest = w_on_grid(rows, encs)
        steps = (learned - nearest) / encs[0].scale
        assert np.allclose(steps, np.rint(steps)) and np.abs(np.rint(steps)).max() == 1
        scale_x = qmodel.activations[layer.node.inputs[0]].scale
        assert reconstruction(rows, learned, layer.columns, scale_x) < \
            0.95 * reconstruction(rows, nearest, layer.columns, scale_x)
        if layer.node.inputs[0] != "x":  # on white noise (x) nearest rounding is optimal
            assert reconstruction(rows, learned, other.columns, scale_x) < \
                0.95 * reconstruction(rows, nearest, other.columns, scale_x)


DIGEST = """
import sys
sys.path.insert(0, sys.argv[1])
from tests.quant.test_weight_algorithms import adarounded_digest
print(adarounded_digest())
"""


def adarounded_digest() -> str:
    calibration = feeds(4)
    qmodel = quantize_model(chain_model(), {}, calibration, SETTINGS)
    rounded, count = adaround(qmodel, {}, calibration, 4, AdaroundSettings(iterations=40,
                                                                           samples=128))
    assert count == 5
    return rounded.model.digest()


def test_adaround_bytes_repeat_under_another_hash_seed() -> None:
    here = adarounded_digest()
    assert adarounded_digest() == here
    env = {**os.environ, "PYTHONHASHSEED": "12345", "PYTHONPATH": str(ROOT)}
    there = subprocess.run([sys.executable, "-c", DIGEST, str(ROOT)], env=env, check=True,
                           capture_output=True, text=True).stdout.strip()
    assert there == here
