"""Benchmark: what CLE, AdaRound and bias correction add to the enhanced quantizer, against
onnxruntime's calibrators on the same inputs, and what each costs.

    python bench/quant_algorithms.py [--models resnet50,shufflenet] [--calibration 32]
        [--held-out 16] [--methods MinMax,Percentile] [--iterations 50] [--samples 256]
        [--seed 0] [--per-tensor] [--smoke]

Models, inputs and metrics as bench/quant.py (whose helpers this imports): the onnx wheel's light
models with random weights by role and calibrated batch norms, N(0, 1) calibration (seed+1) and
held-out (seed+2) inputs, output SQNR of the logits against the float model over the held-out
inputs, top-1 agreement. udo-build: 8-bit activations, 8-bit per-channel weights, 32-bit biases,
the enhanced quantizer, then each algorithm (udo_build.quant.equalize, adaround,
bias_correction) as the recipe's `quantize.algorithms` runs them (cle before quantize, adaround
then bias correction after), alone and together; the integer path runs the held-out inputs.
onnxruntime: `quantize_static` (QDQ, QUInt8 activations, QInt8 per-channel weights) with each
--methods calibration, its accuracy that of the QDQ model as written (bench/quant.py
`ort_static`: onnxruntime's fused int8 kernels saturate on x86 CPUs without VNNI, which would
flatter udo-build by up to 9 dB). --per-tensor: one weight scale per tensor on both sides (the
case CLE is for: equalizing channel ranges buys nothing when each channel has its own scale).

Seconds: the quantize step (fold, calibrate, encodings) and each algorithm's own time, apart;
calibration is the quantize step with the tf quantizer (min/max per tensor: what onnxruntime's
MinMax gathers), and the enhanced quantizer's histograms and range search are an algorithm on
top of it (their seconds: enhanced's quantize minus tf's).
Targets (issue 29): the best configuration's SQNR >= onnxruntime's best + 1.5 dB on ResNet-50
and + 3 dB on ShuffleNet; calibration <= onnxruntime MinMax's time on the same inputs (each
algorithm's cost is stated beside it). Exit 1 when one is missed. --smoke: ShuffleNet, one
input each, everything at once (cle, adaround, bias correction), 5 AdaRound iterations,
MinMax only; prints the table and judges no target.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import _light_models as light  # noqa: E402
from quant import SETTINGS, Accuracy, inputs, ort_static, sqnr_db, top1, with_logits  # noqa: E402

MARGINS = {"resnet50": 1.5, "shufflenet": 3.0}  # dB over onnxruntime's best
MIXED_SHARE, MIXED_RECORD = 0.25, 1.3  # --mixed: layers at 16 bits, record / 8-bit record


@dataclass
class Row:
    model: str
    results: list[Accuracy] = field(default_factory=list)
    costs: dict[str, float] = field(default_factory=dict)  # step -> seconds

    def best(self, prefix: str) -> Accuracy | None:
        found = [r for r in self.results if r.label.startswith(prefix)]
        return max(found, key=lambda r: r.sqnr) if found else None


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    start = time.perf_counter()
    value = fn()
    return value, time.perf_counter() - start


def bench_model(name: str, args: argparse.Namespace, folder: Path) -> Row:
    from udo_build.model.onnx_import import import_onnx
    from udo_build.quant.adaround import AdaroundSettings, adaround
    from udo_build.quant.bias_correction import correct_biases
    from udo_build.quant.equalize import equalize_model
    from udo_build.quant.pipeline import quantize_model
    from udo_build.runtime.float_session import Session
    from udo_build.runtime.integer import QuantizedSession

    proto, logits = with_logits(light.randomized(name, args.seed, import_onnx))
    model = import_onnx(proto)
    calibration = inputs(model, args.calibration, args.seed + 1)
    held_out = inputs(model, args.held_out, args.seed + 2)
    session = Session(model)
    reference = [session.run(feed, [logits])[logits] for feed in held_out]
    row = Row(name)
    settings = {**SETTINGS, "quantizer": "enhanced", "per_channel": not args.per_tensor}
    ada = AdaroundSettings(iterations=args.iterations, samples=args.samples, seed=args.seed)
    count = len(calibration)

    def measure(label: str, qmodel: Any, seconds: float) -> None:
        run = QuantizedSession(qmodel)
        outputs = [run.run(feed, [logits])[logits] for feed in held_out]
        row.results.append(Accuracy(label, sqnr_db(reference, outputs), top1(reference, outputs),
                                    seconds))
        print(f"  {name} {label}: {row.results[-1].sqnr:.2f} dB ({seconds:.1f} s)", flush=True)

    plain, row.costs["quantize"] = timed(lambda: quantize_model(model, {}, calibration,
                                                                settings))
    measure("enhanced", plain, row.costs["quantize"])
    minmax, row.costs["calibrate"] = timed(lambda: quantize_model(
        model, {}, calibration, {**settings, "quantizer": "tf"}))
    measure("tf", minmax, row.costs["calibrate"])
    row.costs["enhanced's histograms"] = max(0.0, row.costs["quantize"] - row.costs["calibrate"])
    chosen = set(args.configs.split(","))
    if "adaround" in chosen:
        (rounded, _), row.costs["adaround"] = timed(lambda: adaround(
            plain, {}, calibration, count, ada))
        measure("+adaround", rounded, row.costs["quantize"] + row.costs["adaround"])
        if "bias_correction" in chosen:  # compared with the float weights AdaRound rounded
            (after, _), seconds = timed(lambda: correct_biases(
                rounded, {}, calibration, count, plain.model.weights))
            measure("+adaround+bias_correction", after,
                    row.costs["quantize"] + row.costs["adaround"] + seconds)
    if "bias_correction" in chosen:
        (corrected, _), row.costs["bias_correction"] = timed(lambda: correct_biases(
            plain, {}, calibration, count))
        measure("+bias_correction", corrected,
                row.costs["quantize"] + row.costs["bias_correction"])
    if not chosen & {"cle", "all"}:
        return _ort(row, proto, calibration, held_out, logits, reference, args, folder)
    equalized, row.costs["cle"] = timed(lambda: equalize_model(model))
    on_cle, row.costs["quantize after cle"] = timed(lambda: quantize_model(
        equalized.model, {}, calibration, settings))
    spent = row.costs["cle"] + row.costs["quantize after cle"]
    measure("+cle", on_cle, spent)
    if "all" in chosen:
        (both, _), seconds = timed(lambda: adaround(on_cle, {}, calibration, count, ada))
        measure("+cle+adaround", both, spent + seconds)
        (every, _), more = timed(lambda: correct_biases(both, {}, calibration, count,
                                                        on_cle.model.weights))
        measure("+cle+adaround+bias_correction", every, spent + seconds + more)
        row.costs.setdefault("adaround", seconds)
        row.costs.setdefault("bias_correction", more)
    return _ort(row, proto, calibration, held_out, logits, reference, args, folder)


def _ort(row: Row, proto: Any, calibration: list, held_out: list, logits: str,
         reference: list, args: argparse.Namespace, folder: Path) -> Row:
    for method in [m for m in args.methods.split(",") if m]:
        result, _ = ort_static(proto, calibration, held_out, logits, reference, method,
                               folder / row.model, per_channel=not args.per_tensor)
        row.results.append(result)
        print(f"  {row.model} {result.label}: {result.sqnr:.2f} dB ({result.seconds:.1f} s)",
              flush=True)
    return row


def report(rows: Sequence[Row], args: argparse.Namespace) -> bool:
    print(f"\n{'model':<11} {'quantization':<32} {'SQNR dB':>8} {'top-1':>7} {'seconds':>8}")
    for row in rows:
        for r in row.results:
            print(f"{row.model:<11} {r.label:<32} {r.sqnr:8.2f} {r.top1:7.1%} {r.seconds:8.1f}")
    for row in rows:
        print(f"{row.model}: " + ", ".join(f"{k} {v:.1f} s" for k, v in row.costs.items()))
    print("(each algorithm's own seconds; quantize = fold, calibrate, encodings with the enhanced "
          "quantizer; calibrate = the same with tf, min/max)")
    if args.smoke:
        print("smoke: targets not judged at this size")
        return True
    return _targets(rows)


def _targets(rows: Sequence[Row]) -> bool:
    ok = True
    for row in rows:
        mine = [r for r in row.results if not r.label.startswith("ORT")]
        ours = max(mine, key=lambda r: r.sqnr) if mine else None
        theirs = row.best("ORT")
        if ours is None or theirs is None:
            continue
        margin = MARGINS.get(row.model, 0.0)
        passed = ours.sqnr >= theirs.sqnr + margin
        ok &= passed
        print(f"  {'PASS' if passed else 'FAIL'}  {row.model}: best udo-build ({ours.label}) "
              f"{ours.sqnr:.2f} dB >= onnxruntime {theirs.label[4:]} {theirs.sqnr:.2f} dB "
              f"+ {margin:g}")
        minmax = next((r for r in row.results if r.label == "ORT MinMax"), None)
        if minmax is not None:
            fast = row.costs["calibrate"] <= minmax.seconds
            ok &= fast
            extra = ", ".join(f"{k} {v:.1f} s" for k, v in row.costs.items()
                              if k not in ("quantize", "calibrate"))
            print(f"  {'PASS' if fast else 'FAIL'}  {row.model}: calibration (tf: fold, min/max, "
                  f"encodings) {row.costs['calibrate']:.1f} s <= onnxruntime MinMax "
                  f"{minmax.seconds:.1f} s (algorithms on top: {extra})")
    return ok


# -- mixed precision (quantize.target) ----------------------------------------------------------


@dataclass
class Mixed:
    model: str
    target: float
    reference_db: float = 0.0  # the quantize settings' widths everywhere, held-out inputs
    reached_db: float = 0.0  # the chosen widths, held-out inputs (nan: out of reach)
    searched_db: float = 0.0  # the chosen widths, the search's own inputs
    layers: int = 0  # layers (nodes, and the graph input) with a unit
    layers_16: int = 0  # of them, those with a unit at 16 bits
    record: int = 0  # constants' bytes, chosen widths
    record_reference: int = 0  # at the quantize settings' widths
    costs: dict[str, float] = field(default_factory=dict)


def bench_mixed(name: str, args: argparse.Namespace) -> list[Mixed]:
    """The recipe's steps in one process: reference and alternate models, the sensitivities,
    then for each --target the search (over --search-inputs inputs, seed+3) and the quantize
    with the chosen widths; its logits' SQNR over the held-out inputs (seed+2), as the other
    rows. The sensitivities serve every target, as the build's cached actions do."""
    from udo_build.model.onnx_import import import_onnx
    from udo_build.quant.mixed_precision import Candidates, OutputNoise, elements
    from udo_build.quant.mixed_search import record_bytes
    from udo_build.quant.pipeline import quantize_model

    proto, logits = with_logits(light.randomized(name, args.seed, import_onnx))
    kept = [o for o in proto.graph.output if o.name == logits]  # the search measures logits
    del proto.graph.output[:]
    proto.graph.output.extend(kept)
    model = import_onnx(proto)
    calibration = inputs(model, args.calibration, args.seed + 1)
    held_out = inputs(model, args.held_out, args.seed + 2)
    low, high = (int(w) for w in args.weight_widths.split(","))
    settings = {**SETTINGS, "quantizer": "enhanced"}
    costs: dict[str, float] = {}
    reference, costs["quantize x2"] = timed(lambda: quantize_model(model, {}, calibration,
                                                                   settings))
    alternate, more = timed(lambda: quantize_model(model, {}, calibration, {
        **settings, "act_bitwidth": 16, "weights_bitwidth": low if high == 8 else high}))
    costs["quantize x2"] += more
    candidates = Candidates.of(reference, alternate)
    measure = OutputNoise(candidates, {}, inputs(model, args.search_inputs, args.seed + 3))
    alone = [candidates.low_alone(u) for u in candidates.units]
    figures, costs["sensitivity"] = timed(lambda: measure.sqnr_db(alone, args.cores))
    sensitivity = dict(zip(candidates.units, figures, strict=True))
    sizes = elements(candidates, {}, held_out[0])
    reference_db = _logits_db(reference, held_out, logits)
    print(f"  {name}: {len(candidates.units)} units, 8-bit {reference_db:.2f} dB on the "
          f"held-out inputs", flush=True)

    def one(target: float) -> Mixed:
        row = Mixed(name, target, reference_db, costs=dict(costs))
        chosen = _searched(row, candidates, sensitivity, sizes, measure, args)
        if chosen is None:
            return row
        final, row.costs["quantize at the widths"] = timed(lambda: quantize_model(
            model, {}, calibration, settings, widths=candidates.widths(chosen)))
        row.reached_db = _logits_db(final, held_out, logits)
        row.layers = len({u.node or u.name for u in candidates.units})
        row.layers_16 = len({u.node or u.name for u, b in chosen.items() if b == 16})
        row.record, row.record_reference = record_bytes(final), record_bytes(reference)
        return row

    return [one(float(t)) for t in args.target.split(",")]


