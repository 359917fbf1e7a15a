"""`assemble`: the bundle and every prepared record -> the deployable bundle (the analog of a DLC
holding HTP cache records).

Each distinct record is one part `records/<sha256 prefix>.udr`; records with the same
identifier and other input dimensions or outputs coexist. The bundle's meta `records` lists
them as the vendor's "Cache Info" rows (name, identifier, size, level, arch, VTCM, dims,
outputs) plus the part that holds each, its precision, input dimensions and output tensors,
so `udo-build info` shows them and the runtime chooses among them without decompressing any.

The output is a file of parts (udo_build.store.parts): the head (header, graph, weights and the
bundle's own parts) is a new blob, each record part is the prepare step's own blob. The store
keeps every record once, and this step reads each record once (for its header and to check it),
writing only the head. In the output folder it is one ordinary bundle file.
"""

from __future__ import annotations

from ..actions import ActionContext, FileOfParts, Produced, action_kind
from .inputs import numbered


# version 2: the deployable bundle is a file of parts sharing the records' blobs; its records
# are a set (equal records of two SoCs with the same arch and VTCM, or another order, key the
# same)
@action_kind("assemble", version=2, params=(), set_inputs=("record",))
def assemble(ctx: ActionContext) -> Produced:
    from ...compiler.record import read_header, summary
    from ...ir.bundle import External, read_bundle, split_bundle

    bundle = read_bundle(ctx.input_bytes("bundle"), "bundle")
    external: dict[str, External] = {}
    blobs = {}
    rows = []
    names = numbered(ctx, "record")
    for name in names:
        part, data = ctx.input_part(name)
        key = f"records/{part.digest[:16]}.udr"
        if key in external or key in bundle.parts:
            continue  # an identical record: stored once
        header, _ = read_header(data, name)
        external[key] = External(part.size, part.digest)
        blobs[key] = part
        rows.append({**summary(header, part.size), "part": key,
                     "precision": header["key"].get("precision"),
                     "input_dimensions": header["key"].get("input_dimensions") or {},
                     "output_tensors": sorted(header["key"].get("output_tensors") or [])})
    rows.sort(key=lambda r: (r["arch"], r["vtcm_mb"], r["level"], r["name"], r["part"]))
    deployable = bundle.with_parts(meta={**bundle.meta, "records": rows})
    head, placed, size = split_bundle(deployable, external)
    segments = ((0, head), *((offset, blobs[name]) for offset, name in placed))
    return Produced({"bundle": FileOfParts(segments, size)}, description=(
        f"assemble {bundle.model.graph.name}: {len(rows)} distinct records from "
        f"{len(names)} targets"))
