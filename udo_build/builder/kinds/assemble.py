"""`assemble`: the bundle and every prepared record -> the deployable bundle (the analog of a DLC
holding HTP cache records).

Each distinct record is one part `records/<sha256 prefix>.udr`; records with the same
identifier and other input dimensions or outputs coexist. The bundle's meta `records` lists
them as the vendor's "Cache Info" rows (name, identifier, size, level, arch, VTCM, dims,
outputs) plus the part that holds each, its precision, input dimensions and output tensors,
so `udo-build info` shows them and the runtime chooses among them without decompressing any.
A multi-graph record (prepare.graphs: the combine step's, udo_build.compiler.record_graphs) is
one part with a row per graph, each naming its `graph`: the runtime picks a graph as it picks a
record, and loads that graph of the part.

A partitioned target's prepare step gives a record set (udo_build.compiler.subnets): each of
its records is a record of the bundle like any other, its row naming its subnet (`subnet`: the
index; its identifier is `<graph>:subnet<i>`), and the meta `runtimes` keeps the recipe's
runtime choices (input `runtimes`, when the recipe states any) so that a run and `udo-build
info` find the same subnets (udo_build.compiler.partition). A record set cut into parts
(prepare.max_record_bytes, udo_build.compiler.parts) adds its cuts to the meta `parts`
({"precision", "outputs", "cuts"} per distinct one, sorted), so that a run cuts the graph as
its prepare did and chains the parts' records.

The output is a file of parts (udo_build.store.parts): the head (header, graph, weights and the
bundle's own parts) is a new blob, each record part is the prepare step's own blob. The store
keeps every record once, and this step reads each record once (for its header and to check it),
writing only the head. In the output folder it is one ordinary bundle file.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ...canonical import canonical_json
from ..actions import ActionContext, action_kind
from .inputs import numbered

if TYPE_CHECKING:
    from ..action_io import Produced


# version 2: the deployable bundle is a file of parts sharing the records' blobs; its records
# are a set (equal records of two SoCs with the same arch and VTCM, or another order, key the
# same)
@action_kind("assemble", version=2, params=(), set_inputs=("record",))
def assemble(ctx: ActionContext) -> Produced:
    from ...compiler.record import read_header, record_keys, summary
    from ...ir.bundle import External, read_bundle, split_segments
    from ..action_io import FileOfParts, Produced

    bundle = read_bundle(ctx.input_reader("bundle"), "bundle")
    external: dict[str, External] = {}
    blobs = {}
    rows = []
    cuts: list[dict[str, Any]] = []
    names = numbered(ctx, "record")
    for name in names:
        for part, data, subnet in _records(ctx, name, cuts):
            key = f"records/{part.digest[:16]}.udr"
            if key in external or key in bundle.parts:
                continue  # an identical record: stored once
            header, _ = read_header(data, name)
            external[key] = External(part.size, part.digest)
            blobs[key] = part
            for graph, own in record_keys(header):  # a multi-graph record: a row per graph
                rows.append({**summary({"key": own}, part.size), "part": key,
                             "precision": own.get("precision"),
                             "input_dimensions": own.get("input_dimensions") or {},
                             "output_tensors": sorted(own.get("output_tensors") or []),
                             **({"graph": graph} if graph is not None else {}),
                             **({"subnet": subnet} if subnet is not None else {})})
    rows.sort(key=lambda r: (r["arch"], r["vtcm_mb"], r["level"], r["name"], r["part"],
                             r.get("graph", "")))
    meta = {**bundle.meta, "records": rows}
    if cuts:
        meta["parts"] = sorted({canonical_json(c): c for c in cuts}.values(),
                               key=canonical_json)
    if "runtimes" in ctx.input_names():
        meta["runtimes"] = json.loads(ctx.input_bytes("runtimes"))
    deployable = bundle.with_parts(meta=meta)
    # its weights read one at a time, when stored; the records are the prepares' blobs
    segments, _, size = split_segments(deployable, external, blobs)
    return Produced({"bundle": FileOfParts(segments, size)}, description=(
        f"assemble {bundle.model.graph.name}: {len(blobs)} distinct records "
        f"({len(rows)} graphs) from {len(names)} targets"))


def _records(ctx: ActionContext, name: str, cuts: list[dict[str, Any]]
             ) -> Iterator[tuple[Any, bytes, int | None]]:
    """The records of input `name` (part, bytes, subnet index): the record itself, or each of a
    record set's, each the blob the prepare step stored (shared, not copied); a set's cuts into
    parts are added to `cuts`."""
    from ...compiler.record import read_header
    from ...compiler.subnets import read_record_set
    from ...store.parts import Part, parse_layout

    part, data = ctx.input_part(name)
    if not data.startswith(b"{") or parse_layout(data) is None:  # a record, not a set's parts
        yield part, data, None
        return
    reader = ctx.input_reader(name)
    found, entries = read_record_set(reader, name)
    for i, entry in enumerate(entries):
        data = bytes(reader.read(entry.offset, entry.size))
        if i == 0 and found.get("cuts"):
            precision = read_header(data, name)[0]["key"].get("precision")
            cuts.append({"precision": precision, "outputs": found["outputs"],
                         "cuts": found["cuts"]})
        yield Part(0, entry.sha256, entry.size), data, entry.subnet
