"""Benchmark: calibration, the quant report and a run over N inputs on every core, against the
same work in one process (one worker), in the same run.

    python bench/cores.py [--model resnet50] [--inputs N] [--workers 1,2,4,8,16] [--repeats 2]
                          [--smoke]

The model is a light model of the onnx wheel with random weights (bench/_light_models.py, seed
--seed, as bench/quant.py and bench/calibration.py build it), the inputs N(0, 1) images. Three
phases, each timed at every worker count of --workers (default 1, 2, 4, ... and the machine's
cores), the counts interleaved round by round (--repeats rounds, the median of each) so that
the machine's load hits them alike:

- calibration: `calibrate` of the folded model over the inputs, with histograms (the enhanced
  quantizer's statistics: every encoded activation), udo_build.quant.calibrate;
- quant report: `layer_sqnr` of the quantized model (enhanced, 8-bit, per channel) over the
  inputs, the float model and the integer path per input (what `udo-build quant-report` and the
  quantize step's per-layer report run), udo_build.quant.report;
- run: the run step's loop (udo_build.builder.kinds.run._infer) on an int8 record for sm8550
  prepared once: each inference on the record, its results written, the float reference, the
  metrics.

Every figure includes what the phase pays once, in one process whatever the worker count (its
sessions and their plans: for the quant report, ResNet-50's integer session and plan take about
3 s on a loaded 2-core machine; starting the workers): the default of 4 inputs per core (32 at
least) keeps that under the per-input work a worker does. The results of every worker count
must equal those of one worker, bit for bit (checked here, every round).

Targets (exit 1 when one is missed):
- with 8 cores or more: speed-up t(1) / t(cores) >= 0.7 x cores for each phase;
- below 8 cores (this project's 2-core machines): t(cores) <= 1.05 x t(1) for each phase, the
  speed-up reported.

--smoke: squeezenet, 4 inputs, one round, worker counts 1 and 2 (a CI check that the script
runs; under ~30 s). Prints the machine's load average at the start and the end: on a shared
machine the figures are only as good as the load lets them be.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _light_models as light  # noqa: E402

SPEEDUP = 0.7  # x cores, at 8 cores or more
NO_SLOWER = 1.05  # t(cores) / t(1) below 8 cores
MANY_CORES = 8
SETTINGS = {"act_bitwidth": 8, "weights_bitwidth": 8, "bias_bitwidth": 32, "per_channel": True,
            "quantizer": "enhanced"}

Phase = Callable[[int], Any]  # workers -> the phase's result (compared across worker counts)


def inputs(model: Any, count: int, seed: int) -> list[dict[str, np.ndarray]]:
    x = model.graph.inputs[0]
    rng = np.random.default_rng(seed)
    return [{x.name: rng.standard_normal(x.static_shape).astype(np.float32)}
            for _ in range(count)]


def phases(name: str, count: int, seed: int, work: Path) -> dict[str, Phase]:
    """The three phases of the model `name` over `count` inputs, each a function of the
    worker count returning what it computed."""
    from udo_build.model.onnx_import import import_onnx
    from udo_build.quant.calibrate import calibrate
    from udo_build.quant.fold import fold_for_quantization
    from udo_build.quant.pipeline import _calibrated_tensors, quantize_model
    from udo_build.quant.report import layer_sqnr

    model = import_onnx(light.randomized(name, seed, import_onnx))
    feeds = inputs(model, count, seed + 1)
    prepared = fold_for_quantization(model)
    names = _calibrated_tensors(prepared)
    qmodel = quantize_model(model, {}, feeds[:4], SETTINGS, cores=2, count=min(4, count))

    def calibration(workers: int) -> Any:
        stats, _ = calibrate(prepared, {}, feeds, names, cores=workers, count=count)
        return {n: (s.min, s.max, s.count, s.lo, s.hi, s.hist.tobytes())
                for n, s in stats.items()}

    def report(workers: int) -> Any:
        return [layer.to_json() for layer in layer_sqnr(qmodel, {}, feeds, cores=workers)]

    return {"calibration": calibration, "quant report": report,
            "run": run_phase(model, qmodel, feeds, work)}


def run_phase(model: Any, qmodel: Any, feeds: list[dict[str, np.ndarray]], work: Path) -> Phase:
    """The run step's loop over the feeds (written as .raw files and an input list) on an int8
    record prepared once, the float model as the reference."""
    from udo_build.builder.kinds.run import _infer
    from udo_build.compiler.serve import record_for_run
    from udo_build.ir.bundle import Bundle
    from udo_build.ir.qmodel import to_bundle
    from udo_build.model.input_list import parse_input_list
    from udo_build.runtime.float_session import Session
    from udo_build.runtime.records import RunSettings
    from udo_build.soc.table import builtin_socs
    from udo_build.soc.target import CompileTarget

    for i, feed in enumerate(feeds):
        next(iter(feed.values())).tofile(work / f"{i}.raw")
    (work / "list.txt").write_text("".join(f"{i}.raw\n" for i in range(len(feeds))))
    listing = parse_input_list(work / "list.txt")
    soc = builtin_socs()["sm8550"]
    settings = RunSettings("bench", soc.name, CompileTarget(soc.arch, soc.vtcm_mb, 2, {},
                                                            "default", "int8"))
    record, _, _ = record_for_run(to_bundle(qmodel, None, {}), settings, {})
    runner = record.runner({})
    reference = Session(Bundle(model).model, {}).run

    def run(workers: int) -> Any:
        results = work / f"results-{workers}"
        ctx = SimpleNamespace(params=settings.to_params(), cores=workers,
                              progress=lambda *args: None)
        metrics, _ = _infer(ctx, listing, model, runner.run, reference, results)  # type: ignore[arg-type]
        files = sorted(results.rglob("*.raw"))
        return metrics, [(f.relative_to(results).as_posix(), f.read_bytes()) for f in files]

    return run


def measure(phase: Phase, counts: Sequence[int], repeats: int) -> dict[int, list[float]]:
    """Seconds per worker count, the counts interleaved round by round; every count's result
    must be the bits of one worker's."""
    times: dict[int, list[float]] = {w: [] for w in counts}
    for _ in range(repeats):
        baseline = None
        for workers in counts:
            start = time.perf_counter()
            result = phase(workers)
            times[workers].append(time.perf_counter() - start)
            if baseline is None:
                baseline = result
            elif result != baseline:
                raise SystemExit(f"FAIL: {workers} workers gave other results than 1")
    return times


