"""Benchmark: the time calibration takes, udo-build against onnxruntime, same model and inputs.

    python bench/calibration.py [--model resnet50] [--calibration 16] [--repeats 2] [--seed 0]
                                [--blas-threads N] [--profile]

The model is a light model of the onnx wheel with random weights (bench/_light_models.py, seed
--seed, as bench/quant.py builds it), the inputs --calibration N(0, 1) images (seed + 1). Each
round times, one after the other so that the machine's load hits them alike:

- udo-build: `quantize_model` (fold, calibrate, choose every encoding; 8-bit activations, 8-bit
  per-channel weights, 32-bit biases) with the `tf` quantizer (min/max only) and with
  `enhanced` (a histogram of every encoded activation, then the range search);
- onnxruntime: `quant_pre_process` then `quantize_static` (QDQ, QUInt8 activations, QInt8
  per-channel weights) with each calibration method: MinMax, Entropy and Percentile (the last
  two collect 2048-bin histograms of every activation).

Each figure is the best of --repeats rounds (the machine is shared), after one untimed
quantization of one input by each udo-build quantizer (it loads the kernels). numpy's BLAS
keeps its default thread count unless --blas-threads says otherwise; onnxruntime's sessions
(created inside `quantize_static`) keep theirs. On a loaded machine, OpenBLAS's spinning
threads slow the float runtime's convolutions several times over (see bench/RESULTS.md).
Targets:

- tf <= MinMax: udo-build's min/max calibration is no slower than onnxruntime's;
- enhanced <= MinMax + histogram allowance, the allowance being what onnxruntime itself spends
  on histograms over the same tensors and inputs: its Entropy calibration minus its MinMax one.

Prints the table and PASS/FAIL per target; exits 1 if one is missed. --profile prints where the
enhanced quantizer's time goes (cProfile, by own time) after the rounds.
"""

from __future__ import annotations

import argparse
import cProfile
import os
import pstats
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _light_models as light  # noqa: E402
from emulator import Blas, environment  # noqa: E402
from quant import SETTINGS, inputs  # noqa: E402

OURS = ("tf", "enhanced")
THEIRS = ("MinMax", "Entropy", "Percentile")


def ours(model: Any, feeds: list[dict[str, np.ndarray]], quantizer: str) -> Callable[[], Any]:
    from udo_build.quant.pipeline import quantize_model

    return lambda: quantize_model(model, {}, feeds, {**SETTINGS, "quantizer": quantizer})


def theirs(proto: Any, feeds: list[dict[str, np.ndarray]], method: str,
           folder: Path) -> Callable[[], Any]:
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

    float_path, pre_path = folder / "float.onnx", folder / "pre.onnx"
    onnx.save(version_converter.convert_version(proto, 17), os.fspath(float_path))

    class Reader(CalibrationDataReader):
        def __init__(self) -> None:
            self.feeds = iter(feeds)

        def get_next(self) -> dict[str, np.ndarray] | None:
            return next(self.feeds, None)

    def run() -> None:
        quant_pre_process(os.fspath(float_path), os.fspath(pre_path))
        quantize_static(os.fspath(pre_path), os.fspath(folder / f"qdq_{method}.onnx"), Reader(),
                        quant_format=QuantFormat.QDQ, activation_type=QuantType.QUInt8,
                        weight_type=QuantType.QInt8, per_channel=True,
                        calibrate_method=getattr(CalibrationMethod, method))
    return run


def rounds(runs: dict[str, Callable[[], Any]], repeats: int) -> dict[str, float]:
    """The best of `repeats` wall times of each run, the runs taking turns."""
    best = dict.fromkeys(runs, float("inf"))
    for r in range(repeats):
        for label, run in runs.items():
            start = time.perf_counter()
            run()
            seconds = time.perf_counter() - start
            best[label] = min(best[label], seconds)
            print(f"  round {r + 1}: {label} {seconds:.2f} s", flush=True)
    return best


def report(best: dict[str, float], args: argparse.Namespace) -> bool:
    print(f"\n{args.model}, {args.calibration} calibration inputs, best of {args.repeats}:")
    for label, seconds in best.items():
        print(f"  {label:<22} {seconds:7.2f} s")
    minmax = best["ORT MinMax"]
    allowance = best["ORT Entropy"] - minmax
    tf, enhanced = best["udo-build tf"], best["udo-build enhanced"]
    checks = [(tf <= minmax, f"tf {tf:.2f} s <= onnxruntime MinMax {minmax:.2f} s"),
              (enhanced <= minmax + allowance,
               f"enhanced {enhanced:.2f} s <= MinMax {minmax:.2f} s + histogram allowance "
               f"{allowance:.2f} s (onnxruntime Entropy - MinMax)")]
    for passed, text in checks:
        print(f"  {'PASS' if passed else 'FAIL'}  {text}")
    print(f"  (enhanced against MinMax alone: {enhanced / minmax:.2f}x)")
    return all(passed for passed, _ in checks)


def profile(run: Callable[[], Any]) -> None:
    profiler = cProfile.Profile()
    profiler.runcall(run)
    pstats.Stats(profiler).sort_stats("tottime").print_stats(15)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--model", default="resnet50", choices=light.NAMES)
    p.add_argument("--calibration", type=int, default=16, help="calibration inputs (16)")
    p.add_argument("--repeats", type=int, default=2, help="rounds; the best counts (2)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--blas-threads", type=int, help="numpy's BLAS threads (default: its own)")
    p.add_argument("--profile", action="store_true", help="profile the enhanced quantizer")
    return p.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)  # first: --help needs no udo_build
    from udo_build.model.onnx_import import import_onnx

    blas = Blas()
    if args.blas_threads:
        blas.set_threads(args.blas_threads)
    environment(blas)
    proto = light.randomized(args.model, args.seed, import_onnx)
    model = import_onnx(proto)
    feeds = inputs(model, args.calibration, args.seed + 1)
    for quantizer in OURS:
        ours(model, feeds[:1], quantizer)()
    with tempfile.TemporaryDirectory() as tmp:
        runs = {f"udo-build {q}": ours(model, feeds, q) for q in OURS}
        runs.update({f"ORT {m}": theirs(proto, feeds, m, Path(tmp)) for m in THEIRS})
        best = rounds(runs, args.repeats)
    ok = report(best, args)
    if args.profile:
        profile(ours(model, feeds, "enhanced"))
    print(f"load average at end: {' '.join(f'{v:.2f}' for v in os.getloadavg())}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
