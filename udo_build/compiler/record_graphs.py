"""Multi-graph records: several graphs of one model in one record, their constants stored once.

An LLM ships a prompt graph (e.g. AR-128) and a token graph (AR-1) of the same weights; the
vendor's weight sharing puts both in one context binary holding one copy of the weights. Here:

    data = combine_records([("ar128", record_1), ("ar1", record_2)])  # record.py; each a
    read_record(data, file, graph="ar1")                               # one-graph record

Each graph is prepared on its own, as any record (its own cached prepare step); combining them
re-reads their payloads (checked) and writes record format version 3 (record.GRAPHS_VERSION):

    header   {"format", "version": 3, "key": the key the graphs share (arch, VTCM, level,
             outputs, precision, compiler, identifier), its "name" and "graphs" (their names),
             "graphs": [{"name", "key": the graph's own record key, "sizes"}], "sizes",
             "payload"}
    payload  the JSON {"graphs": [each graph's payload JSON (record.py) and its "graph" name]},
             then the constants: one pool, each distinct stored constant once (by the sha256
             of its stored bytes) at a 64-byte aligned offset; every graph's values name their
             offsets in it, so equal weights of two graphs (or of one) are one copy

The graphs are in the order of their names (the recipe's order of them changes no byte). A
constant's stored form (quantized, packed, fp16) is its graph's, unchanged: equal weights
prepared alike store alike. Reading checks every graph's JSON as a one-graph record's, and
that the constants of all graphs either span the same bytes or do not overlap.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..canonical import canonical_json
from ..errors import UserError
from ..ir.weights import spill
from ..schema_problems import Check
from .record_read import (
    KEEP,
    Layout,
    PayloadStream,
    align,
    check_body,
    check_key,
    read_json,
)

# what the graphs of one record share: all of their keys but the input dimensions and name
SHARED = ("identifier", "arch", "vtcm_mb", "optimization_level", "outputs", "output_tensors",
          "precision", "compiler")


class _Within(Check):
    """The checks of one graph of a multi-graph record: its fields under `graphs[i].`."""

    def __init__(self, file: str, what: str, prefix: str) -> None:
        super().__init__(file, what)
        self.prefix = prefix

    def fail(self, field: str, message: str) -> UserError:
        return super().fail(self.prefix + field, message)


def pool(records: Iterable[tuple[str, Any]], file: str = "graphs"
         ) -> tuple[dict[str, Any], bytes, list[np.ndarray], bool]:
    """The header fields (key, graphs, sizes), payload JSON (canonical: its bytes) and
    constants of a multi-graph record of these one-graph records (name, record.Record; in the
    order of their names, each dropped once read), and whether block scales are among the
    constants (record_blocks.py). They must share their key but for the input dimensions.
    Each graph's JSON is written as its record is read: what stays of a graph is its bytes,
    not its objects (an LLM's per-channel encodings are millions)."""
    offsets_of: dict[str, int] = {}  # sha256 of stored bytes -> offset in the pool
    arrays: list[np.ndarray] = []
    end = 0  # of the pool
    bodies: list[bytes] = []
    entries = []
    shared: dict[str, Any] | None = None
    blocks = False
    for name, record in records:
        own = {k: record.key.get(k) for k in SHARED}
        if shared is not None and own != shared:
            raise ValueError(f"graph {name} is not prepared like the others: {own} != {shared}")
        shared = own
        offsets, stored = {}, 0
        large = record.constants.kept is None  # over KEEP bytes: spilled to files
        for const, raw in record.constants.stored():
            digest = hashlib.sha256(raw).hexdigest()
            if digest not in offsets_of:
                offsets_of[digest] = align(end)
                end = align(end) + raw.nbytes
                arrays.append(spill(raw) if large else raw)
            offsets[const.value, const.scales] = offsets_of[digest]
            stored += const.nbytes
        values = [_placed(v, i, offsets) for i, v in enumerate(record.body["values"])]
        blocks = blocks or any("block_scales" in v for v in values)
        bodies.append(canonical_json({**record.body, "graph": name, "values": values}))
        entries.append({"name": name, "key": record.key, "sizes": {
            **{k: record.sizes[k] for k in ("ops", "peak_vtcm_bytes") if k in record.sizes},
            "constants": sum(1 for _, scales in offsets if not scales),
            "constant_bytes": stored}})
        del record, values  # not held while the next record is read
    _check_dims(entries, file)
    assert shared is not None
    key = {**shared, "name": _name(shared, [e["name"] for e in entries]),
           "graphs": [e["name"] for e in entries]}
    header = {"key": key, "graphs": entries, "sizes": {"graphs": len(entries)}}
    # canonical_json({"graphs": [body, ...]}), of the bodies' own canonical bytes
    return header, b'{"graphs":[' + b",".join(bodies) + b"]}", arrays, blocks


def _placed(value: dict[str, Any], i: int, offsets: dict[tuple[int, bool], int]
            ) -> dict[str, Any]:
    """A value's JSON entry with its constant (and block scales) at their pool offsets."""
    if "const" in value:
        value = {**value, "const": {**value["const"], "offset": offsets[i, False]}}
    if "block_scales" in value:
        value = {**value, "block_scales": {**value["block_scales"], "offset": offsets[i, True]}}
    return value


def _name(shared: dict[str, Any], graphs: list[str]) -> str:
    vtcm = shared["vtcm_mb"]
    return "/".join([str(shared["identifier"]), str(shared["arch"]), f"{vtcm}MB",
                     f"O{shared['optimization_level']}", "graphs=" + ",".join(graphs),
                     ",".join(shared.get("output_tensors") or []), str(shared["precision"])])


def _check_dims(entries: list[dict[str, Any]], file: str) -> None:
    seen: dict[str, str] = {}
    for entry in entries:
        dims = repr(sorted((entry["key"].get("input_dimensions") or {}).items()))
        if dims in seen:
            raise UserError(f"graphs {seen[dims]} and {entry['name']} have the same input "
                            "dimensions: a run could not tell them apart", file=file,
                            hint="give each graph of prepare.matrix.graphs its own dimensions")
        seen[dims] = entry["name"]


def check_graphs(header: dict[str, Any], file: str) -> None:
    """The `graphs` of a multi-graph record's header: names, keys, sizes."""
    c = Check(file, "the cache record's header")
    graphs = c.seq(header.get("graphs"), "graphs")
    if not graphs:
        raise c.fail("graphs", "a multi-graph record names at least one graph")
    names = set()
    for i, graph in enumerate(graphs):
        graph = c.obj(graph, f"graphs[{i}]")
        name = c.text(graph.get("name"), f"graphs[{i}].name")
        if name in names:
            raise c.fail(f"graphs[{i}].name", f"graph {name!r} is named twice")
        names.add(name)
        check_key(c, graph.get("key"), f"graphs[{i}].key")
        for field, value in c.obj(graph.get("sizes"), f"graphs[{i}].sizes").items():
            c.whole(value, f"graphs[{i}].sizes.{field}", 0)


def graph_names(header: dict[str, Any]) -> list[str]:
    """The graphs of a checked multi-graph record's header, in its order."""
    return [graph["name"] for graph in header["graphs"]]


def read_graphs(header: dict[str, Any], stream: PayloadStream, file: str, graph: str | None
                ) -> tuple[dict[str, Any], Layout, bytes | None]:
    """Of a multi-graph record whose payload `stream` reads: graph `graph`'s header entry,
    checked JSON and constants' layout, and the constants kept (record_read.KEEP). Every
    graph's JSON is checked, and the payload's digest; a missing or unknown name is a
    UserError naming the graphs there are."""
    names = graph_names(header)
    if graph not in names:
        what = "name the graph to load" if graph is None else f"it has no graph {graph!r}"
        raise UserError(f"the cache record holds {len(names)} graphs ({', '.join(names)}): "
                        f"{what}", file=file)
    layouts, bodies = _read_bodies(stream, header, file)
    total = max((layout.total for layout in layouts), default=0)
    kept = stream.read_rest(keep=total <= KEEP)
    if stream.digest() != header["payload"]["sha256"]:
        raise UserError("the cache record's payload is corrupt (digest mismatch)", file=file,
                        field="payload.sha256")
    i = names.index(graph)
    return {**header["graphs"][i], "body": bodies[i]}, layouts[i], kept


def _read_bodies(stream: PayloadStream, header: dict[str, Any], file: str
                 ) -> tuple[list[Layout], list[dict[str, Any]]]:
    """Each graph's checked JSON and constants' layout, in the header's order."""
    sizes, names = header["sizes"], graph_names(header)
    c = Check(file, "the cache record's payload")
    doc, n = read_json(c, stream, sizes)
    bodies = c.seq(c.obj(doc, "payload").get("graphs"), "graphs")
    if len(bodies) != len(names):
        raise c.fail("graphs", f"{len(bodies)} graphs, the header names {len(names)}")
    layouts = []
    for i, (name, body) in enumerate(zip(names, bodies, strict=True)):
        within = _Within(file, f"the cache record's graph {name!r}", f"graphs[{i}].")
        layouts.append(Layout(align(8 + n), check_body(within, body)))
        if body.get("graph") != name:
            raise within.fail("graph", f"{body.get('graph')!r}, the header names {name!r}")
    end = _pool_end(c, layouts)
    expected = align(8 + n) + end if end else 8 + n
    if expected != sizes["payload"]:
        raise c.fail("sizes.payload", f"the constants end at byte {expected}, the header "
                     f"says the payload is {sizes['payload']} bytes")
    return layouts, bodies


def _pool_end(c: Check, layouts: list[Layout]) -> int:
    """Where the shared constants end; two graphs' constants span the same bytes or none."""
    spans = sorted({(k.offset, k.nbytes) for layout in layouts for k in layout.consts})
    end = 0
    for offset, nbytes in spans:
        if offset < end:
            raise c.fail("graphs", f"a constant at byte {offset} of the constants overlaps "
                         f"another (ending at {end})")
        end = offset + nbytes
    return end
