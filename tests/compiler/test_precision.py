"""Records hold constants as the device does: int8 records their weights and biases quantized
(4-bit ones packed), fp16 records float16 constants and float16 results after every op."""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

import numpy as np
import pytest

from udo_build.compiler import Runner, read_record
from udo_build.compiler.record_read import pack4, unpack4
from udo_build.errors import UserError
from udo_build.ir import Model, Node
from udo_build.ir.bundle import Bundle
from udo_build.ir.qmodel import from_bundle, to_bundle
from udo_build.quant.pipeline import quantize_model
from udo_build.runtime.float_session import Session
from udo_build.runtime.integer import QuantizedSession

from .helpers import G, feeds, prepare


def net(width: int = 8) -> Model:
    """Conv -> Relu -> Conv, a residual Add, Sigmoid; then a Gemm head. Its own weights,
    whatever other tests drew before."""
    g = G()
    r = g.op("Relu", g.conv("x", 3, width, "c1"), out="r1")
    s = g.op("Sigmoid", g.op("Add", g.conv(r, width, width, "c2"), r, out="sum"), out="s")
    pooled = g.op("Flatten", g.op("GlobalAveragePool", s, out="gap"), out="flat")
    g.op("Gemm", pooled, g.const("head.w", np.zeros((5, width), np.float32)), out="logits",
         transB=1)
    rng = np.random.default_rng(1)
    for name, value in g.weights.items():
        scale = 0.1 if value.ndim == 1 else 1 / np.sqrt(value[0].size)
        g.weights[name] = (rng.standard_normal(value.shape) * scale).astype(np.float32)
    return g.model({"x": (1, 3, 8, 8)}, ["logits"])


def quantized(model: Model, weights: int) -> Bundle:
    samples = [feeds(model, seed=s) for s in range(2)]
    q = quantize_model(model, {}, samples, {"per_channel": True, "weights_bitwidth": weights})
    return to_bundle(q, None, {})


def consts(record: Any) -> dict[str, dict[str, Any]]:
    return {v["name"]: v for v in record.body["values"] if "const" in v}


@pytest.mark.parametrize(("weights", "dtype"), [(8, "int8"), (16, "int16"), (4, "int8")])
def test_int8_records_store_integers_and_run_bit_exact(weights: int, dtype: str) -> None:
    bundle = quantized(net(), weights)
    data = prepare(bundle, level=2, precision="int8").record()
    record = read_record(data)
    stored = consts(record)
    for name in ("c1.w", "c2.w", "head.w"):
        entry = stored[name]
        assert entry["const"]["dtype"] == dtype and entry["const"].get("axis") == 0, name
        assert [e[0] for e in entry["enc"]] == [weights] * entry["shape"][0], name
        assert ("bits" in entry["const"]) == (weights == 4), name
        assert record.graph.consts[entry["id"] + 1].dtype == np.dtype(dtype), name
    for name in ("c1.b", "c2.b"):
        assert stored[name]["const"]["dtype"] == "int32" and len(stored[name]["enc"]) == 8
    # the stored integers are the integer path's own, and run bit for bit as it does
    x = feeds(bundle.model, seed=5)
    got = record.runner().run(x, raw=True)
    want = QuantizedSession(from_bundle(bundle)).run_quantized(x, list(got))
    assert all(np.array_equal(got[k], want[k].reshape(got[k].shape)) for k in got)
    assert got["logits"].dtype == np.uint8


def test_4_bit_packing_round_trips() -> None:
    rng = np.random.default_rng(3)
    for count in (0, 1, 2, 7, 64, 1001):
        signed = rng.integers(-8, 8, count).astype(np.int8)
        packed = pack4(signed)
        assert packed.dtype == np.uint8 and packed.size == (count + 1) // 2
        assert np.array_equal(unpack4(packed, count, np.dtype(np.int8)), signed)
        unsigned = rng.integers(0, 16, count).astype(np.uint8)
        assert np.array_equal(unpack4(pack4(unsigned), count, np.dtype(np.uint8)), unsigned)
    # low nibble first: [1, -2, 3] -> 0xE1, 0x03
    assert pack4(np.array([1, -2, 3], np.int8)).tolist() == [0xE1, 0x03]


