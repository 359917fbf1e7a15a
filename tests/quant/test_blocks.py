"""Weights per block (udo_build.quant.blocks): LPBQ block weights on the integer path against the
exact oracle (tests/quant/oracle.py) for MatMul, Gemm and Conv at 8- and 16-bit activations; the
LPBQ encodings' invariants; PER_BLOCK falling back to float with its dequantized weights; AIMET
1.0.0 PER_BLOCK / LPBQ entries written and read back, bad entries refused naming the field."""

from __future__ import annotations

import json
from typing import Any

import numpy as np
import pytest

from udo_build.errors import UserError
from udo_build.ir import Model
from udo_build.ir.blocks import block_layouts
from udo_build.ir.encodings import dumps, from_aimet
from udo_build.ir.qmodel import QuantizedModel
from udo_build.quant import blocks
from udo_build.quant.blocks import block_weights
from udo_build.quant.qdq import to_qdq
from udo_build.runtime.integer import QuantizedSession
from udo_build.runtime.integer.fixed import dequantize_along, quantize, quantize_along

from .oracle import ExactQdq, assert_exact
from .qhelpers import encode, single

_rng = np.random.default_rng(20261128)

# (op, weight shape, attrs, input shape)
CASES = [("MatMul", (128, 24), {}, (2, 5, 128)),
         ("Gemm", (24, 64), {"transB": 1}, (6, 64)),
         ("Gemm", (64, 24), {}, (6, 64)),
         ("Conv", (8, 64, 3, 3), {"pads": [1, 1, 1, 1]}, (1, 64, 6, 6))]


def _model(op: str, shape: tuple[int, ...], attrs: dict[str, Any],
           x_shape: tuple[int, ...]) -> tuple[Model, list[dict[str, np.ndarray]]]:
    w = (_rng.standard_normal(shape) * np.exp(_rng.standard_normal(shape))).astype(np.float32)
    x = _rng.standard_normal(x_shape).astype(np.float32)
    model = single(op, [("x", x), ("w", None)], {"w": w}, attrs)
    samples = [{"x": _rng.standard_normal(x_shape).astype(np.float32)} for _ in range(4)]
    return model, samples


def _blocked(qmodel: QuantizedModel, bits: int, size: int, lpbq: bool) -> QuantizedModel:
    layout = block_layouts(qmodel.model)["w"]
    encs = block_weights(qmodel.model.weights["w"], layout, bits, size, lpbq)
    return QuantizedModel(qmodel.model, qmodel.activations, {**qmodel.params, "w": encs})


