"""Multi-graph records (compiler/record_graphs.py, record format 3): two graphs of one model at
two input dimensions hold their constants once, each graph reads back as its own record did
(round trip, bit-exact runs, also when the constants are streamed), the runtime picks a graph
by its dimensions, and damaged or mislabelled records are refused with the field at fault."""

from __future__ import annotations

import hashlib
import json
import os
import struct
import subprocess
import sys
from functools import cache
from typing import Any

import numpy as np
import pytest

from udo_build.canonical import canonical_json
from udo_build.compiler import record_graphs
from udo_build.compiler.record import (
    GRAPHS_VERSION,
    VERSION,
    combine_records,
    combine_records_to,
    pack_record,
    read_header,
    read_record,
    summaries,
)
from udo_build.errors import UserError
from udo_build.runtime.records import RunSettings, choose_record
from udo_build.soc.target import CompileTarget

from .helpers import REPO, G, feeds, prepare, quantized

ONE = {"input": [1, 16, 8, 8]}
TWO = {"input": [2, 16, 12, 8]}


@cache
def records() -> tuple[Any, bytes, bytes]:
    """A quantized three-convolution net (weights dominate its record, as an LLM's do) and its
    int8 records at ONE and TWO."""
    g = G()
    h = g.op("Relu", g.conv("input", 16, 64, "c1"), out="r1")
    h = g.op("Relu", g.conv(h, 64, 64, "c2"), out="r2")
    g.conv(h, 64, 32, "logits")
    bundle = quantized(g.model(ONE, ["logits"]))
    one = prepare(bundle, precision="int8", dims=ONE).record()
    two = prepare(bundle, precision="int8", dims=TWO).record()
    return bundle, one, two


def test_two_graphs_take_at_most_1_05_times_the_bytes_of_one() -> None:
    _, one, two = records()
    both = combine_records([("one", one), ("two", two)])
    sizes = read_header(both)[0]["sizes"]
    assert sizes["constant_bytes"] == read_header(one)[0]["sizes"]["constant_bytes"]
    assert len(both) <= 1.05 * len(one), (len(both), len(one))
    assert len(both) < 0.6 * (len(one) + len(two))  # the weights are not there twice


SCRIPT = """
import hashlib, sys
from pathlib import Path
from udo_build.compiler.record import combine_records
one, two = Path(sys.argv[1]).read_bytes(), Path(sys.argv[2]).read_bytes()
print(hashlib.sha256(combine_records([("one", one), ("two", two)])).hexdigest())
"""


def test_the_combined_bytes_are_the_same_under_another_hash_seed(tmp_path: Any) -> None:
    """The same two records combine to the same bytes in a process of another hash seed (the
    records are made here and handed over: the test models' weights come of a generator that
    earlier tests have drawn from)."""
    _, one, two = records()
    here = hashlib.sha256(combine_records([("one", one), ("two", two)])).hexdigest()
    (tmp_path / "one.udr").write_bytes(one)
    (tmp_path / "two.udr").write_bytes(two)
    env = {**os.environ, "PYTHONHASHSEED": "7"}
    out = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path / "one.udr"),
                          str(tmp_path / "two.udr")], env=env, capture_output=True, text=True,
                         check=True, cwd=REPO)
    assert out.stdout.strip() == here


def test_a_combined_record_written_to_a_file_has_the_same_bytes_and_canonical_json(
        tmp_path: Any) -> None:
    """The combine step writes its record to a file (combine_records_to: an LLM's is hundreds
    of megabytes), each graph's JSON written as its record is read: the bytes of
    combine_records, whose payload JSON is canonical."""
    import zstandard

    _, one, two = records()
    both = combine_records([("one", one), ("two", two)])
    head = combine_records_to([("two", lambda: two), ("one", lambda: one)], tmp_path / "r.udr")
    assert (tmp_path / "r.udr").read_bytes() == both and both.startswith(head)
    header, end = read_header(head)
    payload = zstandard.ZstdDecompressor().decompress(both[end:])
    (n,) = struct.unpack_from("<Q", payload)
    text = payload[8:8 + n]
    assert text == canonical_json(json.loads(text)) and n == header["sizes"]["graph_json"]


