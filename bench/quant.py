"""Benchmark: quantization accuracy and the int8 path's latency, against onnxruntime, in one run.

    python bench/quant.py [--models resnet50,squeezenet] [--calibration 32] [--held-out 16]
                          [--quantizers enhanced,tf] [--methods MinMax,Percentile,Entropy]
                          [--repeats 10] [--warmup 2] [--threads 1] [--seed 0] [--no-timing]
                          [--smoke] [--profile] [--numpy]

For each model (the onnx wheel's light ResNet-50 and SqueezeNet with random weights drawn by role,
seed --seed, batch norms calibrated, residual branches ending with gamma 0.2;
bench/_light_models.py), --calibration N(0, 1) inputs (seed+1) and --held-out ones (seed+2):

- udo-build: `quantize_model` (the quantize pipeline: prepare, calibrate, encodings) with 8-bit
  activations, 8-bit per-channel weights, 32-bit biases and each quantizer; the emulator's int8
  path (`QuantizedSession`) runs the held-out inputs;
- onnxruntime: the float model at opset 17 (per-channel Q/DQ needs 13), `quant_pre_process`
  (shape inference, batch norms folded), then `quantize_static` (QDQ, QUInt8 activations, QInt8
  per-channel weights) with each calibration method on the same calibration inputs; ORT runs it
  with graph optimizations off (`ort_session(fuse=False)`: its Q/DQ pairs as written around
  float ops, the quantization's own accuracy on any CPU; the figure through its fused int8
  kernels, which saturate on x86 CPUs without VNNI, is printed beside).

Accuracy: output SQNR of the logits (the input of the final Softmax) against the float model over
all held-out inputs, 10 log10(sum ref^2 / sum (ref - q)^2) dB, and top-1 agreement with the float
model. Latency (batch 1, medians of --repeats runs after --warmup, one phase per --threads
count, the runtimes taking turns in blocks of --block runs so that load drift hits them alike):
the int8 path with numpy's BLAS on N threads, onnxruntime (intra_op_num_threads N) on
udo-build's QDQ export of the same quantized model (`udo_build.quant.qdq`), and on its own
MinMax QDQ model, and udo-build's float path (`udo_build.runtime.float_session`) on the float
model. Only 1 thread is measured by default: with more, OpenBLAS's and onnxruntime's
idle workers spin on the same cores in one process, and neither figure means much.

Targets: the enhanced quantizer's SQNR >= the best of onnxruntime's calibrations, per model;
ResNet-50's int8 latency <= our float path's and <= 3x onnxruntime's on the QDQ export, 1 thread
each (issue 27). Prints a table and PASS/FAIL per target; exits 1 if one is missed.

--profile: for each timed model, where the int8 run's time goes next to the float path's: per kind
of plan step (by op, convolutions by kernel and stride), the least thread CPU time of each step
over --repeats runs, summed per kind (CPU time, so that the load of other processes counts less);
then the integer path's own work inside those steps (`PARTS`: the requantizations, the 8-bit pair
lookups of Add/Sum/Mul, the GEMMs, centering and im2col; the rest of a convolution is mostly its
weights made float32 operands), each call's least thread CPU time over --repeats runs, summed;
then cProfile's top functions of three int8 runs.

--numpy: the int8 path timed a second time in the same blocks with its compiled passes off
(UDO_BUILD_NATIVE_KERNELS=0: udo_build.kernels.compiled's numpy fallback), the A/B of them.

--kernels-of DIR: also the int8 path on another checkout's compiled kernels (DIR, its root: the
C before a change) against this one's and the float path, a session each in this process, the
turns rotated round by round, thread CPU medians and 10th percentiles, 1 thread; the int8
outputs must be the same bits (bench/_kernels_of.py).

--smoke: SqueezeNet only, 8 calibration and 4 held-out inputs, the enhanced quantizer against
onnxruntime's MinMax, 3 timed runs: the accuracy target is checked, the latencies are printed
but not held to the targets (too few runs to mean anything); well under a minute.
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import gc
import importlib
import io
import os
import pstats
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _light_models as light  # noqa: E402
from emulator import Blas, _kind, environment  # noqa: E402

RATIO = 3.0  # int8 / onnxruntime on the QDQ export
FLOAT_RATIO = 1.0  # int8 / our float path
RATIO_MODEL = "resnet50"
TARGET_QUANTIZER = "enhanced"
SETTINGS = {"act_bitwidth": 8, "weights_bitwidth": 8, "bias_bitwidth": 32, "per_channel": True}

Feeds = list[dict[str, np.ndarray]]


@dataclass
class Accuracy:
    label: str  # "udo-build enhanced", "ORT MinMax"
    sqnr: float
    top1: float
    seconds: float  # quantization time


@dataclass
class Row:
    model: str
    results: list[Accuracy] = field(default_factory=list)
    times: dict[str, list[float]] = field(default_factory=dict)  # config -> seconds

    def median_ms(self, config: str) -> float:
        return statistics.median(self.times[config]) * 1e3 if self.times.get(config) else 0.0

    def best_ort(self) -> Accuracy | None:
        theirs = [r for r in self.results if r.label.startswith("ORT")]
        return max(theirs, key=lambda r: r.sqnr) if theirs else None


# -- data and metrics ----------------------------------------------------------------------------


def inputs(model: Any, count: int, seed: int) -> Feeds:
    x = model.graph.inputs[0]
    rng = np.random.default_rng(seed)
    return [{x.name: rng.standard_normal(x.static_shape).astype(np.float32)}
            for _ in range(count)]


def sqnr_db(reference: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> float:
    ref = np.concatenate([np.ravel(r) for r in reference]).astype(np.float64)
    out = np.concatenate([np.ravel(o) for o in outputs]).astype(np.float64)
    noise = float(np.sum((ref - out) ** 2))
    return float("inf") if noise == 0 else 10 * np.log10(float(np.sum(ref ** 2)) / noise)


def top1(reference: Sequence[np.ndarray], outputs: Sequence[np.ndarray]) -> float:
    same = [int(np.argmax(r)) == int(np.argmax(o)) for r, o in zip(reference, outputs,
                                                                    strict=True)]
    return sum(same) / len(same)


# -- the two quantizers --------------------------------------------------------------------------


def ours(model: Any, calibration: Feeds, held_out: Feeds, logits: str, reference: list,
         quantizer: str) -> tuple[Accuracy, Any]:
    from udo_build.quant.pipeline import quantize_model
    from udo_build.runtime.integer import QuantizedSession

    start = time.perf_counter()
    qmodel = quantize_model(model, {}, calibration, {**SETTINGS, "quantizer": quantizer})
    seconds = time.perf_counter() - start
    session = QuantizedSession(qmodel)
    outputs = [session.run(feed, [logits])[logits] for feed in held_out]
    return Accuracy(f"udo-build {quantizer}", sqnr_db(reference, outputs),
                    top1(reference, outputs), seconds), qmodel


def ort_static(proto: Any, calibration: Feeds, held_out: Feeds, logits: str, reference: list,
               method: str, folder: Path, per_channel: bool = True) -> tuple[Accuracy, Path]:
    import onnx
    from onnx import version_converter
    from onnxruntime.quantization import (
        CalibrationDataReader,
        CalibrationMethod,
        QuantFormat,
        QuantType,
        quantize_static,
    )
    from onnxruntime.quantization.shape_inference import quant_pre_process

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.feeds = iter(calibration)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.feeds, None)

    float_path, pre_path = folder / "float.onnx", folder / "pre.onnx"
    out_path = folder / f"qdq_{method}.onnx"
    start = time.perf_counter()
    onnx.save(version_converter.convert_version(proto, 17), os.fspath(float_path))
    quant_pre_process(os.fspath(float_path), os.fspath(pre_path))
    quantize_static(os.fspath(pre_path), os.fspath(out_path), Reader(),
                    quant_format=QuantFormat.QDQ, activation_type=QuantType.QUInt8,
                    weight_type=QuantType.QInt8, per_channel=per_channel,
                    calibrate_method=getattr(CalibrationMethod, method))
    seconds = time.perf_counter() - start
    exact = ort_session(out_path.read_bytes(), 1, fuse=False)
    outputs = [exact.run([logits], feed)[0] for feed in held_out]
    fused = ort_session(out_path.read_bytes(), 1)
    kernels = sqnr_db(reference, [fused.run([logits], feed)[0] for feed in held_out])
    result = Accuracy(f"ORT {method}", sqnr_db(reference, outputs), top1(reference, outputs),
                      seconds)
    print(f"  (ORT {method} through onnxruntime's fused int8 kernels on this CPU: {kernels:.2f} "
          f"dB; the quantization itself: {result.sqnr:.2f} dB)", flush=True)
    return result, out_path


def ort_session(model: bytes, threads: int, fuse: bool = True) -> Any:
    """An onnxruntime CPU session. fuse=False: no graph optimizations, so a QDQ model's
    Quantize/DequantizeLinear pairs run as written around float ops (the quantization's own
    numbers, the same on every CPU) instead of fused int8 kernels, whose uint8 x int8 products
    saturate int16 pair sums on x86 CPUs without VNNI (ShuffleNet: 21.7 dB fused, 31.0 dB as
    written, MinMax)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    if not fuse:
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    return ort.InferenceSession(model, options, providers=["CPUExecutionProvider"])