@pytest.mark.parametrize("act_bits, weight_bits", [(8, 4), (16, 4), (16, 8)])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}{c[1]}")
def test_lpbq_block_weights_are_exact_on_the_integer_path(case: tuple[Any, ...],
                                                         act_bits: int, weight_bits: int) -> None:
    model, samples = _model(*case)
    qmodel = _blocked(encode(model, samples[:3], act_bits=act_bits), weight_bits, 16, lpbq=True)
    session = QuantizedSession(qmodel)
    [step] = session.plan(("y",)).steps
    assert step.integer, step.label
    x = quantize(samples[3]["x"], qmodel.activations["x"])
    ours = session.run_quantized({"x": x})["y"]
    assert len(np.unique(ours)) > 8
    feeds = {"x": qmodel.activations["x"].dequantize(x)}
    exact, unrounded = ExactQdq(to_qdq(qmodel)).quantized_and_unrounded(feeds, ["y"])["y"]
    assert_exact(ours, exact, unrounded, f"{case[0]} w{weight_bits}a{act_bits}")


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64])
@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}{c[1]}")
def test_block_peaks_read_in_slices_are_those_of_the_whole_weight(
        case: tuple[Any, ...], dtype: type, monkeypatch: pytest.MonkeyPatch) -> None:
    """block_peaks reads a weight a slice at a time in its own type: the same peaks as float64
    magnitudes of the whole weight, non-finite values counted as 0, at any slice size."""
    op, shape, attrs, x_shape = case
    model, _ = _model(op, shape, attrs, x_shape)
    w = model.weights["w"].astype(dtype)
    w.reshape(-1)[[3, 50, 77]] = [np.nan, np.inf, -np.inf]
    layout = block_layouts(model)["w"]
    channels, _, blocks_first = layout
    whole = np.abs(w.astype(np.float64))
    whole[~np.isfinite(whole)] = 0.0
    want = (whole.T if blocks_first else whole).reshape(channels, shape[0 if blocks_first else 1]
                                                          // 32, -1).max(axis=2)
    for size in (1, 100, 1 << 24):  # bytes a slice holds: one block row or channel, a few, all
        monkeypatch.setattr(blocks, "_SLICE", size)
        got = blocks.block_peaks(w, layout, 32)
        assert got.dtype == np.float64 and np.array_equal(got, want)


def test_lpbq_scales_are_a_channel_float_times_small_integers() -> None:
    w = (_rng.standard_normal((256, 8)) * np.linspace(0.01, 3, 256)[:, None]).astype(np.float32)
    encs = block_weights(w, (8, 256, True), 4, 64, lpbq=True)
    assert len(encs) == 8 and all(len(e.block_scales) == 4 for e in encs)
    ints = np.array([e.block_scales for e in encs])
    assert np.array_equal(ints, np.rint(ints)) and ints.min() >= 1 and ints.max() == 16
    assert all((e.bitwidth, e.lpbq_bitwidth, e.blocks_first) == (4, 8, True) for e in encs)
    q = quantize_along(w, encs, 1)
    assert q.min() >= -7 and q.max() <= 7
    # no value is clipped: every block's scale holds its largest magnitude
    error = np.abs(dequantize_along(q, encs, 1) - w)
    steps = np.repeat(np.array([[e.scale * m for m in e.block_scales] for e in encs]).T, 64, 0)
    assert np.all(error <= steps / 2 * (1 + 1e-6))
    # blocks of small values get finer steps than one scale per channel would give
    per_channel = np.abs(w).max(axis=0) / 7
    assert error[:64].max() < per_channel.min() / 4


def test_per_block_weights_run_as_float_with_their_dequantized_values() -> None:
    model, samples = _model("MatMul", (128, 24), {}, (3, 128))
    qmodel = _blocked(encode(model, samples[:3], act_bits=16), 4, 32, lpbq=False)
    session = QuantizedSession(qmodel)
    [step] = session.plan(("y",)).steps
    assert not step.integer
    encs = qmodel.params["w"]
    real = dequantize_along(quantize_along(model.weights["w"], encs, 1), encs, 1)
    xq = quantize(samples[3]["x"], qmodel.activations["x"])
    ours = session.run_quantized({"x": xq})["y"]
    y_real = qmodel.activations["x"].dequantize(xq) @ real  # the float kernel's product
    assert np.abs(ours.astype(np.int64) - quantize(y_real, qmodel.activations["y"])).max() <= 1


@pytest.mark.parametrize("lpbq", [True, False])
@pytest.mark.parametrize("case", CASES[:3], ids=lambda c: f"{c[0]}{c[1]}")
def test_block_encodings_round_trip_through_aimet_1_0_0(case: tuple[Any, ...],
                                                        lpbq: bool) -> None:
    model, samples = _model(*case)
    qmodel = _blocked(encode(model, samples[:3], act_bits=16), 4, 16, lpbq)
    text = dumps({k: [v] for k, v in qmodel.activations.items()}, qmodel.params)
    doc = json.loads(text)
    [entry] = [e for e in doc["param_encodings"] if e["name"] == "w"]
    assert entry["enc_type"] == ("LPBQ" if lpbq else "PER_BLOCK")
    if lpbq:
        assert (entry["bw"], entry["compressed_bw"], entry["offset"][0]) == (8, 4, -128)
        blocks = block_layouts(model)["w"][1] // 16
        assert len(entry["scale"]) == 24 and len(entry["per_block_int_scale"]) == 24 * blocks
    acts, params = from_aimet(doc, "enc.json", layouts=block_layouts(model))
    assert params == qmodel.params and acts == {k: [v] for k, v in qmodel.activations.items()}


def _lpbq_doc(**changes: Any) -> dict[str, Any]:
    entry = {"name": "w", "dtype": "INT", "enc_type": "LPBQ", "bw": 8, "compressed_bw": 4,
             "is_sym": True, "block_size": 64, "scale": [0.01] * 24, "offset": [-128] * 24,
             "per_block_int_scale": [16, 3] * 24}
    return {"version": "1.0.0", "activation_encodings": [],
            "param_encodings": [{**entry, **changes}]}


def test_aimet_lpbq_scales_follow_the_weights_axis_order() -> None:
    model, _ = _model("MatMul", (128, 24), {}, (3, 128))
    doc = _lpbq_doc(per_block_int_scale=[16] * 24 + [3] * 24)  # (K/64, N): block-major
    _, params = from_aimet(doc, "enc.json", layouts=block_layouts(model))
    assert all(e.block_scales == (16.0, 3.0) for e in params["w"])


@pytest.mark.parametrize("changes, field, words", [
    ({"block_size": 48}, "block_size", "does not divide"),
    ({"per_block_int_scale": [17, 3] * 24}, "per_block_int_scale", "[1, 16]"),
    ({"per_block_int_scale": [1, 2, 3] * 24}, "per_block_int_scale", "72 values"),
    ({"scale": [0.01] * 23}, "scale", "23 values"),
    ({"offset": [0] * 24}, "offset", "-128"),
    ({"compressed_bw": 8}, "compressed_bw", "not one of 4"),
    ({"is_sym": False}, "is_sym", "symmetric"),
    ({"name": "x"}, "enc_type", "no such weight"),
])
def test_bad_block_entries_are_refused_naming_the_file_and_field(
        changes: dict[str, Any], field: str, words: str) -> None:
    model, _ = _model("MatMul", (128, 24), {}, (3, 128))
    with pytest.raises(UserError) as info:
        from_aimet(_lpbq_doc(**changes), "over.json", layouts=block_layouts(model))
    text = str(info.value)
    assert "over.json" in text and f"param_encodings[0].{field}" in text and words in text
