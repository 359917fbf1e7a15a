"""`parts`: a bundle, the tensors its targets ask for and a limit on record bytes -> the cuts
that split its graph into sequential parts (output `cuts`: the canonical JSON of
udo_build.compiler.parts.PartsPlan: the limit, the cut nodes, each part's nodes, estimated
bytes and boundary tensors).

Planned only when the recipe sets `prepare.max_record_bytes`: one per bundle and output set the
targets prepare (never per SoC: the cuts depend on the graph, the weights' widths and the limit
alone); each of those prepares reads the output as its input `parts` (a recipe without the limit
keys its prepares as before). Parameters: `max_record_bytes` and `precision` (the record's
constant widths: udo_build.compiler.parts.constant_sizes) enter the key; `at` (file, line,
column, field of the limit in the recipe) is for messages only. Input `runtimes` (when the
recipe states runtime choices): the cuts fall inside the HTP subnets.

A node whose constants alone pass the limit is a UserError at `prepare.max_record_bytes`: no
cut makes that part small enough.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ...errors import UserError
from ..actions import ActionContext, action_kind

if TYPE_CHECKING:
    from ..action_io import Produced


@action_kind("parts", version=1, params=("max_record_bytes", "precision"))
def parts(ctx: ActionContext) -> Produced:
    from ...canonical import canonical_json
    from ...compiler.parts import PartTooLarge, constant_sizes, plan_parts
    from ...ir.bundle import read_bundle
    from ..action_io import Produced
    from .prepare import partition_of

    bundle = read_bundle(ctx.input_reader("bundle"), "bundle")
    outputs = json.loads(ctx.input_bytes("outputs"))
    limit, precision = int(ctx.params["max_record_bytes"]), str(ctx.params["precision"])
    by_runtime = partition_of(ctx, bundle, outputs, cut=False)
    try:
        plan = plan_parts(bundle.model, by_runtime, constant_sizes(bundle, precision), limit,
                          precision, outputs)
    except PartTooLarge as exc:
        file, line, column, field = ctx.params.get("at") or (None, None, None, None)
        raise UserError(str(exc), file=file, line=line, column=column, field=field,
                        hint=f"a limit of at least {exc.needed:,} bytes") from None
    shown = "; ".join(f"{p.first} .. {p.last} ({p.nodes} nodes, ~{p.estimated_bytes:,} "
                      f"bytes) -> {', '.join(p.outputs) or '-'}" for p in plan.parts)
    return Produced({"cuts": canonical_json(plan.to_json())}, description=(
        f"parts of {bundle.model.graph.name} ({precision}) under {limit:,} bytes a record: "
        f"{len(plan.parts)} part(s): {shown}"))