# -- one model -----------------------------------------------------------------------------------


def bench_model(name: str, args: argparse.Namespace, blas: Blas, folder: Path) -> Row:
    from udo_build.model.onnx_import import import_onnx
    from udo_build.runtime.float_session import Session

    proto, logits = with_logits(light.randomized(name, args.seed, import_onnx))
    model = import_onnx(proto)
    calibration = inputs(model, args.calibration, args.seed + 1)
    held_out = inputs(model, args.held_out, args.seed + 2)
    session = Session(model)
    reference = [session.run(feed, [logits])[logits] for feed in held_out]
    row = Row(name)
    qmodels = {}
    for quantizer in args.quantizers.split(","):
        result, qmodels[quantizer] = ours(model, calibration, held_out, logits, reference,
                                          quantizer)
        row.results.append(result)
        print(f"  {name} {result.label}: {result.sqnr:.2f} dB", flush=True)
    ort_models = {}
    for method in [m for m in args.methods.split(",") if m]:
        result, ort_models[method] = ort_static(proto, calibration, held_out, logits,
                                                reference, method, folder / name)
        row.results.append(result)
        print(f"  {name} {result.label}: {result.sqnr:.2f} dB", flush=True)
    if not args.no_timing:
        qmodel = qmodels.get(TARGET_QUANTIZER) or next(iter(qmodels.values()))
        static = ort_models.get("MinMax")
        time_model(row, qmodel, static, session, held_out[0], args, blas)
        if args.profile:
            profile(name, qmodel, session, held_out[0], args, blas)
    return row


