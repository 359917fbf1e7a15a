"""`prepare`: a bundle (quantize's for int8, convert's for fp16) and a target -> one HTP cache
record (output `record`).

Parameters: a CompileTarget (udo_build.soc.target), in the key but for its outputs: arch,
vtcm_mb, optimization_level, input_dimensions ({} for the model's own) and precision. The
outputs are the input `outputs`, the request's tensor names resolved by the `outputs` action
(sorted JSON): equal tensor sets key equally however the recipe wrote them, and the record's
header holds the names, never the written request (kept in the params for messages only). The
plan adds the SoC's name, for messages only: two SoCs with equal arch and VTCM share one
record. Inputs named `kernels[i]` (the recipe's
numpy kernels, when the plan gives them) provide the custom ops' implementations and
optimization rules; without them custom ops keep the bundle's shapes (see
udo_build.compiler.shapes).

Input `runtimes` (when the recipe says which runtimes an op may use: the `runtimes` step's
choices) and the op definitions of the bundle decide the graph's subnets
(udo_build.compiler.partition). A graph that is one HTP subnet gives one record, as it always
did. A partitioned one gives a record set (udo_build.compiler.subnets): one record per HTP
subnet, each with its own identifier `<graph>:subnet<i>`, whose outputs include every tensor a
later subnet reads; stored as a file of parts, each record its own blob.

Input `parts` (when the recipe sets `prepare.max_record_bytes`: the `parts` step's cuts,
udo_build.compiler.parts) cuts the HTP subnets further into sequential parts, each its own
record of the set; every record is then checked against the limit: one over it is this step's
failure, naming the part and its bytes.

The record is not published in the output folder on its own: the assemble step packs every
record into the deployable bundle.

`combine`: the records of the graphs of one weight-shared record (the recipe's
prepare.matrix.graphs: one `prepare` per graph, at its input dimensions, keyed as any prepare)
-> one multi-graph record (output `record`, udo_build.compiler.record_graphs) holding each
distinct constant once.
Parameter `graphs`: the graphs' names, inputs `graph[i]` their records in that order. It only
re-reads and re-packs: changing one graph's dimensions re-runs that graph's prepare and this,
and a SoC of the same arch and VTCM as another keys both the same.
"""

from __future__ import annotations

import json
from dataclasses import replace
from functools import partial
from typing import TYPE_CHECKING, Any

from ...soc.target import CompileTarget
from ..actions import ActionContext, action_kind
from .inputs import kernel_files

if TYPE_CHECKING:
    from ..action_io import Produced

# version 2: COMPILER_VERSION 2 (the one rewrite engine's folds; every record names it)
# version 3: a custom op's kernel is named by its op package, not by a hash of the kernels
# file's path (udo_build.kernels.load): records made before were not reproducible
# version 5: records hold constants as the device does (record format 2, COMPILER_VERSION 3),
# and the outputs are the resolved tensor names of the input `outputs`, not the request
# version 6: COMPILER_VERSION 4 (computed shapes, run-time shapes on the CPU runtime, folded
# outputs as constants, 0-d constants kept)
# version 7: a record of block-quantized weights holds their block scales in its payload's
# constants, not in its JSON (record format 4, udo_build.compiler.record_blocks)
KEY_PARAMS = tuple(p for p in CompileTarget.KEY_PARAMS if p != "outputs")


@action_kind("prepare", version=7, params=KEY_PARAMS)
def prepare(ctx: ActionContext) -> Produced:
    from ...compiler import RuleLoopError, compile_bundle
    from ...ir.bundle import read_bundle
    from ..action_io import Produced

    bundle = read_bundle(ctx.input_reader("bundle"), "bundle")
    tensors = json.loads(ctx.input_bytes("outputs"))
    target = replace(CompileTarget.from_params(ctx.params), outputs={"tensors": tensors})
    packages = _packages(ctx, bundle)
    part = partition_of(ctx, bundle, tensors)
    try:
        if part.split:
            return _prepare_subnets(ctx, bundle, target, packages, part)
        compiled = compile_bundle(bundle, target, packages, progress=ctx.progress("rule passes"))
    except RuleLoopError as exc:  # the default package's rules looping: a bug of udo-build
        raise RuntimeError(str(exc)) from None
    record = ctx.workdir / "record.udr"  # stored from the file: never held in memory
    size = compiled.write_record(record)
    _check_parts(ctx, [(0, size)])
    key = compiled.key()
    memory = compiled.memory
    return Produced({"record": record}, description=(
        f"prepare {key['identifier']} for {key['arch']} ({key['vtcm_mb']} MB VTCM) "
        f"O{key['optimization_level']} {key['precision']}: {len(compiled.graph.ops)} ops, "
        f"peak VTCM {memory.peak / (1 << 20):.2f} MB, {size:,} bytes"))


