"""Benchmark: a record's bytes against the bytes its constants take on the device.

    python bench/record_size.py [--model resnet50] [--soc sm8550] [--level 2]

The light model of the onnx wheel (random weights by role, bench/_light_models.py), quantized
int8 per channel (tf quantizer, 2 random calibration inputs), prepared for the SoC at the
level: the int8 record's bytes against its quantized parameter bytes (every parameter with an
encoding: count x bitwidth / 8, weights at their width and biases at theirs; target at most
RATIO), and the fp16 record's bytes against 2 bytes per float parameter. The record's own
constant section is printed beside (the rest is the graph's JSON, zstd-compressed with it).
Exits 1 if the int8 target is missed.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _light_models as light  # noqa: E402

RATIO = 1.3


def _target(soc: str, level: int, precision: str):  # type: ignore[no-untyped-def]
    from udo_build.soc.table import builtin_socs
    from udo_build.soc.target import CompileTarget

    row = builtin_socs()[soc]
    return CompileTarget(row.arch, row.vtcm_mb or 8, level, {}, "default", precision)


def _mb(n: float) -> str:
    return f"{n / 1e6:.1f} MB"


def main(argv: list[str] | None = None) -> int:
    from udo_build.compiler import compile_bundle, read_header
    from udo_build.ir.bundle import Bundle
    from udo_build.ir.qmodel import to_bundle
    from udo_build.model.onnx_import import import_onnx
    from udo_build.quant.pipeline import quantize_model

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50", choices=light.NAMES)
    parser.add_argument("--soc", default="sm8550")
    parser.add_argument("--level", type=int, default=2)
    args = parser.parse_args(argv)

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
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