def with_logits(proto: Any) -> tuple[Any, str]:
    """The model with the logits, the input of its last Softmax (a softmax over 1000 classes
    squeezes differences), as an extra graph output; and their name."""
    from onnx import shape_inference

    softmax = [n for n in proto.graph.node if n.op_type == "Softmax"]
    if not softmax:
        return proto, proto.graph.output[0].name
    logits = softmax[-1].input[0]
    if logits not in {o.name for o in proto.graph.output}:
        inferred = shape_inference.infer_shapes(proto).graph.value_info
        proto.graph.output.extend(v for v in inferred if v.name == logits)
    return proto, logits


def time_model(row: Row, qmodel: Any, static: Path | None, float_session: Any,
               feed: dict[str, np.ndarray], args: argparse.Namespace, blas: Blas) -> None:
    """Blocks of --block runs of each runtime in turn, one phase per thread count."""
    from udo_build.quant.qdq import to_qdq
    from udo_build.runtime.integer import QuantizedSession

    gc.collect()  # the calibration's onnxruntime sessions and their thread pools go first
    session = QuantizedSession(qmodel)
    outputs = [t.name for t in qmodel.model.graph.outputs]
    export = to_qdq(qmodel).SerializeToString()
    initial = blas.threads() or 1
    for n in [int(t) for t in args.threads.split(",")]:
        blas.set_threads(n)
        runs: list[tuple[str, Callable[[], object]]] = [
            (f"int8-{n}", lambda: session.run(feed)),
            (f"float-{n}", lambda: float_session.run(feed)),
            (f"ort-export-{n}", _ort_run(ort_session(export, n), outputs, feed))]
        if args.numpy:
            runs.append((f"int8-numpy-{n}", _numpy_passes(lambda: session.run(feed))))
        if static is not None:
            runs.append((f"ort-static-{n}", _ort_run(ort_session(static.read_bytes(), n),
                                                     outputs, feed)))
        for _, fn in runs:
            for _ in range(args.warmup):
                fn()
        for start in range(0, args.repeats, args.block):
            for config, fn in runs:
                for _ in range(min(args.block, args.repeats - start)):
                    begin = time.perf_counter()
                    fn()
                    row.times.setdefault(config, []).append(time.perf_counter() - begin)
    blas.set_threads(initial)
    if args.kernels_of:
        kernels_of(row.model, qmodel, float_session, feed, args, blas)


