"""Benchmark: `udo-build convert` and `udo-build info` against the node count, in one process.

    python bench/convert.py [--sizes 8000,16000,32000] [--big] [--repeats 1] [--profile N]

Generated residual chains (onnx.helper, opset 17): blocks of MatMul(x, W) -> Relu -> Add(x),
every fourth block with a Conv 1x1 on a reshaped copy, so that `info` has MACs to count. The
weights are small and shared, so the time is the converter's, not numpy's or protobuf's.

For each size: the model's bytes are written once; `convert` is timed as the CLI runs it (read
and parse the file, check, shape inference, import, the bundle's bytes, the description), and
`info` as the CLI runs it (read and verify the bundle, check its standard ops, the
description). The peer is onnx's own `onnx.checker.check_model` + `shape_inference.infer_shapes`
on the same model. Wall time, best of --repeats. --big adds 100k nodes.

Targets: convert of 100k nodes under 10 s (with --big); t(32k) / t(8k) at most 5 for convert and
for info. Prints a table and PASS/FAIL per target; exits 1 if one is missed.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

BIG = 100_000
BIG_LIMIT = 10.0
RATIO = 5.0
WIDTH = 8


def residual_chain(n: int) -> onnx.ModelProto:
    """A model of about `n` nodes: residual blocks MatMul -> Relu -> Add, with a Conv 1x1
    branch (Reshape -> Conv -> Reshape -> Add) in every fourth block."""
    rng = np.random.default_rng(0)
    inits = [numpy_helper.from_array((rng.standard_normal((WIDTH, WIDTH)) * 0.1)
                                     .astype(np.float32), "w"),
             numpy_helper.from_array((rng.standard_normal((WIDTH, WIDTH, 1, 1)) * 0.1)
                                     .astype(np.float32), "k"),
             numpy_helper.from_array(np.array([1, WIDTH, 1, 1], np.int64), "to4d"),
             numpy_helper.from_array(np.array([1, WIDTH], np.int64), "to2d")]
    nodes: list[onnx.NodeProto] = []
    x, k = "x", 0
    while len(nodes) < n:
        nodes += [helper.make_node("MatMul", [x, "w"], [f"m{k}"], name=f"matmul{k}"),
                  helper.make_node("Relu", [f"m{k}"], [f"r{k}"], name=f"relu{k}"),
                  helper.make_node("Add", [f"r{k}", x], [f"a{k}"], name=f"add{k}")]
        x = f"a{k}"
        if k % 4 == 3:
            nodes += [helper.make_node("Reshape", [x, "to4d"], [f"s{k}"], name=f"to4d{k}"),
                      helper.make_node("Conv", [f"s{k}", "k"], [f"c{k}"], name=f"conv{k}",
                                       kernel_shape=[1, 1]),
                      helper.make_node("Reshape", [f"c{k}", "to2d"], [f"t{k}"], name=f"to2d{k}"),
                      helper.make_node("Add", [f"t{k}", x], [f"b{k}"], name=f"join{k}")]
            x = f"b{k}"
        k += 1
    graph = helper.make_graph(
        nodes, f"residual_{n}", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, WIDTH])],
        [helper.make_tensor_value_info(x, TensorProto.FLOAT, [1, WIDTH])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def run_convert(model_path: Path, out: Path) -> int:
    """What `udo-build convert MODEL --out OUT` does, without the CLI's printing."""
    from udo_build.atomic import write_atomic
    from udo_build.builder.kinds.convert import CONVERTER
    from udo_build.ir.bundle import Bundle
    from udo_build.model.info import describe
    from udo_build.model.onnx_import import import_onnx, load_onnx

    model = import_onnx(load_onnx(model_path), file=str(model_path))
    bundle = Bundle(model, None, {"producer": CONVERTER})
    write_atomic(out, bundle.to_bytes(), readonly=False)
    return len(describe(bundle)["layers"])


def run_info(bundle_path: Path) -> int:
    """What `udo-build info BUNDLE` does, without the CLI's printing."""
    from udo_build.model.info import describe
    from udo_build.model.op_check import load_checked_bundle

    return len(describe(load_checked_bundle(bundle_path))["layers"])


def run_peer(model_path: Path) -> int:
    from onnx import shape_inference

    model = onnx.load(str(model_path))
    onnx.checker.check_model(model)
    return len(shape_inference.infer_shapes(model, strict_mode=True, data_prop=True).graph.node)


def best(fn: Callable[[], object], repeats: int) -> float:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def measure(n: int, folder: Path, repeats: int) -> dict[str, float]:
    model_path, bundle_path = folder / f"chain{n}.onnx", folder / f"chain{n}.udb"
    onnx.save(residual_chain(n), str(model_path))
    return {"convert": best(lambda: run_convert(model_path, bundle_path), repeats),
            "info": best(lambda: run_info(bundle_path), repeats),
            "peer": best(lambda: run_peer(model_path), repeats)}


def profile(n: int, folder: Path) -> None:
    model_path, bundle_path = folder / f"chain{n}.onnx", folder / f"chain{n}.udb"
    onnx.save(residual_chain(n), str(model_path))
    for name, fn in (("convert", lambda: run_convert(model_path, bundle_path)),
                     ("info", lambda: run_info(bundle_path))):
        prof = cProfile.Profile()
        prof.runcall(fn)
        print(f"--- {name}, {n} nodes")
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="8000,16000,32000")
    parser.add_argument("--big", action="store_true", help=f"also {BIG:,} nodes")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--profile", type=int, metavar="N", help="cProfile convert and info")
    parser.add_argument("--max-ratio", type=float, default=RATIO,
                        help=f"the t(32k) / t(8k) bound (default {RATIO:g}; CI's smoke run "
                             "uses 8: linear work gives 4, quadratic 16, and a busy machine "
                             "adds noise)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        if args.profile:
            profile(args.profile, Path(tmp))
            return 0
        sizes = [int(s) for s in args.sizes.split(",")] + ([BIG] if args.big else [])
        times = {}
        print("| nodes | convert s | info s | onnx check + shape inference s |")
        print("| --- | --- | --- | --- |")
        for n in sizes:
            times[n] = measure(n, Path(tmp), args.repeats)
            t = times[n]
            print(f"| {n:,} | {t['convert']:.2f} | {t['info']:.2f} | {t['peer']:.2f} |",
                  flush=True)
    return report(times, args.max_ratio)


def report(times: dict[int, dict[str, float]], max_ratio: float = RATIO) -> int:
    ok = True
    if 8000 in times and 32000 in times:
        for step in ("convert", "info"):
            ratio = times[32000][step] / times[8000][step]
            passed = ratio <= max_ratio
            ok &= passed
            print(f"{'PASS' if passed else 'FAIL'}: {step} t(32k) / t(8k) = {ratio:.2f} "
                  f"(target <= {max_ratio:g}; onnx's own: "
                  f"{times[32000]['peer'] / times[8000]['peer']:.2f})")
    if BIG in times:
        passed = times[BIG]["convert"] < BIG_LIMIT
        ok &= passed
        print(f"{'PASS' if passed else 'FAIL'}: convert of {BIG:,} nodes in "
              f"{times[BIG]['convert']:.1f} s (target < {BIG_LIMIT:g} s)")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