def targets(name: str, times: dict[int, list[float]], cores: int) -> list[tuple[bool, str]]:
    one = statistics.median(times[1])
    top = max(times)
    speedup = one / statistics.median(times[top])
    if cores >= MANY_CORES:
        return [(speedup >= SPEEDUP * cores and top == cores,
                 f"{name}: speed-up at {top} workers {speedup:.2f}x >= {SPEEDUP} x {cores} "
                 f"cores = {SPEEDUP * cores:.1f}x")]
    ratio = statistics.median(times[top]) / one
    return [(ratio <= NO_SLOWER, f"{name}: t({top} workers) / t(1) = {ratio:.3f} <= {NO_SLOWER}"
             f" (speed-up {speedup:.2f}x; {cores} cores: the speed-up is reported only)")]


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    cores = os.cpu_count() or 1
    ladder = sorted({1, *[2 ** k for k in range(1, 8) if 2 ** k < cores], cores})
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="resnet50", choices=light.NAMES)
    p.add_argument("--inputs", type=int, default=max(32, 4 * cores),
                   help="inputs of each phase (default: 32, or 4 per core where that is more)")
    p.add_argument("--workers", default=",".join(map(str, ladder)),
                   help="worker counts to time (default: 1, 2, 4, ... and the cores)")
    p.add_argument("--repeats", type=int, default=2, help="rounds (default 2; the median)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--smoke", action="store_true",
                   help="squeezenet, 4 inputs, one round, 1 and 2 workers")
    args = p.parse_args(argv)
    if args.smoke:
        args.model, args.inputs, args.repeats, args.workers = "squeezenet", 4, 1, "1,2"
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)  # first: --help needs no udo_build
    from udo_build.runtime.pool import available_cores

    cores = available_cores()
    counts = sorted({1, *(int(w) for w in args.workers.split(",") if w)})
    print(f"python {sys.version.split()[0]}, numpy {np.__version__}, {cores} cores; "
          f"{args.model}, {args.inputs} inputs, workers {counts}, {args.repeats} round(s)")
    print(f"load average at start: {' '.join(f'{v:.2f}' for v in os.getloadavg())}", flush=True)
    checks = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, phase in phases(args.model, args.inputs, args.seed, Path(tmp)).items():
            times = measure(phase, counts, args.repeats)
            one = statistics.median(times[1])
            print(f"{name}:")
            for workers in counts:
                t = statistics.median(times[workers])
                print(f"  {workers:3d} workers  {t * 1000:9.1f} ms  speed-up {one / t:5.2f}x  "
                      f"(rounds: {', '.join(f'{s * 1000:.0f}' for s in times[workers])} ms)",
                      flush=True)
            checks += targets(name, times, cores) if not args.smoke else []
    for ok, text in checks:
        print(f"  {'PASS' if ok else 'FAIL'}  {text}")
    print(f"load average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0 if all(ok for ok, _ in checks) else 1


if __name__ == "__main__":
    sys.exit(main())