def kernels_of(name: str, qmodel: Any, float_session: Any,
               feed: dict[str, np.ndarray], args: argparse.Namespace, blas: Blas) -> None:
    """--kernels-of DIR: the int8 path on this checkout's kernels and on DIR's, and the float
    path, in this process, turns rotated, 1 thread (bench/_kernels_of.py)."""
    from _kernels_of import compare, library_of, using

    from udo_build.runtime.integer import QuantizedSession

    theirs = library_of(Path(args.kernels_of))
    # two fresh sessions alike (a session that has run other phases first measures slower)
    own, other = QuantizedSession(qmodel), QuantizedSession(qmodel)
    mine, their = own.run(feed), using(theirs, lambda: other.run(feed))()
    if not all(np.array_equal(mine[n], their[n]) for n in mine):
        raise SystemExit(f"--kernels-of {args.kernels_of}: the int8 outputs differ from this "
                         "checkout's (the integer path is exact: a bug on one side)")
    runs = {"int8": lambda: own.run(feed),
            "int8 theirs": using(theirs, lambda: other.run(feed)),
            "float": lambda: float_session.run(feed)}
    print(f"  {name}: int8 on this checkout's kernels against {args.kernels_of}'s (thread CPU, "
          f"1 thread, {args.repeats} rotated rounds; the same int8 bits):")
    compare(runs, "float", blas, args.warmup, args.repeats)


def profile(name: str, qmodel: Any, float_session: Any, feed: dict[str, np.ndarray],
            args: argparse.Namespace, blas: Blas) -> None:
    """Per kind of plan step, int8 against float (see --profile), then cProfile of int8."""
    from udo_build.runtime.integer import QuantizedSession

    session = QuantizedSession(qmodel)
    initial = blas.threads() or 1
    blas.set_threads(1)
    least: dict[str, dict[tuple[int, str], float]] = {"int8": {}, "float": {}}
    for _ in range(args.repeats):
        for path, times in (("int8", _int8_steps(session, feed)),
                            ("float", _float_steps(float_session, feed))):
            for key, spent in times.items():
                least[path][key] = min(least[path].get(key, spent), spent)
    kinds: dict[str, dict[str, list[float]]] = {}
    for path, times in least.items():
        for (_, kind), spent in times.items():
            kinds.setdefault(kind, {}).setdefault(path, []).append(spent)
    total = {p: sum(t.values()) * 1e3 for p, t in least.items()}
    print(f"\nprofile of {name}, 1 thread, least thread CPU time per step over {args.repeats} "
          f"runs: int8 {total['int8']:.1f} ms, float {total['float']:.1f} ms")
    print(f"  {'step kind':<26} {'int8 n':>6} {'int8 ms':>8} {'float n':>7} {'float ms':>8}")
    for kind, paths in sorted(kinds.items(), key=lambda kv: -sum(kv[1].get("int8", [0]))):
        q, f = paths.get("int8", []), paths.get("float", [])
        print(f"  {kind:<26} {len(q):>6} {sum(q) * 1e3:8.2f} {len(f):>7} {sum(f) * 1e3:8.2f}")
    _print_parts(session, feed, args.repeats)
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(3):
        session.run(feed)
    profiler.disable()
    text = io.StringIO()
    pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(10)
    lines = text.getvalue().splitlines()
    header = next(i for i, line in enumerate(lines) if "ncalls" in line)
    print("  cProfile of 3 int8 runs, by own time:")
    print("\n".join("    " + line for line in lines[header:] if line.strip()))
    blas.set_threads(initial)


