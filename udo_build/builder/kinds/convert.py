"""`convert`: the ONNX model (and the op definitions of its custom ops) -> the model bundle.

Input `opdef`: the op package's semantics (opdef's output without descriptions: the bundle
embeds it, so a bundle holds no description text and editing one rebuilds no bundle). Inputs
`external_data[i]`: the files the model keeps its weights in (ONNX external data), placed
beside the model in the work folder at the locations the parameter `external_data` lists (the
model names them, so its digest keys the names and theirs the bytes). Output `bundle`, the
float model as a udo-build bundle (see udo_build.ir.bundle), a file of parts: each large weight
a blob of its own, read from its external file when it is stored (one at a time), published by
the plan as `model/<model name>.udb`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from ..actions import ActionContext, action_kind

if TYPE_CHECKING:
    from ..action_io import Produced

CONVERTER = "udo-build convert 1"


# version 2: the op definitions it reads (and embeds) have no descriptions
# version 3: the graph records its ONNX opset; Reduce* axes attributes (opset <= 17) are kept;
# Resize 10 converted up keeps its asymmetric coordinates
# version 4: 0-d weights stay 0-d in the bundle (they were written as [1])
# version 5: the bundle is a file of parts (large weights each a blob), external data read
@action_kind("convert", version=5, params=())
def convert(ctx: ActionContext) -> Produced:
    import json

    from ...ir.bundle import Bundle
    from ...model.onnx_import import import_onnx, load_onnx
    from ...opdef.model import OpPackageDef
    from ..action_io import FileOfParts, Produced

    source = ctx.source_path("model") or ctx.input_path("model")
    opdefs = None
    if "opdef" in ctx.input_names():
        opdefs = OpPackageDef.from_json(json.loads(ctx.input_bytes("opdef"))["value"])
    model_file = ctx.input_path("model")
    place_external_data(ctx, model_file.parent)
    model = import_onnx(load_onnx(model_file), file=str(source), opdefs=opdefs)
    bundle = Bundle(model, opdefs.to_json() if opdefs else None, {"producer": CONVERTER})
    graph = model.graph
    udos = sorted({n.op for n in graph.nodes if n.package != "default"})
    return Produced({"bundle": FileOfParts.of_bundle(bundle)}, description=(
        f"convert {graph.name}: {len(graph.nodes)} layers"
        + (f", custom ops {', '.join(udos)}" if udos else "")))


def place_external_data(ctx: ActionContext, folder: Path) -> None:
    """Put each external data file at its location beside the model (the plan checked that
    every location stays inside the model's folder; load_onnx checks it again)."""
    for i, location in enumerate(ctx.params.get("external_data") or ()):
        written = ctx.input_path(f"external_data[{i}]")  # its own folder of the work folder
        target = folder / location.replace("\\", "/")
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(written, target)  # the same file system: moved, not copied


@action_kind("bundle-file", version=1, params=())
def bundle_file(ctx: ActionContext) -> Produced:
    """A bundle file given on the command line (`udo-build quantize BUNDLE`) stored as convert
    stores its bundle: the same parts, so the same digest, so a step reading it has the key a
    recipe's step reading convert's output has (and shares its cached result)."""
    from ...ir.bundle import load_bundle
    from ..action_io import FileOfParts, Produced

    return Produced({"bundle": FileOfParts.of_bundle(load_bundle(ctx.input_path("file")))},
                    description="store the bundle as parts")
