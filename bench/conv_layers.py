"""Benchmark: ResNet-50's convolutions one layer at a time, udo-build's float kernel against
onnxruntime and against a plain C direct convolution (bench/c/direct_conv.c), in one process.

    python bench/conv_layers.py [--repeats 9] [--smoke]

What it answers (issue 27 part 1): how far the emulator's float convolution (im2col or the
wide-row taps, then numpy's OpenBLAS sgemm on 1 thread; `udo_build.kernels.default.conv`) is
from onnxruntime's (CPU provider, one Conv per session, intra_op_num_threads 1) layer by layer,
and whether a compiled kernel over a channel-blocked layout closes it: the C kernel keeps the
input as NCHW8c zero-padded to rows of Wp = W + KW - 1 pixels, so that each output pixel p
reads input pixel p + kh * Wp + kw (no im2col), and holds 2 output blocks x 6 pixels of 8-float
accumulators in registers (GCC vector extensions; compiled here with `cc -O3 -march=native`,
FMA allowed: this is a measurement, not the emulator's code). Only stride-1 layers have it.

Each shape of the network once (its count in the totals), the three interleaved per round;
medians of the calling thread's CPU time (a loaded machine's waits do not count; onnxruntime
on 1 thread computes on the calling thread). Its single-Conv sessions also pay a reorder into
and out of its NCHWc layout that its whole-model run (bench/emulator.py) does not: its
per-layer sum is above its whole model's time. The layout conversions the C kernel would need
are not timed (the input is converted once, before the rounds).

Targets: both kernels agree with onnxruntime within 1e-4 (max abs difference over max abs
reference). Timings are reported, not held (bench/emulator.py holds the whole model's).
--smoke (for CI): two small layers, 2 rounds. Exits 1 if a target is missed or no C compiler
is found.
"""

from __future__ import annotations

import argparse
import ctypes
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from udo_build.kernels import blas  # noqa: E402
from udo_build.kernels.default.conv import conv  # noqa: E402

SOURCE = Path(__file__).with_name("c") / "direct_conv.c"
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


def compile_kernel(folder: Path) -> ctypes.CDLL | None:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        return None
    lib = folder / "direct_conv.so"
    subprocess.run([cc, "-O3", "-march=native", "-shared", "-fPIC", "-o", str(lib), str(SOURCE)],
                   check=True)
    found = ctypes.CDLL(str(lib))
    found.direct_conv.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int] * 6
    return found


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