PARTS = (  # (module, attribute, label): the integer path's own work, timed where it is called
    ("udo_build.runtime.integer.fixed", "Requant.apply", "requantization"),
    ("udo_build.runtime.integer.fuse", "LookedUp.apply", "requantization + residual Add"),
    ("udo_build.runtime.integer.eltwise", "lookup", "pair lookups (Add, Sum, Mul)"),
    ("udo_build.runtime.integer.exact", "gemm", "GEMM (bias in)"),
    ("udo_build.runtime.integer.taps", "gemm", "GEMM (per tap)"),
    ("udo_build.runtime.integer.exact", "_by_rows", "GEMM (weights cast in)"),
    ("udo_build.runtime.integer.conv", "centered", "centering"),
    ("udo_build.runtime.integer.taps", "_centered_padded", "centering (padded)"),
    ("udo_build.runtime.integer.conv", "im2col", "im2col"),
    ("udo_build.runtime.integer.passes", "im2col", "im2col (compiled, centering in)"),
)


def _print_parts(session: Any, feed: dict[str, np.ndarray], repeats: int) -> None:
    """The least thread CPU time of each call of each of PARTS over `repeats` int8 runs,
    summed per part (a call inside another part's counts for the outer one only)."""
    least: dict[tuple[int, str], float] = {}
    with _timed_parts() as calls:
        for _ in range(repeats):
            calls.clear()
            session.run(feed)
            for i, (label, spent) in enumerate(calls):
                least[(i, label)] = min(least.get((i, label), spent), spent)
    by_label: dict[str, float] = {}
    for (_, label), spent in least.items():
        by_label[label] = by_label.get(label, 0.0) + spent
    print(f"  the integer path's own work, least thread CPU time per call over {repeats} runs:")
    for label, spent in sorted(by_label.items(), key=lambda kv: -kv[1]):
        print(f"    {label:<30} {spent * 1e3:8.2f} ms")


@contextlib.contextmanager
def _timed_parts() -> Iterator[list[tuple[str, float]]]:
    """PARTS wrapped inside: each outermost call appends (label, thread CPU seconds) to the
    list it yields; the functions as they were after."""
    depth, calls = [0], []

    def timed(fn: Callable[..., Any], label: str) -> Callable[..., Any]:
        def call(*a: Any, **k: Any) -> Any:
            depth[0] += 1
            start = time.thread_time()
            try:
                return fn(*a, **k)
            finally:
                depth[0] -= 1
                if depth[0] == 0:
                    calls.append((label, time.thread_time() - start))
        return call

    patched = []
    try:
        for module_name, attribute, label in PARTS:
            owner: Any = importlib.import_module(module_name)
            *path, name = attribute.split(".")
            for part in path:
                owner = getattr(owner, part)
            patched.append((owner, name, getattr(owner, name)))
            setattr(owner, name, timed(getattr(owner, name), label))
        yield calls
    finally:
        for owner, name, fn in reversed(patched):
            setattr(owner, name, fn)