def test_int8_record_bytes_are_near_the_quantized_parameter_bytes() -> None:
    model = net(width=64)
    bundle = quantized(model, 8)
    data = prepare(bundle, level=2, precision="int8").record()
    qmodel = from_bundle(bundle)
    params = sum(model.weights[n].size * encs[0].bitwidth // 8
                 for n, encs in qmodel.params.items())
    floats = sum(model.weights[n].nbytes for n in qmodel.params)
    assert params > 35_000 and len(data) <= 1.3 * params < floats / 2


def rounded(model: Model) -> Model:
    """The model with float16 weights and every node's output rounded to float16 (Casts)."""
    nodes: list[Node] = []
    for node in model.graph.nodes:
        exact = [f"{o}@exact" for o in node.outputs]
        nodes.append(replace(node, outputs=tuple(exact)))
        for o, e in zip(node.outputs, exact, strict=True):
            nodes += [Node.make(f"{o}.half", "Cast", [e], [f"{o}@half"], {"to": 10}),
                      Node.make(f"{o}.float", "Cast", [f"{o}@half"], [o], {"to": 1})]
    weights = {k: v.astype(np.float16).astype(np.float32) for k, v in model.weights.items()}
    return Model(replace(model.graph, nodes=tuple(nodes), values=()), weights)


def test_fp16_records_round_every_op_to_float16() -> None:
    model = net()
    outputs = {"tensors": ["s", "logits"]}
    compiled = prepare(model, level=1, outputs=outputs, precision="fp16")
    record = read_record(compiled.record())
    stored = consts(record)
    assert {stored[n]["const"]["dtype"] for n in ("c1.w", "c2.b", "head.w")} == {"float16"}
    x = feeds(model, seed=2)
    got = record.runner().run(x)
    assert all(np.array_equal(got[k], v) for k, v in
               Runner(compiled.graph, compiled.io, "fp16").run(x).items())
    exact = Session(model).run(x, ["s", "logits"])
    # the model with its input, weights and every node's output rounded to float16 (level 1
    # keeps the model's ops one for one): the same values, but for a float32 difference that
    # would cross a float16 rounding boundary; float32 results almost never equal them
    half = {k: v.astype(np.float16).astype(np.float32) for k, v in x.items()}
    oracle = Session(rounded(model)).run(half, ["s", "logits"])
    for name in ("s", "logits"):
        ulp = np.spacing(np.abs(oracle[name]).astype(np.float16)).astype(np.float32)
        assert np.all(np.abs(got[name] - oracle[name]) <= 2 * ulp), name
        assert np.mean(got[name] == oracle[name]) >= 0.9, name
        scale = float(np.abs(exact[name]).max())
        assert 2e-5 * scale <= np.abs(got[name] - exact[name]).max() <= 1e-2 * scale, name
    fp32 = read_record(prepare(model, level=1, outputs=outputs, precision="fp32").record())
    assert all(np.abs(v - exact[k]).max() <= 1e-6 * np.abs(exact[k]).max()
               for k, v in fp32.runner().run(x).items())
    assert {consts(fp32)[n]["const"]["dtype"] for n in ("c1.w", "head.w")} == {"float32"}


def test_a_record_whose_packing_or_axis_contradicts_its_encodings_is_refused() -> None:
    from ..test_crafted_files import craft_record

    data = prepare(quantized(net(), 4), level=2, precision="int8").record()
    record = read_record(data)
    i = next(k for k, v in enumerate(record.body["values"]) if v["name"] == "c1.w")
    cases = [({"bits": 3}, "bits"), ({"bits": 4, "dtype": "int16"}, "bits"),
             ({"axis": 1}, "axis"), ({"axis": 4}, "axis")]
    for change, field in cases:
        body = copy.deepcopy(record.body)
        body["values"][i]["const"].update(change)
        with pytest.raises(UserError) as info:
            read_record(craft_record(body, key=record.key), "r.udr")
        assert info.value.problem.field == f"values[{i}].const.{field}", info.value
    body = copy.deepcopy(record.body)
    del body["values"][i]["enc"]
    with pytest.raises(UserError, match="4-bit encodings"):
        read_record(craft_record(body, key=record.key), "r.udr")