def _searched(row: Mixed, candidates: Any, sensitivity: dict, sizes: dict, measure: Any,
              args: argparse.Namespace) -> dict | None:
    """The search's choice for row.target (None, the best printed, when out of reach)."""
    from udo_build.quant.mixed_search import Unreachable, search

    def measured(bits: dict) -> float:
        return measure.sqnr_db([candidates.widths(bits)], args.cores)[0]

    start = time.perf_counter()
    try:
        result = search(candidates.units, sensitivity, measured({}), sizes, row.target,
                        measured)
    except Unreachable as exc:
        print(f"  {row.model}: {exc} dB on the search inputs", flush=True)
        row.reached_db = row.searched_db = float("nan")
        return None
    row.costs["search"] = time.perf_counter() - start
    for t in result.tried:
        changed = sum(b != u.reference for u, b in t.bits.items())
        print(f"  {row.model} {row.target:g} dB search: {changed} units changed, predicted "
              f"{t.predicted_db:.2f} dB, measured {t.sqnr_db:.2f} dB", flush=True)
    row.searched_db = result.chosen.sqnr_db
    return result.chosen.bits


def _logits_db(qmodel: Any, held_out: list, logits: str) -> float:
    from udo_build.runtime.float_session import Session
    from udo_build.runtime.integer import QuantizedSession

    exact, approx = Session(qmodel.model), QuantizedSession(qmodel)
    return sqnr_db([exact.run(f, [logits])[logits] for f in held_out],
                   [approx.run(f, [logits])[logits] for f in held_out])