def _int8_steps(session: Any, feed: dict[str, np.ndarray]) -> dict[tuple[int, str], float]:
    """Each step of one int8 run: (index, kind) -> thread CPU seconds."""
    plan = session.plan(tuple(t.name for t in session.graph.outputs))
    env = dict(plan.constants)
    env.update(session._check_feeds(feed, plan))
    times = {}
    for i, step in enumerate(plan.steps):
        kind = _kind(step, [env[n] if n else None for n in step.inputs])
        start = time.thread_time()
        session._run_step(step, env, step.frees)
        times[(i, kind.replace("FusedConv", "Conv"))] = time.thread_time() - start
    return times


def _float_steps(session: Any, feed: dict[str, np.ndarray]) -> dict[tuple[int, str], float]:
    """Each step of one float run (as bench/emulator.py --profile runs them)."""
    plan = session.plan(tuple(t.name for t in session.graph.outputs))
    env = dict(plan.constants)
    env.update(feed)
    times = {}
    for i, step in enumerate(plan.steps):
        inputs = [env[n] if n else None for n in step.inputs]
        start = time.thread_time()
        result = step.fn(*inputs, **step.kwargs)
        times[(i, _kind(step, inputs).replace("FusedConv", "Conv"))] = (
            time.thread_time() - start)
        env.update(zip(step.outputs, result if isinstance(result, tuple) else (result,),
                       strict=False))
        inputs = result = None  # type: ignore[assignment]
        for dead in step.frees:
            del env[dead]
    return times


def _numpy_passes(fn: Callable[[], Any]) -> Callable[[], Any]:
    """fn run with the compiled passes switched off (UDO_BUILD_NATIVE_KERNELS=0)."""
    def run() -> Any:
        before = os.environ.get("UDO_BUILD_NATIVE_KERNELS")
        os.environ["UDO_BUILD_NATIVE_KERNELS"] = "0"
        try:
            return fn()
        finally:
            if before is None:
                del os.environ["UDO_BUILD_NATIVE_KERNELS"]
            else:
                os.environ["UDO_BUILD_NATIVE_KERNELS"] = before
    return run


def _ort_run(session: Any, outputs: list[str], feed: dict[str, np.ndarray]) -> Callable[[], Any]:
    return lambda: session.run(outputs, feed)


# -- report --------------------------------------------------------------------------------------


def report(rows: Sequence[Row], args: argparse.Namespace) -> bool:
    print(f"\n{'model':<12} {'quantization':<22} {'SQNR dB':>8} {'top-1':>7} {'quantize s':>11}")
    for row in rows:
        for r in row.results:
            print(f"{row.model:<12} {r.label:<22} {r.sqnr:8.2f} {r.top1:7.1%} {r.seconds:11.1f}")
    if not args.no_timing:
        print(f"\n{'model':<12} {'threads':>7} {'int8 ms':>8} {'float ms':>9} {'ratio':>6} "
              f"{'ORT export ms':>14} {'ratio':>6} {'ORT static ms':>14} {'ratio':>6}")
        for row in rows:
            for n in args.threads.split(","):
                ours_ms, float_ms = row.median_ms(f"int8-{n}"), row.median_ms(f"float-{n}")
                export_ms, static_ms = (row.median_ms(f"ort-{k}-{n}") for k in ("export", "static"))
                print(f"{row.model:<12} {n:>7} {ours_ms:8.1f} {float_ms:9.1f} "
                      f"{_ratio(ours_ms, float_ms):6.2f} {export_ms:14.1f} "
                      f"{_ratio(ours_ms, export_ms):6.2f} {static_ms:14.1f} "
                      f"{_ratio(ours_ms, static_ms):6.2f}")
        if args.numpy:
            for row in rows:
                for n in args.threads.split(","):
                    numpy_ms = row.median_ms(f"int8-numpy-{n}")
                    print(f"{row.model:<12} {n:>7} int8 with the compiled passes off: "
                          f"{numpy_ms:.1f} ms (compiled {row.median_ms(f'int8-{n}'):.1f} ms, "
                          f"{_ratio(numpy_ms, row.median_ms(f'int8-{n}')):.2f}x)")
        print("(medians; int8 = udo-build's integer path, numpy's BLAS on that many threads; "
              "float = udo-build's float path on the float model; ORT export = onnxruntime on "
              "udo-build's QDQ export of the same model; ORT static = onnxruntime on its own "
              "MinMax QDQ model; ratio = int8 / that column)")
    return _targets(rows, args)


