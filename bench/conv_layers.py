"""Benchmark: ResNet-50's convolutions one layer at a time, the emulator's compiled float kernel
against its numpy path and onnxruntime, in one process.

    python bench/conv_layers.py [--repeats 9] [--smoke] [--chain]

What it answers (issue 27 part 1): how far the emulator's float convolution is from
onnxruntime's (CPU provider, one Conv per session, intra_op_num_threads 1) layer by layer.
`compiled` is what the float session runs: the implicit GEMM of `udo_build/kernels/c/conv.c`
(compiled on first use with the host's C compiler), its weights packed once as the session
keeps them (`ConvWeights`), bias and Relu in its epilogue. `numpy` is its fallback
(UDO_BUILD_NATIVE_KERNELS=0: im2col or the wide-row taps, then numpy's OpenBLAS sgemm on 1
thread).

Each shape of the network once (its count in the totals), the three interleaved per round;
the calling thread's CPU time (a loaded machine's waits do not count; onnxruntime on 1 thread
computes on the calling thread), medians and the fastest round. Onnxruntime's single-Conv
sessions also pay a reorder into and out of its NCHWc layout that its whole-model run
(bench/emulator.py) does not: its per-layer sum is above its whole model's time.

--chain measures what a layer costs inside a model instead (with --smoke: one small shape):
per shape, a model of DEPTH equal convolutions (each followed by Relu) run as a float session
(the compiled kernel, weights packed once, dead tensors reused) and as one onnxruntime session
(its NCHWc layout kept from one convolution to the next, no reorder between them); the time
per convolution, interleaved.

Targets: both paths agree with onnxruntime within 1e-4 (max abs difference over max abs
reference). Timings are reported, not held (bench/emulator.py holds the whole model's).
--smoke (for CI): two small layers, 2 rounds. Exits 1 if a target is missed or the compiled
kernel is not available (no C compiler).
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from udo_build.kernels import blas, compiled  # noqa: E402
from udo_build.kernels.default.conv import ConvWeights, fused_conv  # noqa: E402

TOLERANCE = 1e-4
# (input channels, output channels, input size, kernel, stride, count in ResNet-50 v1.5)
LAYERS = (
    (3, 64, 224, 7, 2, 1),
    (64, 64, 56, 1, 1, 1), (64, 64, 56, 3, 1, 3), (64, 256, 56, 1, 1, 4),
    (256, 64, 56, 1, 1, 2), (256, 128, 56, 1, 1, 1), (128, 128, 56, 3, 2, 1),
    (128, 512, 28, 1, 1, 4), (256, 512, 56, 1, 2, 1), (512, 128, 28, 1, 1, 3),
    (128, 128, 28, 3, 1, 3), (512, 256, 28, 1, 1, 1), (256, 256, 28, 3, 2, 1),
    (256, 1024, 14, 1, 1, 6), (512, 1024, 28, 1, 2, 1), (1024, 256, 14, 1, 1, 5),
    (256, 256, 14, 3, 1, 5), (1024, 512, 14, 1, 1, 1), (512, 512, 14, 3, 2, 1),
    (512, 2048, 7, 1, 1, 3), (1024, 2048, 14, 1, 2, 1), (2048, 512, 7, 1, 1, 2),
    (512, 512, 7, 3, 1, 2),
)
SMOKE = ((64, 64, 28, 3, 1, 1), (128, 128, 14, 1, 1, 1))
PATHS = ("compiled", "numpy", "ort")


def ort_conv(w: np.ndarray, b: np.ndarray, shape: tuple[int, ...], k: int, stride: int):
    import onnxruntime as ort
    from onnx import TensorProto, helper, numpy_helper

    node = helper.make_node("Conv", ["x", "w", "b"], ["y"], pads=[k // 2] * 4,
                            strides=[stride, stride])
    graph = helper.make_graph(
        [node], "conv", [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [numpy_helper.from_array(w, "w"), numpy_helper.from_array(b, "b")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    options = ort.SessionOptions()
    options.intra_op_num_threads = options.inter_op_num_threads = 1
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


def error(got: np.ndarray, ref: np.ndarray) -> float:
    return float(np.abs(got - ref).max() / np.abs(ref).max())


def _numpy_path(fn):  # type: ignore[no-untyped-def]
    def run():  # type: ignore[no-untyped-def]
        os.environ[compiled.SWITCH] = "0"
        try:
            return fn()
        finally:
            del os.environ[compiled.SWITCH]
    return run


def bench_layer(layer: tuple[int, ...], repeats: int,
                rng: np.random.Generator) -> dict[str, float]:
    c, m, h, k, stride, _ = layer
    x = rng.standard_normal((1, c, h, h), dtype=np.float32)
    w = (rng.standard_normal((m, c, k, k), dtype=np.float32) / np.sqrt(c * k * k)).astype(
        np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    session = ort_conv(w, b, x.shape, k, stride)
    ref = session.run(None, {"x": x})[0]
    packed = ConvWeights(w)
    attrs = {"pads": [k // 2] * 4, "strides": [stride, stride]}
    steps = {"compiled": lambda: fused_conv(x, w, b, packed=packed, **attrs),
             "numpy": _numpy_path(lambda: fused_conv(x, w, b, **attrs)),
             "ort": lambda: session.run(None, {"x": x})[0]}
    found = {f"{name} error": error(steps[name](), ref) for name in ("compiled", "numpy")}
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            start = time.thread_time()
            step()
            times[name].append(time.thread_time() - start)
    return (found | {name: float(np.median(t)) * 1e3 for name, t in times.items()}
            | {f"{name} best": min(t) * 1e3 for name, t in times.items()})


DEPTH = 8
CHAIN = ((64, 56, 3), (256, 56, 1), (128, 28, 3), (512, 28, 1), (256, 14, 3), (1024, 14, 1),
         (512, 7, 3), (2048, 7, 1))  # (channels in and out, size, kernel): ResNet-50's stages


def chain_model(c: int, h: int, k: int):  # type: ignore[no-untyped-def]
    """DEPTH convolutions c -> c (k x k, same padding, bias) each followed by Relu."""
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(0)
    nodes, weights, current = [], [], "x"
    for i in range(DEPTH):
        w = (rng.standard_normal((c, c, k, k)) / np.sqrt(c * k * k)).astype(np.float32)
        weights += [numpy_helper.from_array(w, f"w{i}"),
                    numpy_helper.from_array((rng.standard_normal(c) * 0.1).astype(np.float32),
                                            f"b{i}")]
        nodes += [helper.make_node("Conv", [current, f"w{i}", f"b{i}"], [f"c{i}"],
                                   pads=[k // 2] * 4),
                  helper.make_node("Relu", [f"c{i}"], [f"r{i}"])]
        current = f"r{i}"
    shape = (1, c, h, h)
    graph = helper.make_graph(nodes, "chain",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, shape)],
                              [helper.make_tensor_value_info(current, TensorProto.FLOAT, shape)],
                              weights)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def chain(shapes: tuple[tuple[int, int, int], ...], repeats: int) -> int:
    import onnxruntime as ort

    from udo_build.model.onnx_import import import_onnx
    from udo_build.runtime.float_session import Session

    print(f"{'chain of ' + str(DEPTH):28} {'compiled':>8} {'ORT':>8}   comp/ORT  (ms per "
          "convolution, medians)")
    totals, worst = [0.0, 0.0], 0.0
    for c, h, k in shapes:
        model = chain_model(c, h, k)
        options = ort.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        theirs = ort.InferenceSession(model.SerializeToString(), options,
                                      providers=["CPUExecutionProvider"])
        ours = Session(import_onnx(model))
        x = np.random.default_rng(1).standard_normal((1, c, h, h)).astype(np.float32)
        ref = theirs.run(None, {"x": x})[0]
        worst = max(worst, error(next(iter(ours.run({"x": x}).values())), ref))
        times: list[list[float]] = [[], []]
        feeds = {"x": x}
        for _ in range(repeats):
            for i, (run, args) in enumerate(((ours.run, (feeds,)), (theirs.run, (None, feeds)))):
                start = time.thread_time()
                run(*args)
                times[i].append(time.thread_time() - start)
        ms = [float(np.median(t)) * 1e3 / DEPTH for t in times]
        totals = [a + b for a, b in zip(totals, ms, strict=True)]
        print(f"{f'{c}->{c} @{h} {k}x{k}':28} {ms[0]:8.2f} {ms[1]:8.2f}   {ms[0] / ms[1]:8.2f}")
    print(f"sum of one convolution per shape: compiled {totals[0]:.2f} ms, onnxruntime "
          f"{totals[1]:.2f} ms ({totals[0] / totals[1]:.2f}x)")
    ok = worst <= TOLERANCE
    print(f"  {'PASS' if ok else 'FAIL'}  chains against onnxruntime: worst max abs diff / max "
          f"abs ref = {worst:.2e} (<= {TOLERANCE})")
    print(f"load average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0 if ok else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=9, help="timed rounds (default 9)")
    parser.add_argument("--smoke", action="store_true", help="the CI size: two small layers, "
                        "2 rounds")
    parser.add_argument("--chain", action="store_true", help="per convolution inside a model: "
                        f"chains of {DEPTH} equal convolutions, a session each")
    args = parser.parse_args()
    layers, repeats = (SMOKE, 2) if args.smoke else (LAYERS, args.repeats)
    print(f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    if compiled.library() is None:
        print("  FAIL  the compiled kernel: no C compiler (cc, gcc or $CC), or it failed")
        return 1
    if args.chain:
        with blas.blas_threads(1):
            return chain(((64, 14, 3),) if args.smoke else CHAIN, repeats)
    rng = np.random.default_rng(0)
    totals = {f"{p}{s}": 0.0 for p in PATHS for s in ("", " best")}
    worst = {"compiled error": 0.0, "numpy error": 0.0}
    print(f"{'layer':28} {'compiled':>8} {'numpy':>8} {'ORT':>8}   comp/ORT  numpy/ORT"
          f"  (medians, ms)")
    with blas.blas_threads(1):
        for layer in layers:
            r = bench_layer(layer, repeats, rng)
            count = layer[-1]
            for key in totals:
                totals[key] += count * r[key]
            for key in worst:
                worst[key] = max(worst[key], r[key])
            c, m, h, k, s, _ = layer
            name = f"{c}->{m} @{h} {k}x{k} s{s} x{count}"
            print(f"{name:28} {r['compiled']:8.2f} {r['numpy']:8.2f} {r['ort']:8.2f}   "
                  f"{r['compiled'] / r['ort']:8.2f}  {r['numpy'] / r['ort']:9.2f}")
    ort, best = totals["ort"], totals["ort best"]
    print(f"sum over the network (each shape times its count), medians: compiled "
          f"{totals['compiled']:.1f} ms ({totals['compiled'] / ort:.2f}x onnxruntime), numpy "
          f"{totals['numpy']:.1f} ms ({totals['numpy'] / ort:.2f}x), onnxruntime {ort:.1f} ms")
    print(f"  fastest rounds: compiled {totals['compiled best']:.1f} ms "
          f"({totals['compiled best'] / best:.2f}x), numpy {totals['numpy best']:.1f} ms "
          f"({totals['numpy best'] / best:.2f}x), onnxruntime {best:.1f} ms")
    print("(thread CPU; BLAS on 1 thread, onnxruntime 1 thread, one Conv per session)")
    failed = 0
    for key, value in worst.items():
        ok = value <= TOLERANCE
        failed += not ok
        print(f"  {'PASS' if ok else 'FAIL'}  {key.split()[0]} path against onnxruntime: "
              f"worst max abs diff / max abs ref = {value:.2e} (<= {TOLERANCE})")
    print(f"load average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
