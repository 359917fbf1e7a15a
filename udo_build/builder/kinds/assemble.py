"""`assemble`: the bundle and every prepared record -> the deployable bundle (the analog of a DLC
holding HTP cache records).

Each distinct record is stored once, as the part `records/<sha256 prefix>.udr`; records with the
same identifier and other input dimensions or outputs coexist. The bundle's meta `records`
lists them as the vendor's "Cache Info" rows (name, identifier, size, level, arch, VTCM, dims,
outputs) plus the part that holds each, so `udo-build info` shows them and the runtime chooses
among them without decompressing any.
"""

from __future__ import annotations

from ..actions import ActionContext, Produced, action_kind
from .inputs import numbered


@action_kind("assemble", version=1, params=())
def assemble(ctx: ActionContext) -> Produced:
    import hashlib

    from ...compiler.record import read_header, summary
    from ...ir.bundle import read_bundle

    bundle = read_bundle(ctx.input_bytes("bundle"), "bundle")
    parts = dict(bundle.parts)
    rows = []
    names = numbered(ctx, "record")
    for name in names:
        data = ctx.input_bytes(name)
        part = f"records/{hashlib.sha256(data).hexdigest()[:16]}.udr"
        if part in parts:
            continue  # an identical record: stored once
        header, _ = read_header(data, name)
        parts[part] = data
        rows.append({**summary(header, len(data)), "part": part,
                     "precision": header["key"].get("precision"),
                     "input_dimensions": header["key"].get("input_dimensions") or {},
                     "output_request": header["key"].get("outputs", "default")})
    rows.sort(key=lambda r: (r["arch"], r["vtcm_mb"], r["level"], r["name"]))
    deployable = bundle.with_parts(parts=parts, meta={**bundle.meta, "records": rows})
    return Produced({"bundle": deployable.to_bytes()}, description=(
        f"assemble {bundle.model.graph.name}: {len(rows)} distinct records from "
        f"{len(names)} targets"))