def _targets(rows: Sequence[Row], args: argparse.Namespace) -> bool:
    ok = True
    for row in rows:
        mine = next((r for r in row.results if r.label == f"udo-build {TARGET_QUANTIZER}"), None)
        best = row.best_ort()
        if mine is not None and best is not None:
            passed = mine.sqnr >= best.sqnr
            ok &= passed
            print(f"  {'PASS' if passed else 'FAIL'}  {row.model}: {TARGET_QUANTIZER} SQNR "
                  f"{mine.sqnr:.2f} dB >= best onnxruntime ({best.label[4:]}) {best.sqnr:.2f} dB")
    timed = [r for r in rows if r.model == RATIO_MODEL and r.times.get("int8-1")]
    if not args.no_timing and timed:
        row = timed[0]
        for peer, label, limit in (("float-1", "our float path", FLOAT_RATIO),
                                   ("ort-export-1", "onnxruntime on the QDQ export", RATIO)):
            ratio = _ratio(row.median_ms("int8-1"), row.median_ms(peer))
            ok &= ratio <= limit
            print(f"  {'PASS' if ratio <= limit else 'FAIL'}  {RATIO_MODEL} batch 1, 1 thread: "
                  f"int8 {row.median_ms('int8-1'):.1f} ms / {label} "
                  f"{row.median_ms(peer):.1f} ms = {ratio:.2f}x (<= {limit:g}x)")
    elif args.smoke:
        print("  (smoke: latencies reported, not held to the targets)")
    return ok


def _ratio(a: float, b: float) -> float:
    return a / b if b else 0.0


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="resnet50,squeezenet")
    p.add_argument("--calibration", type=int, default=32, help="calibration inputs (32)")
    p.add_argument("--held-out", type=int, default=16, help="held-out inputs (16)")
    p.add_argument("--quantizers", default="enhanced,tf", help="udo-build quantizers")
    p.add_argument("--methods", default="MinMax,Percentile,Entropy",
                   help="onnxruntime calibration methods")
    p.add_argument("--repeats", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--block", type=int, default=5,
                   help="timed runs of one runtime before the next one's (5)")
    p.add_argument("--threads", default="1",
                   help="thread counts to time, e.g. 1,2 (the target is on 1; with 2, both "
                        "runtimes' idle workers spin on the same cores: unreliable)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-timing", action="store_true", help="accuracy only")
    p.add_argument("--profile", action="store_true",
                   help="per step kind, int8 against float, and cProfile of the int8 run")
    p.add_argument("--numpy", action="store_true",
                   help="also time the int8 path with its compiled passes off "
                        "(UDO_BUILD_NATIVE_KERNELS=0), in the same blocks: the A/B of "
                        "udo_build.kernels.compiled")
    p.add_argument("--kernels-of", metavar="DIR",
                   help="also time the int8 path on another checkout's compiled kernels (DIR: "
                        "its root) against this one's, in this process, turns rotated")
    p.add_argument("--smoke", action="store_true",
                   help="a quick check: SqueezeNet, few inputs and runs, accuracy targets only")
    args = p.parse_args(argv)
    if args.smoke:
        args.models, args.calibration, args.held_out = "squeezenet", 8, 4
        args.quantizers, args.methods, args.repeats, args.warmup, args.block = (
            TARGET_QUANTIZER, "MinMax", 3, 1, 1)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    unknown = [n for n in args.models.split(",") if n not in light.NAMES]
    if unknown:
        print(f"unknown model {unknown[0]!r}; the light models are: {', '.join(light.NAMES)}",
              file=sys.stderr)
        return 2
    blas = Blas()
    environment(blas)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            (Path(tmp) / name).mkdir()
            start = time.perf_counter()
            rows.append(bench_model(name, args, blas, Path(tmp)))
            print(f"  {name}: done in {time.perf_counter() - start:.1f} s", flush=True)
    ok = report(rows, args)
    print(f"load average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