class Direct:
    """The C kernel's operands for one layer, converted once: run() convolves, result() gives
    the output back as (M, H, W)."""

    def __init__(self, lib: ctypes.CDLL, x: np.ndarray, w: np.ndarray, b: np.ndarray) -> None:
        c, h = x.shape[1], x.shape[2]
        m, k = w.shape[0], w.shape[2]
        p, self.h, self.m = k // 2, h, m
        self.wp = h + 2 * p
        tw = lib.direct_conv_tile()
        size = c // 8 * self.wp * self.wp * 8
        self.x = np.zeros(size + (tw + k) * self.wp * 8, np.float32)  # slack: see the C
        self.x[:size].reshape(c // 8, self.wp, self.wp, 8)[:, p:p + h, p:p + h] = \
            x[0].reshape(c // 8, 8, h, h).transpose(0, 2, 3, 1)
        self.w = np.ascontiguousarray(
            w.reshape(m // 8, 8, c // 8, 8, k, k).transpose(0, 2, 4, 5, 3, 1))
        self.b = b
        self.n = h * self.wp
        self.y = np.zeros((m // 8, -(-self.n // tw) * tw, 8), np.float32)
        self.args = (self.x.ctypes.data, self.w.ctypes.data, self.b.ctypes.data,
                     self.y.ctypes.data, c // 8, m // 8, h, h, k, k)
        self.lib = lib

    def run(self) -> None:
        self.lib.direct_conv(*self.args)

    def result(self) -> np.ndarray:
        rows = self.y[:, :self.n].reshape(self.m // 8, self.h, self.wp, 8)[:, :, :self.h]
        return rows.transpose(0, 3, 1, 2).reshape(self.m, self.h, self.h)


def error(got: np.ndarray, ref: np.ndarray) -> float:
    return float(np.abs(got - ref).max() / np.abs(ref).max())


def bench_layer(layer: tuple[int, ...], lib: ctypes.CDLL, repeats: int,
                rng: np.random.Generator) -> dict[str, float]:
    c, m, h, k, stride, _ = layer
    x = rng.standard_normal((1, c, h, h), dtype=np.float32)
    w = (rng.standard_normal((m, c, k, k), dtype=np.float32) / np.sqrt(c * k * k)).astype(
        np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    session = ort_conv(w, b, x.shape, k, stride)
    ref = session.run(None, {"x": x})[0]
    steps = {"udo": lambda: conv(x, w, b, pads=[k // 2] * 4, strides=[stride, stride]),
             "ort": lambda: session.run(None, {"x": x})}
    found = {"udo error": error(steps["udo"](), ref)}
    direct = Direct(lib, x, w, b) if stride == 1 and c % 8 == 0 and m % 16 == 0 else None
    if direct is not None:
        direct.run()
        found["C error"] = error(direct.result(), ref[0])
        steps["C"] = direct.run
    times: dict[str, list[float]] = {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            start = time.thread_time()
            step()
            times[name].append(time.thread_time() - start)
    return found | {name: float(np.median(t)) * 1e3 for name, t in times.items()}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=9, help="timed rounds (default 9)")
    parser.add_argument("--smoke", action="store_true", help="the CI size: two small layers, "
                        "2 rounds")
    args = parser.parse_args()
    layers, repeats = (SMOKE, 2) if args.smoke else (LAYERS, args.repeats)
    print(f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    with tempfile.TemporaryDirectory() as tmp:
        lib = compile_kernel(Path(tmp))
        if lib is None:
            print("  FAIL  a C compiler (cc, gcc or $CC) to build bench/c/direct_conv.c")
            return 1
        rng = np.random.default_rng(0)
        totals = {"udo": 0.0, "ort": 0.0, "best": 0.0}
        worst = {"udo error": 0.0, "C error": 0.0}
        print(f"{'layer':32} {'udo ms':>8} {'ORT ms':>8} {'C ms':>8}  udo/ORT  C/ORT")
        with blas.blas_threads(1):
            for layer in layers:
                r = bench_layer(layer, lib, repeats, rng)
                count = layer[-1]
                totals["udo"] += count * r["udo"]
                totals["ort"] += count * r["ort"]
                totals["best"] += count * min(r["udo"], r.get("C", r["udo"]))
                for key in worst:
                    worst[key] = max(worst[key], r.get(key, 0.0))
                c, m, h, k, s, _ = layer
                name = f"{c}->{m} @{h} {k}x{k} s{s} x{count}"
                cms = f"{r['C']:8.2f}" if "C" in r else f"{'-':>8}"
                cratio = f"{r['C'] / r['ort']:6.2f}" if "C" in r else f"{'-':>6}"
                print(f"{name:32} {r['udo']:8.2f} {r['ort']:8.2f} {cms}  {r['udo'] / r['ort']:6.2f}"
                      f"  {cratio}")
    print(f"sum over the network (each shape times its count): udo-build {totals['udo']:.1f} ms, "
          f"onnxruntime {totals['ort']:.1f} ms ({totals['udo'] / totals['ort']:.2f}x); the C "
          f"kernel where it is faster: {totals['best']:.1f} ms "
          f"({totals['best'] / totals['ort']:.2f}x)")
    print("(thread CPU medians; BLAS on 1 thread, onnxruntime 1 thread, one Conv per session)")
    failed = 0
    for key, value in worst.items():
        ok = value <= TOLERANCE
        failed += not ok
        print(f"  {'PASS' if ok else 'FAIL'}  {key.split()[0]} kernel against onnxruntime: "
              f"worst max abs diff / max abs ref = {value:.2e} (<= {TOLERANCE})")
    print(f"load average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
