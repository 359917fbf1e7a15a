"""Benchmark: the emulator's float runtime against onnxruntime on the nine light CNNs of the onnx
wheel, with random weights (bench/_light_models.py says how they are drawn), in one process.

    python bench/emulator.py [--models resnet50,squeezenet] [--repeats 10] [--seed 0]
                             [--profile resnet50] [--no-timing] [--smoke]

For each model: the same N(0, 1) input (batch 1) through the emulator
(`udo_build.runtime.float_session`)
and onnxruntime (CPU provider, intra_op_num_threads 1 and 2). Accuracy: max |emulator - ORT| /
max |ORT| for every graph output and for the logits (the input of the final Softmax, compared too
because a softmax over 1000 classes squeezes differences). Latency, in two phases (1 thread,
then 2): after --warmup rounds, --repeats rounds of [emulator with numpy's BLAS on N threads,
ORT with intra_op_num_threads N], interleaved so that the load of a shared machine hits both
alike; medians (of wall-clock latency, the verdict, and of the calling thread's CPU time, printed
beside it: on one thread both runtimes compute on the calling thread, and a loaded machine's
waits do not count there).

Targets: every output agrees within 1e-4 (relative to the reference's max abs); the emulator's
latency, like for like (BLAS on 1 thread against ORT on 1 thread), is at most 1.25x ORT's for
ResNet-50 and 1.5x for SqueezeNet (issue 27). --smoke (for CI, ~10 s): SqueezeNet only, 1 warmup
and 2 timed rounds, 1 thread only; accuracy is checked, the latency targets are printed but do not
fail (a shared CI runner's timing is not a verdict).
--kernels-of DIR: each model also run on another checkout's compiled kernels (DIR, its root:
the C before a change) against this one's, a session each in this process, the turns rotated
round by round, thread CPU medians and 10th percentiles (bench/_kernels_of.py: two processes
minutes apart differ by more than most kernel changes on a shared machine).
--profile NAME: where that model's thread CPU time goes (`profile`): the whole run against
onnxruntime's in the same rounds, the runner's own dispatch, each kind of plan step (by op and
convolution kind) split into the GEMM calls it makes (timed in place) and the rest, and the same
GEMM calls replayed alone, in the model's order and warm (the floor BLAS gives).
Prints a table and PASS/FAIL per target; exits 1 if one is missed.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import os
import re
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _light_models as light  # noqa: E402

ACCURACY = 1e-4
RATIOS = {"resnet50": 1.25, "squeezenet": 1.5}  # emulator / ORT, 1 thread each, at most
SMOKE_MODEL = "squeezenet"


# -- numpy's BLAS -------------------------------------------------------------------------------


class Blas:
    """numpy's OpenBLAS, found among the loaded libraries, to read and set its thread count."""

    def __init__(self) -> None:
        self.lib, self.prefix = None, ""
        maps = Path("/proc/self/maps").read_text() if Path("/proc/self/maps").exists() else ""
        for path in sorted(set(re.findall(r"(/\S*openblas\S*\.so\S*)", maps))):
            lib = ctypes.CDLL(path)
            for prefix, suffix in (("scipy_openblas", "64_"), ("scipy_openblas", ""),
                                   ("openblas", "64_"), ("openblas", "")):
                if hasattr(lib, f"{prefix}_set_num_threads{suffix}"):
                    self.lib, self.prefix, self.suffix = lib, prefix, suffix
                    return

    def _fn(self, name: str) -> Callable[..., int]:
        return getattr(self.lib, f"{self.prefix}_{name}{self.suffix}")

    def threads(self) -> int | None:
        return None if self.lib is None else int(self._fn("get_num_threads")())

    def set_threads(self, n: int) -> None:
        if self.lib is not None:
            self._fn("set_num_threads")(n)

    def config(self) -> str:
        if self.lib is None:
            return "OpenBLAS not found among the loaded libraries"
        fn = self._fn("get_config")
        fn.restype = ctypes.c_char_p
        return fn().decode()


# -- one model ------------------------------------------------------------------------------------


@dataclass
class Row:
    name: str
    errors: dict[str, float] = field(default_factory=dict)  # output -> relative max error
    times: dict[str, list[float]] = field(default_factory=dict)  # config -> seconds

    def median_ms(self, config: str) -> float:
        return statistics.median(self.times[config]) * 1e3 if self.times.get(config) else 0.0


