"""Block scales in a record's payload, not its JSON (record_blocks.py): records of block weights
are format 4 (5 with several graphs), read back with the very encodings and integers; records
without blocks stay formats 2 and 3."""

from __future__ import annotations

import json
import struct
from functools import cache
from typing import Any

import numpy as np
import pytest

from udo_build.compiler import record_blocks
from udo_build.compiler.record import combine_records, read_record
from udo_build.errors import UserError
from udo_build.ir.bundle import Bundle
from udo_build.ir.qmodel import to_bundle
from udo_build.quant.pipeline import quantize_model

from .helpers import G, feeds, prepare

DIMS = {"x": [1, 4, 128]}
OTHER = {"x": [1, 2, 128]}


@cache
def bundle(lpbq: bool) -> Bundle:
    """x @ w1 -> Relu -> @ w2: weights quantized per block of 32 (LPBQ or PER_BLOCK)."""
    g = G()
    g.const("w1", np.random.default_rng(7).standard_normal((128, 96)).astype(np.float32))
    g.const("w2", np.random.default_rng(8).standard_normal((96, 64)).astype(np.float32))
    h = g.op("Relu", g.op("MatMul", "x", "w1", out="h"), out="r")
    g.op("MatMul", h, "w2", out="y")
    model = g.model(DIMS, ["y"])
    samples = [feeds(model, seed=s) for s in range(2)]
    settings = {"act_bitwidth": 16, "weights_bitwidth": 4, "weights_block_size": 32,
                "lpbq": lpbq, "quantizer": "tf"}
    return to_bundle(quantize_model(model, {}, samples, settings), None, {})


def _payload_json(data: bytes) -> dict[str, Any]:
    import zstandard

    (length,) = struct.unpack_from("<I", data, 12)
    payload = zstandard.ZstdDecompressor().decompress(data[16 + length:])
    (n,) = struct.unpack_from("<Q", payload)
    return json.loads(payload[8:8 + n])  # type: ignore[no-any-return]


@pytest.mark.parametrize("lpbq, dtype", [(True, "uint8"), (False, "float64")])
def test_block_scales_are_stored_in_the_payload_and_read_back_exactly(lpbq: bool,
                                                                      dtype: str) -> None:
    compiled = prepare(bundle(lpbq), precision="int8", dims=DIMS)
    data = compiled.record()
    assert struct.unpack_from("<I", data, 8)[0] == 4
    values = [v for v in _payload_json(data)["values"] if "block_scales" in v]
    assert values and all(v["block_scales"]["dtype"] == dtype for v in values)
    assert all("block_scales" not in e[4] for v in values for e in v["enc"])  # no numbers
    record = read_record(data)
    compiled_encs = {compiled.graph.names[v]: t.enc for v, t in compiled.graph.types.items()}
    for vid, t in record.graph.types.items():
        if t.enc and t.enc[0].blocked:
            assert t.enc == compiled_encs[record.graph.names[vid]]
    x = feeds(bundle(lpbq).model, seed=5)
    assert all(np.array_equal(a, b) for a, b in zip(
        record.runner().run(x, raw=True).values(), compiled_runner(compiled, x), strict=True))


def compiled_runner(compiled: Any, x: dict[str, np.ndarray]) -> list[np.ndarray]:
    from udo_build.compiler import Runner

    return list(Runner(compiled.graph, compiled.io, "int8", None, compiled.settings)
                .run(x, raw=True).values())


def test_graphs_of_block_weights_combine_into_format_5_sharing_their_scales() -> None:
    one = prepare(bundle(True), precision="int8", dims=DIMS).record()
    two = prepare(bundle(True), precision="int8", dims=OTHER).record()
    both = combine_records([("one", one), ("two", two)])
    assert struct.unpack_from("<I", both, 8)[0] == 5
    for name, alone in (("one", one), ("two", two)):
        graph, again = read_record(both, "both", name).graph, read_record(alone).graph
        assert {graph.names[v]: t.enc for v, t in graph.types.items()} == \
            {again.names[v]: t.enc for v, t in again.types.items()}
    # each weight's scales are stored once, shared by both graphs
    bodies = _payload_json(both)["graphs"]
    spans = [{(v["name"], v["block_scales"]["offset"]) for v in body["values"]
              if "block_scales" in v} for body in bodies]
    assert spans[0] == spans[1] and spans[0]


def test_a_record_without_block_weights_is_still_format_2() -> None:
    g = G()
    g.const("w", np.ones((128, 64), np.float32))
    g.op("MatMul", "x", "w", out="y")
    model = g.model(DIMS, ["y"])
    q = quantize_model(model, {}, [feeds(model)], {"per_channel": True})
    data = prepare(to_bundle(q, None, {}), precision="int8", dims=DIMS).record()
    assert struct.unpack_from("<I", data, 8)[0] == 2


def test_scales_that_are_not_positive_are_refused_naming_the_value(
        monkeypatch: pytest.MonkeyPatch) -> None:
    made = record_blocks.grid_of

    def zeroed(encs: Any) -> Any:
        grid = made(encs)
        if grid is not None:
            grid = grid.copy()
            grid[0, 0] = 0
        return grid

    monkeypatch.setattr("udo_build.compiler.record.grid_of", zeroed)
    data = prepare(bundle(True), precision="int8", dims=DIMS).record()
    with pytest.raises(UserError, match="block scales are not all positive") as caught:
        _ = read_record(data, "bad.udr").graph
    assert "block_scales" in str(caught.value)


def test_a_large_record_is_read_into_maps_and_keeps_no_second_description(
        monkeypatch: pytest.MonkeyPatch) -> None:
    from udo_build.compiler import record
    from udo_build.ir import weights

    data = prepare(bundle(True), precision="int8", dims=DIMS).record()
    x = feeds(bundle(True).model, seed=6)
    want = read_record(data).runner().run(x, raw=True)
    monkeypatch.setattr(record, "KEEP", 0)  # constants read again when the graph is
    monkeypatch.setattr(weights, "SPILL_FROM", 1)  # built, each spilled (a large record's)
    large = read_record(data)
    assert "values" in large.body
    got = large.runner().run(x, raw=True)
    assert "values" not in large.body and "io" in large.body  # the graph holds them now
    assert all(weights._mapping(a) is not None for a in large.graph.consts.values()
               if a.nbytes)
    assert all(np.array_equal(got[k], want[k]) for k in want)
