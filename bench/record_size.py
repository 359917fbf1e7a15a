"""Benchmark: a record's bytes against the bytes its constants take on the device, and a
weight-shared record of two graphs against a record of one.

    python bench/record_size.py [--model resnet50] [--soc sm8550] [--level 2]

The light model of the onnx wheel (random weights by role, bench/_light_models.py), quantized
int8 per channel (tf quantizer, 2 random calibration inputs), prepared for the SoC at the
level: the int8 record's bytes against its quantized parameter bytes (every parameter with an
encoding: count x bitwidth / 8, weights at their width and biases at theirs; target at most
RATIO), and the fp16 record's bytes against 2 bytes per float parameter. The record's own
constant section is printed beside (the rest is the graph's JSON, zstd-compressed with it).

Multi-graph records (issue 28, item 3): recipes/llm_tiny.yaml's tiny Llama
(examples/llama/model/llama_tiny.onnx with its custom RMSNorm and RoPE), quantized as that
recipe does (16-bit activations, 8-bit weights per channel, tf) over 2 of its calibration
steps, prepared for the SoC at the level at AR-128 (its own dimensions) and AR-1 (one token
over 255 cached, context 256), int8 and fp16: the record combining both graphs
(compiler/record_graphs.py) against the larger of the two one-graph records (target at most
GRAPHS_RATIO) and against their sum.

Exits 1 if a target is missed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _light_models as light  # noqa: E402

RATIO = 1.3
GRAPHS_RATIO = 1.05
REPO = Path(__file__).resolve().parent.parent
LLAMA = REPO / "examples" / "llama"
AR1 = {"input_ids": [1, 1], "position_ids": [1, 1], "attention_mask": [1, 1, 1, 256],
       **{f"past_{kind}_{i}": [1, 2, 255, 32] for kind in ("key", "value") for i in (0, 1)}}
OUTPUTS = ["logits", *(f"present_{kind}_{i}" for i in (0, 1) for kind in ("key", "value"))]


def _target(soc: str, level: int, precision: str, dims: dict[str, list[int]] | None = None,
            outputs: object = "default") -> Any:
    from udo_build.soc.table import builtin_socs
    from udo_build.soc.target import CompileTarget

    row = builtin_socs()[soc]
    return CompileTarget(row.arch, row.vtcm_mb or 8, level, dims or {}, outputs, precision)


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50", choices=light.NAMES)
    parser.add_argument("--soc", default="sm8550")
    parser.add_argument("--level", type=int, default=2)
    args = parser.parse_args(argv)

    from udo_build.compiler import compile_bundle, read_header  # after --help: none needed there
    from udo_build.ir.bundle import Bundle
    from udo_build.ir.qmodel import to_bundle
    from udo_build.model.onnx_import import import_onnx
    from udo_build.quant.pipeline import quantize_model

    model = import_onnx(light.randomized(args.model, 0, import_onnx))
    first = model.graph.inputs[0]
    samples = [{first.name: np.random.default_rng(s).standard_normal(
        first.static_shape).astype(np.float32)} for s in range(2)]
    qmodel = quantize_model(model, {}, samples, {"per_channel": True})
    weights = qmodel.model.weights  # batch norms folded into the convolutions
    count = sum(weights[n].size for n in qmodel.params)
    quantized = sum(weights[n].size * encs[0].bitwidth / 8 for n, encs in qmodel.params.items())
    floats = sum(w.size for w in model.weights.values() if w.dtype == np.float32)

    int8 = compile_bundle(to_bundle(qmodel, None, {}),
                          _target(args.soc, args.level, "int8")).record()
    fp16 = compile_bundle(Bundle(model, None, {}),
                          _target(args.soc, args.level, "fp16")).record()
    ratio, half = len(int8) / quantized, len(fp16) / (2 * floats)
    print(f"{args.model}: {count:,} quantized parameters, {floats:,} float parameters; "
          f"{args.soc} O{args.level}")
    print("| record | bytes | constants stored | against | ratio |")
    print("| --- | --- | --- | --- | --- |")
    for name, data, base, text in (("int8", int8, quantized, "quantized parameter bytes"),
                                   ("fp16", fp16, 2 * floats, "2 bytes per parameter")):
        sizes = read_header(data)[0]["sizes"]
        print(f"| {name} | {_mb(len(data))} | {_mb(sizes['constant_bytes'])} | "
              f"{_mb(base)} ({text}) | {len(data) / base:.3f} |")
    ok = ratio <= RATIO
    print(f"\nint8 record / quantized parameter bytes = {ratio:.3f} (target <= {RATIO}): "
          f"{'PASS' if ok else 'FAIL'}; fp16 record / 2 bytes per parameter = {half:.3f}")
    shared = graphs(args.soc, args.level)
    return 0 if ok and shared else 1


def _llama() -> tuple[Any, Any, Any]:
    """The tiny Llama's float and quantized bundles and its packages (as llm_tiny.yaml)."""
    from udo_build.errors import Diagnostics
    from udo_build.ir.bundle import Bundle
    from udo_build.ir.qmodel import to_bundle
    from udo_build.kernels.load import packages_for
    from udo_build.model.input_list import feeds, parse_input_list
    from udo_build.model.onnx_import import import_onnx, load_onnx
    from udo_build.opdef import recipe_package
    from udo_build.quant.pipeline import quantize_model

    examples = REPO / "examples"
    opdefs = recipe_package(None, None, None, [examples / "decoder/ops/rope.xml",
                                               examples / "encoder/ops/rmsnorm.xml"],
                            Diagnostics())
    model = import_onnx(load_onnx(LLAMA / "model/llama_tiny.onnx"), opdefs=opdefs)
    bundle = Bundle(model, opdefs.to_json(), {})
    packages = packages_for(bundle, [examples / "decoder/ops/kernels.py",
                                     examples / "encoder/ops/kernels.py"])
    listing = parse_input_list(LLAMA / "data/calib_ar128.txt", REPO)
    samples = list(feeds(listing, list(model.graph.inputs)))[:2]
    qmodel = quantize_model(model, packages, samples, {
        "act_bitwidth": 16, "weights_bitwidth": 8, "per_channel": True, "quantizer": "tf"})
    return bundle, to_bundle(qmodel, bundle.opdefs, {}), packages