def test_each_graph_reads_back_as_its_own_record_and_runs_bit_exact() -> None:
    bundle, one, two = records()
    both = combine_records([("two", two), ("one", one)])
    assert both == combine_records([("one", one), ("two", two)])  # the names' order
    for name, data, dims in (("one", one, ONE), ("two", two, TWO)):
        alone, shared = read_record(data), read_record(both, "both", name)
        assert shared.key == {**alone.key, "graph": name}
        assert shared.graph.text() == alone.graph.text()
        x = feeds(bundle.model, dims)
        got, want = shared.runner().run(x, raw=True), alone.runner().run(x, raw=True)
        assert got.keys() == want.keys()
        assert all(np.array_equal(got[k], want[k]) for k in want)


def test_streamed_constants_equal_kept_ones(monkeypatch: pytest.MonkeyPatch) -> None:
    _, one, two = records()
    both = combine_records([("one", one), ("two", two)])
    kept = read_record(both, "both", "two").constants.arrays()
    monkeypatch.setattr(record_graphs, "KEEP", 0)  # re-read from the payload when asked
    shared = read_record(both, "both", "two")
    assert shared.constants.kept is None
    streamed = shared.constants.arrays()
    assert kept.keys() == streamed.keys()
    assert all(np.array_equal(kept[k], streamed[k]) and kept[k].dtype == streamed[k].dtype
               for k in kept)


def test_the_cache_info_has_a_row_per_graph_and_one_graph_records_stay_version_2() -> None:
    _, one, two = records()
    both = combine_records([("one", one), ("two", two)])
    assert struct.unpack_from("<I", one, 8)[0] == VERSION == 2
    assert struct.unpack_from("<I", both, 8)[0] == GRAPHS_VERSION == 3
    header, _ = read_header(both)
    rows = summaries(header, len(both))
    assert [(r["graph"], r["dims"]) for r in rows] == [
        ("one", "input=1x16x8x8"), ("two", "input=2x16x12x8")]
    assert header["key"]["graphs"] == ["one", "two"] and "input_dimensions" not in header["key"]
    assert summaries(read_header(one)[0], len(one))[0]["dims"] == "input=1x16x8x8"


def test_a_graph_must_be_named_and_exist() -> None:
    _, one, two = records()
    both = combine_records([("one", one), ("two", two)])
    with pytest.raises(UserError, match=r"holds 2 graphs \(one, two\): name the graph"):
        read_record(both, "both")
    with pytest.raises(UserError, match=r"holds 2 graphs \(one, two\): it has no graph 'ar1'"):
        read_record(both, "both", "ar1")
    with pytest.raises(UserError, match="holds one graph, it has no graph 'one'"):
        read_record(one, "one", "one")


def test_graphs_of_equal_dimensions_are_refused() -> None:
    _, one, _ = records()
    with pytest.raises(UserError, match="graphs a and b have the same input dimensions"):
        combine_records([("a", one), ("b", one)])


def _error(data: bytes, graph: str = "one") -> UserError:
    with pytest.raises(UserError) as info:
        read_record(data, "bad.udr", graph)
    return info.value


def test_truncated_and_corrupt_multi_graph_records_are_refused() -> None:
    _, one, two = records()
    both = combine_records([("one", one), ("two", two)])
    assert "truncated" in str(_error(both[:-100]))
    assert "truncated or corrupt" in str(_error(both[:200]))
    flipped = bytearray(both)
    flipped[-1000] ^= 0xFF  # inside the zstd frame
    assert "corrupt" in str(_error(bytes(flipped)))
    assert "not supported" in str(_error(both[:8] + struct.pack("<I", 6) + both[12:]))


def _repacked(both: bytes, edit: Any) -> bytes:
    """`both` with its header and payload JSON edited by `edit(header, doc)` (packed again, so
    its digest and sizes are right: only the edit is wrong)."""
    header, _ = read_header(both)
    records = [read_record(both, "both", g["name"]) for g in header["graphs"]]
    doc = {"graphs": [{**r.body, "graph": r.key["graph"]} for r in records]}
    arrays = [raw for _, raw in _distinct(r.constants for r in records)]
    fields = {k: header[k] for k in ("key", "graphs")}
    fields["sizes"] = {"graphs": len(records)}
    edit(fields, doc)
    return pack_record(fields, json.dumps(doc, sort_keys=True).encode(), arrays, GRAPHS_VERSION)


def _distinct(all_constants: Any) -> list[tuple[int, np.ndarray]]:
    found: dict[int, np.ndarray] = {}
    for constants in all_constants:
        for const, raw in constants.stored():
            found.setdefault(const.offset, raw)
    return sorted(found.items(), key=lambda pair: pair[0])


