"""`convert`: the ONNX model (and the op definitions of its custom ops) -> the model bundle.

Input `opdef`: the op package's semantics (opdef's output without descriptions: the bundle
embeds it, so a bundle holds no description text and editing one rebuilds no bundle). Output
`bundle`, the float model as a udo-build bundle (see udo_build.ir.bundle), published by the plan
as `model/<model name>.udb`.
"""

from __future__ import annotations

from ..actions import ActionContext, Produced, action_kind

CONVERTER = "udo-build convert 1"


# version 2: the op definitions it reads (and embeds) have no descriptions
# version 3: the graph records its ONNX opset; Reduce* axes attributes (opset <= 17) are kept;
# Resize 10 converted up keeps its asymmetric coordinates
# version 4: 0-d weights stay 0-d in the bundle (they were written as [1])
@action_kind("convert", version=4, params=())
def convert(ctx: ActionContext) -> Produced:
    import json

    from ...ir.bundle import Bundle
    from ...model.onnx_import import import_onnx, load_onnx
    from ...opdef.model import OpPackageDef

    source = ctx.source_path("model") or ctx.input_path("model")
    opdefs = None
    if "opdef" in ctx.input_names():
        opdefs = OpPackageDef.from_json(json.loads(ctx.input_bytes("opdef"))["value"])
    model = import_onnx(load_onnx(ctx.input_path("model")), file=str(source), opdefs=opdefs)
    bundle = Bundle(model, opdefs.to_json() if opdefs else None, {"producer": CONVERTER})
    graph = model.graph
    udos = sorted({n.op for n in graph.nodes if n.package != "default"})
    return Produced({"bundle": bundle.to_bytes()}, description=(
        f"convert {graph.name}: {len(graph.nodes)} layers"
        + (f", custom ops {', '.join(udos)}" if udos else "")))