def graphs(soc: str, level: int) -> bool:
    """The weight-shared record of AR-128 and AR-1 against one graph's record; True if every
    precision meets GRAPHS_RATIO."""
    from udo_build.compiler import compile_bundle
    from udo_build.compiler.record import combine_records

    bundle, qbundle, packages = _llama()
    outputs = {"tensors": OUTPUTS}
    print(f"\ntiny Llama (recipes/llm_tiny.yaml), {soc} O{level}: AR-128 and AR-1 at context 256")
    print("| precision | AR-128 record | AR-1 record | both, weight-shared | against the larger "
          "| against both apart |")
    print("| --- | --- | --- | --- | --- | --- |")
    ok = True
    for precision, source in (("int8", qbundle), ("fp16", bundle)):
        ar128, ar1 = (compile_bundle(source, _target(soc, level, precision, dims, outputs),
                                     packages).record() for dims in ({}, AR1))
        both = combine_records([("ar128", ar128), ("ar1", ar1)])
        larger = max(len(ar128), len(ar1))
        ratio = len(both) / larger
        ok &= ratio <= GRAPHS_RATIO
        print(f"| {precision} | {len(ar128):,} | {len(ar1):,} | {len(both):,} | {ratio:.3f} | "
              f"{len(both) / (len(ar128) + len(ar1)):.3f} |")
    print(f"\nweight-shared record of 2 graphs / the larger one-graph record <= {GRAPHS_RATIO}: "
          f"{'PASS' if ok else 'FAIL'}")
    return ok


if __name__ == "__main__":
    sys.exit(main())