def test_a_well_packed_copy_reads_and_each_mislabelling_names_its_field() -> None:
    _, one, two = records()
    both = combine_records([("one", one), ("two", two)])
    assert read_record(_repacked(both, lambda h, d: None), "ok", "two").graph.text() == \
        read_record(both, "both", "two").graph.text()

    def twice(h: dict[str, Any], d: dict[str, Any]) -> None:
        h["graphs"][1]["name"] = "one"
    assert _error(_repacked(both, twice)).problems[0].field == "graphs[1].name"

    def renamed(h: dict[str, Any], d: dict[str, Any]) -> None:
        d["graphs"][1]["graph"] = "three"
    assert _error(_repacked(both, renamed)).problems[0].field == "graphs[1].graph"

    def overlapping(h: dict[str, Any], d: dict[str, Any]) -> None:
        values = [v for v in d["graphs"][1]["values"] if "const" in v]
        big = max(values, key=lambda v: int(np.prod(v["const"]["shape"])))
        big["const"]["offset"] += 64  # into the next constant, but inside the payload
    error = _error(_repacked(both, overlapping))
    assert "overlaps" in str(error) and error.problems[0].field.startswith(("graphs", "sizes"))

    def bad_value(h: dict[str, Any], d: dict[str, Any]) -> None:
        d["graphs"][0]["values"][0]["dtype"] = "object"
    assert _error(_repacked(both, bad_value), "two").problems[0].field == \
        "graphs[0].values[0].dtype"


ROWS = [
    {"part": "records/m.udr", "graph": "one", "arch": "v73", "vtcm_mb": 8, "level": 2,
     "precision": "int8", "input_dimensions": ONE, "output_tensors": ["logits"]},
    {"part": "records/m.udr", "graph": "two", "arch": "v73", "vtcm_mb": 8, "level": 2,
     "precision": "int8", "input_dimensions": TWO, "output_tensors": ["logits"]},
]


def _settings(dims: dict[str, list[int]]) -> RunSettings:
    return RunSettings("r", "sm8550", CompileTarget("v73", 8, 2, dims, "default", "int8"))


@pytest.mark.parametrize(("dims", "graph"), [({}, "one"), (ONE, "one"), (TWO, "two")])
def test_the_runtime_picks_the_graph_whose_dimensions_the_run_has(
        dims: dict[str, list[int]], graph: str) -> None:
    choice = choose_record({"records": ROWS}, _settings(dims), ONE, ["logits"])
    assert (choice.part, choice.graph) == ("records/m.udr", graph)
    assert choice.loaded("n")["graph"] == graph
    other = "two" if graph == "one" else "one"
    assert [name for name, _ in choice.seen] == [f"records/m.udr#{other}"]


def test_dimensions_no_graph_has_prepare_online_with_a_warning() -> None:
    choice = choose_record({"records": ROWS}, _settings({"input": [3, 16, 8, 8]}), ONE,
                           ["logits"])
    assert choice.part is None and choice.graph is None and choice.available == 2
    report = choice.online()
    assert report["online_prepare"] is True and "prepared online" in report["warning"]
    assert all("input dimensions" in why for _, why in choice.seen)


def test_a_bundle_without_graphs_chooses_as_before() -> None:
    rows = [{k: v for k, v in row.items() if k != "graph"} | {"part": f"records/{i}.udr"}
            for i, row in enumerate(ROWS)]
    choice = choose_record({"records": rows}, _settings(TWO), ONE, ["logits"])
    assert (choice.part, choice.graph) == ("records/1.udr", None)
    assert "graph" not in choice.loaded("n")



def test_info_shows_each_graph_of_a_multi_graph_record(tmp_path: Any) -> None:
    import io

    from udo_build.cli import main

    _, one, two = records()
    path = tmp_path / "both.udr"
    path.write_bytes(combine_records([("one", one), ("two", two)]))
    out = io.StringIO()
    assert main(["info", str(path), "--json"], stdout=out, stderr=io.StringIO(), env={}) == 0
    shown = json.loads(out.getvalue())["graphs"]
    assert [(g["record"]["graph"], g["record"]["dims"]) for g in shown] == [
        ("one", "input=1x16x8x8"), ("two", "input=2x16x12x8")]
    text = io.StringIO()
    assert main(["info", str(path)], stdout=text, stderr=io.StringIO(), env={}) == 0
    assert "graph one" in text.getvalue() and "graph two" in text.getvalue()
    single = tmp_path / "one.udr"
    single.write_bytes(one)
    out = io.StringIO()
    assert main(["info", str(single), "--json"], stdout=out, stderr=io.StringIO(), env={}) == 0
    assert json.loads(out.getvalue())["record"]["dims"] == "input=1x16x8x8"