def partition_of(ctx: ActionContext, bundle: Any, outputs: list[str], cut: bool = True) -> Any:
    """The subnets of the bundle's graph for these outputs, under the recipe's choices, cut
    into parts by the input `parts` when it has one (and `cut`)."""
    from ...compiler.partition import RuntimeChoices, node_runtimes, partition

    choices = RuntimeChoices()
    if "runtimes" in ctx.input_names():
        choices = RuntimeChoices.from_json(json.loads(ctx.input_bytes("runtimes")))
    plan = _parts_plan(ctx) if cut else None
    return partition(bundle.model, node_runtimes(bundle.model, bundle.opdefs, choices), outputs,
                     plan.cuts if plan is not None else ())


def _parts_plan(ctx: ActionContext) -> Any:
    """The `parts` step's cuts (udo_build.compiler.parts.PartsPlan), or None."""
    if "parts" not in ctx.input_names():
        return None
    from ...compiler.parts import PartsPlan

    return PartsPlan.from_json(json.loads(ctx.input_bytes("parts")))


def _check_parts(ctx: ActionContext, records: list[tuple[int, int]]) -> None:
    """Every part's record (subnet index, bytes) within the recipe's limit, else a StepFailed."""
    plan = _parts_plan(ctx)
    if plan is not None:
        from ...compiler.parts import check_records

        check_records(plan, records)


def _prepare_subnets(ctx: ActionContext, bundle: Any, target: CompileTarget,
                     packages: dict[str, Any], part: Any) -> Produced:
    from ...compiler.subnets import compile_subnets, record_set
    from ..action_io import FileOfParts, Produced

    prepared = compile_subnets(bundle, target, packages, part, ctx.progress("rule passes"))
    records = [(subnet.index, compiled.record()) for subnet, compiled in prepared]
    _check_parts(ctx, [(index, len(data)) for index, data in records])
    segments, size = record_set(part, records)
    shown = ", ".join(f"{s.runtime} {len(s.nodes)}" for s in part.subnets)
    if part.cuts:
        shown += f"; parts cut at {', '.join(part.cuts)}"
    sizes = ", ".join(f"{len(data):,}" for _, data in records)
    return Produced({"record": FileOfParts(segments, size)}, description=(
        f"prepare {part.graph} in {len(part.subnets)} subnets ({shown} nodes) for "
        f"{target.arch} ({target.vtcm_mb} MB VTCM) O{target.optimization_level} "
        f"{target.precision}: {len(records)} records of {sizes or 'no'} bytes"))


def _packages(ctx: ActionContext, bundle: Any) -> dict[str, Any]:
    """The custom ops' packages; none without kernels (custom ops keep the bundle's shapes)."""
    kernels = kernel_files(ctx)
    if not kernels:
        return {}
    from ...kernels.load import packages_for

    return packages_for(bundle, kernels)


# version 2: records of block-quantized weights combine into record format 5 (their block
# scales among the shared constants)
@action_kind("combine", version=2, params=("graphs",))
def combine(ctx: ActionContext) -> Produced:
    from ...compiler.record import combine_records_to, read_header
    from ..action_io import Produced

    names = ctx.params["graphs"]
    loaders = [(name, partial(_graph_record, ctx, i, name)) for i, name in enumerate(names)]
    path = ctx.workdir / "record"  # an LLM's record is written to a file, not held
    # reads the records one at a time
    header, _ = read_header(combine_records_to(loaders, path, "combine"), "combine")
    key, sizes = header["key"], header["sizes"]
    apart = sum(g["sizes"]["constant_bytes"] for g in header["graphs"])
    return Produced({"record": path}, description=(
        f"combine {len(names)} graphs ({', '.join(key['graphs'])}) for {key['arch']} "
        f"({key['vtcm_mb']} MB VTCM) O{key['optimization_level']} {key['precision']}: "
        f"{path.stat().st_size:,} bytes, constants {sizes['constant_bytes']:,} bytes shared "
        f"({apart:,} apart)"))


def _graph_record(ctx: ActionContext, i: int, name: str) -> bytes:
    """The record of graph `name` (input `graph[i]`); a record set (its layout: a model split
    into subnets) is refused as not supported."""
    from ...errors import UserError
    from ...store.parts import parse_layout

    data = ctx.input_bytes(f"graph[{i}]")
    if data.startswith(b"{") and parse_layout(data) is not None:
        raise UserError(f"graph {name}: the model is split into subnets (a custom op or an op "
                        "the HTP cannot run), and weight-shared graphs of a split model are "
                        "not supported yet", field="prepare.matrix.graphs",
                        hint="remove prepare.matrix.graphs (list the dimensions under "
                             "prepare.matrix.input_dimensions: a record each)")
    return data