def _with_logits(proto):  # type: ignore[no-untyped-def]
    """The model with the input of its last Softmax as an extra graph output."""
    from onnx import shape_inference

    softmax = [n for n in proto.graph.node if n.op_type == "Softmax"]
    outputs = {o.name for o in proto.graph.output}
    if softmax and softmax[-1].input[0] not in outputs:
        inferred = shape_inference.infer_shapes(proto).graph.value_info
        proto.graph.output.extend(v for v in inferred if v.name == softmax[-1].input[0])
    return proto


def _ort(proto, threads: int):  # type: ignore[no-untyped-def]
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    options.log_severity_level = 3
    return ort.InferenceSession(proto.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


def bench_model(name: str, args: argparse.Namespace, blas: Blas, import_onnx) -> Row:  # type: ignore[no-untyped-def]
    from udo_build.runtime.float_session import Session

    proto = _with_logits(light.randomized(name, args.seed, import_onnx))
    session = Session(import_onnx(proto))
    graph = session.graph
    x = graph.inputs[0]
    feeds = {x.name: np.random.default_rng(args.seed + 1).standard_normal(x.static_shape)
             .astype(np.float32)}
    names = [t.name for t in graph.outputs]
    ort1, ort2 = _ort(proto, 1), _ort(proto, 2)
    row = Row(name)
    ours = session.run(feeds)
    theirs = dict(zip(names, ort1.run(names, feeds), strict=True))
    for out in names:
        scale = float(np.abs(theirs[out]).max()) or 1.0
        row.errors[out] = float(np.abs(ours[out] - theirs[out]).max()) / scale
    if args.no_timing:
        return row
    threads = blas.threads() or 1
    for n in args.threads:  # one phase per thread count: no idle pool thread of another spins
        blas.set_threads(n)
        ort = ort1 if n == 1 else ort2
        runs: list[tuple[str, Callable[[], object]]] = [
            (f"emu-{n}", lambda: session.run(feeds)),
            (f"ort-{n}", lambda ort=ort: ort.run(names, feeds))]
        for round_ in range(args.warmup + args.repeats):
            for config, fn in runs:
                start, cpu = time.perf_counter(), time.thread_time()
                fn()
                if round_ >= args.warmup:
                    row.times.setdefault(config, []).append(time.perf_counter() - start)
                    row.times.setdefault(f"{config}-cpu", []).append(time.thread_time() - cpu)
    blas.set_threads(threads)
    if args.kernels_of:
        kernels_of(name, proto, feeds, names, ort1, args, blas, import_onnx)
    return row


def kernels_of(name, proto, feeds, names, ort, args, blas, import_onnx) -> None:  # type: ignore[no-untyped-def]
    """--kernels-of DIR: this checkout's compiled kernels against DIR's in this process (a
    session each, the same inputs, turns rotated; bench/_kernels_of.py), BLAS on 1 thread."""
    from _kernels_of import compare, library_of, using

    from udo_build.runtime.float_session import Session

    theirs = library_of(Path(args.kernels_of))
    # two fresh sessions alike (a session that has run other phases first measures slower)
    own, other = Session(import_onnx(proto)), Session(import_onnx(proto))
    mine, their = own.run(feeds), using(theirs, lambda: other.run(feeds))()
    same = all(np.array_equal(mine[n], their[n]) for n in names)
    runs = {"ours": lambda: own.run(feeds), "theirs": using(theirs, lambda: other.run(feeds)),
            "ORT": lambda: ort.run(names, feeds)}
    print(f"  {name}: kernels of this checkout against {args.kernels_of} "
          f"(thread CPU, 1 thread, {args.repeats} rotated rounds; outputs "
          f"{'the same bits' if same else 'NOT the same bits'}):")
    compare(runs, "ORT", blas, args.warmup, args.repeats)


# -- profile ------------------------------------------------------------------------------------


@dataclass
class Calls:
    """The convolutions' kernel calls, timed where the kernels make them (thread CPU): the
    compiled convolution of each image (`conv._native`) and BLAS GEMM calls (`conv.gemm`, the
    numpy path's)."""

    spent: float = 0.0
    flops: int = 0
    kept: list[tuple] | None = None  # (fn, args, flops) of each call, to replay them

    def _timed(self, fn: Callable[..., object], args: tuple, flops: int) -> None:
        start = time.thread_time()
        fn(*args)
        self.spent += time.thread_time() - start
        self.flops += flops
        if self.kept is not None:
            self.kept.append((fn, args, flops))

    def wrap_gemm(self, gemm: Callable[..., np.ndarray]) -> Callable[..., np.ndarray]:
        def timed(a: np.ndarray, b: np.ndarray, out: np.ndarray, beta: float = 0.0):  # type: ignore[no-untyped-def]
            self._timed(gemm, (a, b, out, beta), 2 * a.shape[0] * a.shape[1] * b.shape[1])
            return out
        return timed

    def wrap_native(self, native: Callable[..., None]) -> Callable[..., None]:
        def timed(lib, x, weights, call, b, z, y, relu, **rest):  # type: ignore[no-untyped-def]
            flops = 2 * y.size * weights.weights[0].size
            self._timed(functools.partial(native, **rest), (lib, x, weights, call, b, z, y, relu),
                        flops)
        return timed


def profile(name: str, args: argparse.Namespace, blas: Blas, import_onnx) -> None:  # type: ignore[no-untyped-def]
    """Where the thread CPU time of one emulator run goes (BLAS on 1 thread, against
    onnxruntime on 1 thread in the same rounds): the whole run, its plan steps by kind, the
    convolutions' kernel calls inside them (timed in place), the rest; then the same kernel
    calls replayed alone, in the model's order (weights cold, as in a run) and each right after
    itself (warm)."""
    from udo_build.kernels.default import conv
    from udo_build.runtime.float_session import Session

    proto = _with_logits(light.randomized(name, args.seed, import_onnx))
    session, ort = Session(import_onnx(proto)), _ort(proto, 1)
    x = session.graph.inputs[0]
    feeds = {x.name: np.random.default_rng(1).standard_normal(x.static_shape).astype(np.float32)}
    names = [t.name for t in session.graph.outputs]
    blas.set_threads(1)
    plan = session.plan(tuple(names))
    calls, gemm, native = Calls(), conv.gemm, conv._native
    rounds: list[dict[str, float]] = []
    steps: dict[int, list[tuple[float, float, int]]] = {}
    kinds: dict[int, str] = {}
    conv.gemm, conv._native = calls.wrap_gemm(gemm), calls.wrap_native(native)
    try:
        for round_ in range(args.warmup + args.repeats):
            times = {"emu": _cpu_wall(lambda: session.run(feeds)),
                     "ort": _cpu_wall(lambda: ort.run(names, feeds))}
            calls.kept = [] if round_ == args.warmup + args.repeats - 1 else None
            _profile_steps(plan, feeds, calls, steps, kinds)
            if round_ >= args.warmup:
                rounds.append({f"{k}-{i}": v[i] for k, v in times.items() for i in (0, 1)})
    finally:
        conv.gemm, conv._native = gemm, native
    _print_breakdown(name, rounds, steps, kinds, _replay(calls.kept or []))


def _cpu_wall(fn: Callable[[], object]) -> tuple[float, float]:
    cpu, wall = time.thread_time(), time.perf_counter()
    fn()
    return time.thread_time() - cpu, time.perf_counter() - wall


def _profile_steps(plan, feeds, calls: Calls, steps: dict, kinds: dict) -> None:  # type: ignore[no-untyped-def]
    """One run of the plan, step by step: (thread CPU, GEMM CPU, GEMM flops) per step."""
    env = dict(plan.constants)
    env.update(feeds)
    for i, step in enumerate(plan.steps):
        inputs = [env[n] if n else None for n in step.inputs]
        kinds.setdefault(i, _kind(step, inputs))
        calls.spent, calls.flops = 0.0, 0
        start = time.thread_time()
        result = step.fn(*inputs, **step.kwargs)
        steps.setdefault(i, []).append((time.thread_time() - start, calls.spent, calls.flops))
        env.update(zip(step.outputs, result if isinstance(result, tuple) else (result,),
                       strict=False))
        inputs = result = None  # type: ignore[assignment]
        for dead in step.frees:
            del env[dead]


def _replay(kept: list[tuple]) -> tuple[float, float, int]:
    """(CPU of the kernel calls in order, CPU of each repeated right after itself, flops)."""
    cold = warm = 0.0
    flops = sum(f for _, _, f in kept)
    for _ in range(3):
        start = time.thread_time()
        for fn, args, _ in kept:
            fn(*args)
        cold += (time.thread_time() - start) / 3
    for fn, args, _ in kept:
        fn(*args)
        start = time.thread_time()
        fn(*args)
        warm += time.thread_time() - start
    return cold, warm, flops


def _print_breakdown(name: str, rounds: list[dict[str, float]], steps: dict, kinds: dict,
                     replay: tuple[float, float, int]) -> None:  # type: ignore[no-untyped-def]
    ms = {k: statistics.median(r[k] for r in rounds) * 1e3 for k in rounds[0]}
    per_step = {i: [statistics.median(v[j] for v in runs) for j in range(3)]
                for i, runs in steps.items()}
    total = sum(v[0] for v in per_step.values()) * 1e3
    in_gemm = sum(v[1] for v in per_step.values()) * 1e3
    flops = sum(v[2] for v in per_step.values())
    cold, warm, replayed = replay
    print(f"\nprofile of {name}, BLAS on 1 thread, medians of thread CPU time (wall beside) over "
          f"{len(rounds)} rounds:")
    print(f"  whole run: emulator {ms['emu-0']:.1f} ms (wall {ms['emu-1']:.1f}), onnxruntime "
          f"{ms['ort-0']:.1f} ms (wall {ms['ort-1']:.1f}): {ms['emu-0'] / ms['ort-0']:.2f}x")
    print(f"  plan steps {total:.1f} ms (the runner's own dispatch: {ms['emu-0'] - total:.1f} ms);"
          f" kernel calls inside them {in_gemm:.1f} ms ({flops / 2e9:.2f} GMAC, "
          f"{flops / in_gemm / 1e6:.0f} GFLOP/s), everything else {total - in_gemm:.1f} ms")
    print(f"  the same kernel calls replayed alone: in the model's order {cold * 1e3:.1f} ms "
          f"({replayed / cold / 1e9:.0f} GFLOP/s), each right after itself (operands warm) "
          f"{warm * 1e3:.1f} ms ({replayed / warm / 1e9:.0f} GFLOP/s)")
    print(f"  {'step kind':<26} {'count':>5} {'ms':>8} {'kern ms':>8} {'rest ms':>8} "
          f"{'GFLOP/s':>8}")
    by_kind: dict[str, list[float]] = {}
    for i, (spent, gemm_spent, gemm_flops) in per_step.items():
        entry = by_kind.setdefault(kinds[i], [0, 0.0, 0.0, 0])
        entry[0] += 1
        entry[1] += spent * 1e3
        entry[2] += gemm_spent * 1e3
        entry[3] += gemm_flops
    for kind, (count, spent, gemm_spent, gemm_flops) in sorted(by_kind.items(),
                                                               key=lambda kv: -kv[1][1]):
        rate = f"{gemm_flops / gemm_spent / 1e6:8.0f}" if gemm_spent else f"{'':>8}"
        print(f"  {kind:<26} {count:>5} {spent:8.2f} {gemm_spent:8.2f} "
              f"{spent - gemm_spent:8.2f} {rate}")


def _kind(step, inputs: list) -> str:  # type: ignore[no-untyped-def]
    op = step.label.split(" ")[0].split("::")[1]
    if op not in ("Conv", "FusedConv"):
        return op
    w = inputs[1]
    k = "x".join(str(d) for d in w.shape[2:])
    stride = max(step.kwargs.get("strides") or [1])
    group = step.kwargs.get("group", 1)
    return (f"{op} {k}" + (f" s{stride}" if stride > 1 else "")
            + (" depthwise" if group > 1 and w.shape[1] == 1 else f" g{group}" if group > 1
               else ""))


# -- report ---------------------------------------------------------------------------------------


def report(rows: Sequence[Row], timing: bool, smoke: bool = False) -> bool:
    """Print the table and a verdict per target; False if one is missed (the latency targets
    never fail a smoke run)."""
    ok = True
    print(f"\n{'model':<14} {'worst rel. error':>16}  {'emu 1t':>8} {'ORT 1t':>8} {'ratio':>6}"
          f"  {'emu 2t':>8} {'ORT 2t':>8} {'ratio':>6}")
    for r in rows:
        line = f"{r.name:<14} {max(r.errors.values()):16.2e}"
        if timing:
            for n in (1, 2):
                e, o = r.median_ms(f"emu-{n}"), r.median_ms(f"ort-{n}")
                line += (f"  {e:8.1f} {o:8.1f} {e / o:6.2f}" if o
                         else f"  {'-':>8} {'-':>8} {'-':>6}")
        print(line)
    print("\n(latencies in ms, medians; emu Nt = numpy's BLAS on N threads, ORT Nt = "
          "intra_op_num_threads N)")
    for r in rows:
        for out, err in r.errors.items():
            passed = err <= ACCURACY
            ok &= passed
            print(f"  {'PASS' if passed else 'FAIL'}  {r.name} output {out}: max abs diff / "
                  f"max abs ref = {err:.2e} (<= {ACCURACY:g})")
    for r in rows if timing else ():
        if r.name in RATIOS and r.median_ms("ort-1"):
            ok &= _ratio_verdict(r, RATIOS[r.name], smoke)
    return ok


def _ratio_verdict(r: Row, target: float, smoke: bool) -> bool:
    ratio = r.median_ms("emu-1") / r.median_ms("ort-1")
    passed = ratio <= target
    verdict = "PASS" if passed else "MISS (smoke: not failing)" if smoke else "FAIL"
    two = (f"; with 2 BLAS threads {r.median_ms('emu-2') / r.median_ms('ort-1'):.2f}"
           if r.median_ms("emu-2") else "")
    print(f"  {verdict}  {r.name} batch 1: emulator {r.median_ms('emu-1'):.1f} ms / ORT 1 thread "
          f"{r.median_ms('ort-1'):.1f} ms = {ratio:.2f} (<= {target:g}, BLAS on 1 thread{two})")
    if r.median_ms("ort-1-cpu"):
        print(f"        (the calling thread's CPU time, which a loaded machine's waits do not "
              f"inflate: {r.median_ms('emu-1-cpu'):.1f} ms / {r.median_ms('ort-1-cpu'):.1f} ms "
              f"= {r.median_ms('emu-1-cpu') / r.median_ms('ort-1-cpu'):.2f})")
    return passed or smoke


def environment(blas: Blas) -> None:
    import onnx
    import onnxruntime

    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, onnx {onnx.__version__}, "
          f"onnxruntime {onnxruntime.__version__}, {os.cpu_count()} CPUs")
    print(f"numpy BLAS: {blas.config()}; default threads {blas.threads()}")
    print(f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default=",".join(light.NAMES),
                   help="comma-separated light model names (default: all nine)")
    p.add_argument("--repeats", type=int, default=10, help="timed rounds (default 10)")
    p.add_argument("--warmup", type=int, default=2, help="untimed rounds first (default 2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--no-timing", action="store_true", help="accuracy only")
    p.add_argument("--profile", metavar="MODEL", help="profile this model's emulator run")
    p.add_argument("--kernels-of", metavar="DIR",
                   help="also time each model on another checkout's compiled kernels (DIR: its "
                        "root) against this one's, in this process, turns rotated")
    p.add_argument("--smoke", action="store_true",
                   help=f"CI smoke run: {SMOKE_MODEL} only, 1 warmup and 2 timed rounds on 1 "
                        "thread; latency targets reported, not failing")
    args = p.parse_args(argv)
    args.threads = (1, 2)
    if args.smoke:
        args.models, args.repeats, args.warmup, args.threads = SMOKE_MODEL, 2, 1, (1,)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        from udo_build.model.onnx_import import import_onnx
    except ImportError as exc:
        print(f"udo_build.model.onnx_import is not available ({exc}); this bench needs the "
              "ONNX importer", file=sys.stderr)
        return 2
    names = args.models.split(",")
    unknown = [n for n in names + ([args.profile] if args.profile else []) if n not in light.NAMES]
    if unknown:
        print(f"unknown model {unknown[0]!r}; the light models are: {', '.join(light.NAMES)}",
              file=sys.stderr)
        return 2
    blas = Blas()
    environment(blas)
    rows = []
    for name in names:
        start = time.perf_counter()
        rows.append(bench_model(name, args, blas, import_onnx))
        print(f"  {name}: done in {time.perf_counter() - start:.1f} s", flush=True)
    ok = report(rows, not args.no_timing, args.smoke)
    print(f"load average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    if args.profile:
        profile(args.profile, args, blas, import_onnx)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
