"""`udo-build export BUNDLE --qdq OUT.onnx`: a quantized bundle as a standard ONNX QDQ model
(opset 17, IR version 8) that onnxruntime and other tools run (`udo_build.quant.qdq`)."""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

from ..errors import Problem, display_path
from .reporter import Reporter


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("bundle", metavar="BUNDLE", help="a quantized bundle (.udb)")
    parser.add_argument("--qdq", metavar="OUT.onnx", required=True,
                        help="write the model as ONNX with QuantizeLinear/DequantizeLinear")


def run(args: argparse.Namespace, rep: Reporter) -> int:
    from ..atomic import Confined
    from ..ir.qmodel import from_bundle
    from ..model.op_check import load_checked_bundle
    from ..quant.qdq import to_qdq

    bundle = load_checked_bundle(args.bundle)
    qmodel = from_bundle(bundle, args.bundle)
    packages = [bundle.opdefs, *bundle.opdefs.get("members", ())] if bundle.opdefs else []
    domains = {p["name"]: p["domain"] for p in packages}  # members: each package of a set
    proto = to_qdq(qmodel, domains)
    out = Path(args.qdq)
    data = proto.SerializeToString()
    with Confined(out.parent) as folder:  # a link at OUT.onnx is refused, never followed
        folder.write(out.name, data, durable=True)
    ops = Counter(n.op_type for n in proto.graph.node)
    custom = sorted({f"{n.domain}::{n.op_type}" for n in proto.graph.node
                     if n.domain not in ("", "ai.onnx", "com.microsoft")})
    if custom:
        rep.warning(Problem(f"the model keeps custom ops {', '.join(custom)}; onnxruntime runs it "
                            "only with a custom-op library that implements them"))
    if rep.mode == "json":
        rep.emit({"ok": True, "qdq": display_path(out), "bytes": len(data),
                  "quantize_linear": ops["QuantizeLinear"],
                  "dequantize_linear": ops["DequantizeLinear"], "custom_ops": custom})
    else:
        rep.line(f"wrote {display_path(out)}: {ops['QuantizeLinear']} QuantizeLinear, "
                 f"{ops['DequantizeLinear']} DequantizeLinear, {len(proto.graph.node)} nodes")
    return 0