def report_mixed(rows: Sequence[Mixed], args: argparse.Namespace) -> bool:
    print(f"\n{'model':<11} {'target':>7} {'8-bit dB':>9} {'chosen dB':>10} {'search dB':>10} "
          f"{'layers at 16':>13} {'record / 8-bit':>15}")
    ok = True
    for r in rows:
        share = r.layers_16 / r.layers if r.layers else float("nan")
        ratio = r.record / r.record_reference if r.record_reference else float("nan")
        print(f"{r.model:<11} {r.target:7.1f} {r.reference_db:9.2f} {r.reached_db:10.2f} "
              f"{r.searched_db:10.2f} {f'{r.layers_16}/{r.layers} ({share:.0%})':>13} "
              f"{ratio:15.3f}")
        print("  " + ", ".join(f"{k} {v:.1f} s" for k, v in r.costs.items()))
        if args.smoke:
            continue
        checks = [(r.reached_db >= r.target, f"{r.reached_db:.2f} dB >= {r.target} dB on the "
                   f"{args.held_out} held-out inputs"),
                  (share <= MIXED_SHARE, f"{share:.0%} of layers at 16 bits <= "
                   f"{MIXED_SHARE:.0%}"),
                  (ratio <= MIXED_RECORD, f"record {ratio:.3f}x <= {MIXED_RECORD}x the 8-bit")]
        for passed, text in checks:
            ok &= passed
            print(f"  {'PASS' if passed else 'FAIL'}  {r.model}: {text}")
    if args.smoke:
        print("smoke: targets not judged at this size")
    return ok


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="resnet50,shufflenet")
    p.add_argument("--calibration", type=int, default=32, help="calibration inputs (32)")
    p.add_argument("--held-out", type=int, default=16, help="held-out inputs (16)")
    p.add_argument("--methods", default="MinMax,Percentile",
                   help="onnxruntime calibration methods")
    p.add_argument("--iterations", type=int, default=50, help="AdaRound steps per layer (50)")
    p.add_argument("--samples", type=int, default=256, help="AdaRound patches per layer (256)")
    p.add_argument("--configs", default="cle,adaround,bias_correction,all",
                   help="what to run besides the enhanced quantizer: cle, adaround, "
                        "bias_correction alone, all (cle, adaround and bias correction)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--per-tensor", action="store_true",
                   help="one weight scale per tensor, for udo-build and onnxruntime alike (the "
                        "case CLE is for); default: per output channel")
    p.add_argument("--mixed", action="store_true",
                   help="mixed precision (quantize.target) instead of the algorithms")
    p.add_argument("--target", default="35",
                   help="--mixed: output SQNR dB, or several (35; 35,32: one search each)")
    p.add_argument("--weight-widths", default="4,8",
                   help="--mixed: the two widths a weight takes (4,8; or 8,16)")
    p.add_argument("--search-inputs", type=int, default=4,
                   help="--mixed: inputs the sensitivities and the search run over (4)")
    p.add_argument("--cores", type=int, default=2, help="--mixed: worker processes (2)")
    p.add_argument("--smoke", action="store_true", help="a small run for CI (~30 s)")
    args = p.parse_args(argv)
    if args.smoke and args.mixed:
        args.models, args.calibration, args.held_out, args.search_inputs = "squeezenet", 2, 2, 1
    elif args.smoke:
        args.models, args.calibration, args.held_out = "shufflenet", 1, 1
        args.methods, args.iterations, args.samples = "MinMax", 5, 64
        args.configs = "all"
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    unknown = [n for n in args.models.split(",") if n not in light.NAMES]
    if unknown:
        print(f"unknown model {unknown[0]!r}; the light models are: {', '.join(light.NAMES)}",
              file=sys.stderr)
        return 2
    if args.mixed:
        rows = [r for n in args.models.split(",") for r in bench_mixed(n, args)]
        return 0 if report_mixed(rows, args) else 1
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            (Path(tmp) / name).mkdir()
            rows.append(bench_model(name, args, Path(tmp)))
    return 0 if report(rows, args) else 1


if __name__ == "__main__":
    sys.exit(main())
