"""Benchmark: the HTP graph compiler's prepare time (compile and record bytes), in one process.

    python bench/prepare.py [--sizes 1000,3000,10000] [--repeats 3] [--levels 1,2,3]
                            [--models all|resnet50,...] [--no-light]

1. Synthetic graphs of about 1k, 3k and 10k nodes: chains (Conv 1x1 -> Relu, repeated) and
   DenseNet-like graphs (blocks of 8 layers BatchNormalization -> Relu -> Conv 3x3 -> Concat
   with everything before it in the block, then a 1x1 transition Conv). Small tensors, so the
   time is the compiler's, not numpy's. CPU time of the process (other load on the machine
   does not count), best of --repeats, after a warm-up. Target: at every
   level, t(10k) / t(1k) <= 12 (linear growth); and two prepares of one graph give the same
   bytes.
2. The nine light CNNs of the onnx wheel (random weights by role, bench/_light_models.py), at
   levels 1-3, fp16 for the SoC sm8550 (v73, 8 MB): prepare time, ops before and after,
   transposes left, record bytes, peak VTCM, ops still over the VTCM; the compiler's rewrites
   checked on a float32 preparation (the internal precision fp32): its outputs against the
   unprepared model's on the float runtime (max |diff| / max |reference|; target 1e-5); and
   the fp16 record itself, read back and run with float16 rounding after every op, against the
   same reference (target FP16_ACCURACY: float16 carries 11 significant bits). For scale, the
   float runtime's and the fp32 preparation's errors against a float64 run of the same model
   are printed beside them.
3. --int8 models, quantized (tf, per channel, 2 calibration inputs): each level's record, read
   back (its weights and biases the integers it stores), run by the integer path, bit for bit
   against the integer path on the unprepared quantized model.

Prints tables and PASS/FAIL per target; exits 1 if one is missed.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _light_models as light  # noqa: E402

RATIO = 12.0
ACCURACY = 1e-5
FP16_ACCURACY = 1e-2


def chain(n: int, c: int = 8, hw: int = 8):  # type: ignore[no-untyped-def]
    from udo_build.ir import Graph, Model, Node, TensorInfo

    rng = np.random.default_rng(0)
    nodes, weights, values, x, k = [], {}, [], "input", 0
    while len(nodes) < n:
        weights[f"w{k}"] = (rng.standard_normal((c, c, 1, 1)) * 0.3).astype(np.float32)
        weights[f"b{k}"] = (rng.standard_normal(c) * 0.1).astype(np.float32)
        nodes += [Node.make(f"conv{k}", "Conv", [x, f"w{k}", f"b{k}"], [f"c{k}"],
                            {"kernel_shape": [1, 1]}),
                  Node.make(f"relu{k}", "Relu", [f"c{k}"], [f"r{k}"])]
        values += [TensorInfo(f"c{k}", "float32", (1, c, hw, hw)),
                   TensorInfo(f"r{k}", "float32", (1, c, hw, hw))]
        x, k = f"r{k}", k + 1
    inputs = (TensorInfo("input", "float32", (1, c, hw, hw)),)
    return Model(Graph("chain", inputs, (values[-1],), tuple(nodes), tuple(values[:-1])),
                 weights)


def _dense_layer(k: int, x: str, c: int, growth: int, hw: int, rng, weights):  # type: ignore
    from udo_build.ir import Node, TensorInfo

    weights.update({f"s{k}": np.ones(c, np.float32), f"bb{k}": np.zeros(c, np.float32),
                    f"m{k}": np.zeros(c, np.float32), f"v{k}": np.ones(c, np.float32),
                    f"w{k}": (rng.standard_normal((growth, c, 3, 3)) * 0.2).astype(np.float32)})
    nodes = [Node.make(f"bn{k}", "BatchNormalization", [x, f"s{k}", f"bb{k}", f"m{k}", f"v{k}"],
                       [f"n{k}"]),
             Node.make(f"relu{k}", "Relu", [f"n{k}"], [f"r{k}"]),
             Node.make(f"conv{k}", "Conv", [f"r{k}", f"w{k}"], [f"c{k}"],
                       {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]}),
             Node.make(f"cat{k}", "Concat", [x, f"c{k}"], [f"cat{k}"], {"axis": 1})]
    values = [TensorInfo(f"n{k}", "float32", (1, c, hw, hw)),
              TensorInfo(f"r{k}", "float32", (1, c, hw, hw)),
              TensorInfo(f"c{k}", "float32", (1, growth, hw, hw)),
              TensorInfo(f"cat{k}", "float32", (1, c + growth, hw, hw))]
    return nodes, values


def dense(n: int, growth: int = 4, hw: int = 4, block: int = 8):  # type: ignore
    from udo_build.ir import Graph, Model, Node, TensorInfo

    rng = np.random.default_rng(0)
    nodes, weights, values, x, c, k = [], {}, [], "input", 8, 0
    while len(nodes) < n:
        for _ in range(block):
            more, infos = _dense_layer(k, x, c, growth, hw, rng, weights)
            nodes += more
            values += infos
            x, c, k = f"cat{k}", c + growth, k + 1
        weights[f"t{k}"] = (rng.standard_normal((8, c, 1, 1)) * 0.2).astype(np.float32)
        nodes.append(Node.make(f"trans{k}", "Conv", [x, f"t{k}"], [f"t{k}o"],
                               {"kernel_shape": [1, 1]}))
        values.append(TensorInfo(f"t{k}o", "float32", (1, 8, hw, hw)))
        x, c = f"t{k}o", 8
    inputs = (TensorInfo("input", "float32", (1, 8, hw, hw)),)
    return Model(Graph("dense", inputs, (values[-1],), tuple(nodes), tuple(values[:-1])),
                 weights)


def prepare_once(bundle, level: int, precision: str = "fp16"  # type: ignore[no-untyped-def]
                 ) -> tuple[float, bytes, object]:
    from udo_build.compiler import CompileTarget, compile_bundle

    start = time.process_time()
    compiled = compile_bundle(bundle, CompileTarget("v73", 8, level, {}, "default", precision))
    data = compiled.record()
    return time.process_time() - start, data, compiled


def synthetic(sizes: list[int], levels: list[int], repeats: int, timing: bool = True) -> bool:
    """The growth target counts unless `timing` is off (a smoke run at tiny sizes, where the
    machine's noise is larger than the work); equal records always count."""
    from udo_build.ir.bundle import Bundle

    ok = True
    prepare_once(Bundle(chain(200), None, {}), 2)  # warm-up: imports, caches
    print("| graph | level | " + " | ".join(f"{n} nodes" for n in sizes)
          + f" | t({sizes[-1]}) / t({sizes[0]}) |")
    print("| --- " * (len(sizes) + 3) + "|")
    for make in (chain, dense):
        models = {n: make(n) for n in sizes}
        for level in levels:
            times, same = [], True
            for n in sizes:
                bundle = Bundle(models[n], None, {})
                runs = [prepare_once(bundle, level) for _ in range(repeats)]
                times.append(min(t for t, _, _ in runs))
                same &= len({hashlib.sha256(d).hexdigest() for _, d, _ in runs}) == 1
            ratio = times[-1] / times[0]
            ok &= (ratio <= RATIO or not timing) and same
            cells = " | ".join(f"{t * 1000:.0f} ms ({len(models[n].graph.nodes)})"
                               for t, n in zip(times, sizes, strict=True))
            verdict = "PASS" if ratio <= RATIO else "FAIL"
            print(f"| {make.__name__} | {level} | {cells} | {ratio:.1f}: {verdict}"
                  f"{'' if same else ', records differ: FAIL'} |")
    return ok


def _float64(model):  # type: ignore[no-untyped-def]
    graph = model.graph

    def wide(t):  # type: ignore[no-untyped-def]
        return replace(t, dtype="float64") if t.dtype == "float32" else t
    g = replace(graph, inputs=tuple(wide(t) for t in graph.inputs),
                outputs=tuple(wide(t) for t in graph.outputs),
                values=tuple(wide(t) for t in graph.values))
    weights = {k: v.astype(np.float64) if v.dtype == np.float32 else v
               for k, v in model.weights.items()}
    return type(model)(g, weights)


def _error(got: dict, want: dict) -> float:  # type: ignore[type-arg]
    return max(float(np.abs(got[k] - want[k]).max() / max(np.abs(want[k]).max(), 1e-30))
               for k in want)


def light_models(names: list[str], levels: list[int]) -> bool:
    from udo_build.compiler import Runner, read_record
    from udo_build.ir.bundle import Bundle
    from udo_build.model.onnx_import import import_onnx
    from udo_build.runtime.float_session import Session

    ok = True
    print("| model | level | prepare | ops in -> out | transposes | record | peak VTCM "
          "| over VTCM | fp32 error vs runtime | fp16 record vs runtime | runtime vs float64 "
          "| fp32 vs float64 |")
    print("| --- " * 12 + "|")
    for name in names:
        model = import_onnx(light.randomized(name, 0, import_onnx))
        x = {model.graph.inputs[0].name: np.random.default_rng(1).standard_normal(
            model.graph.inputs[0].static_shape).astype(np.float32)}
        want = Session(model).run(x)
        wide = Session(_float64(model)).run({k: v.astype(np.float64) for k, v in x.items()})
        base = _error(want, wide)
        for level in levels:
            _, _, exact = prepare_once(Bundle(model, None, {}), level, "fp32")
            got = Runner(exact.graph, exact.io, "fp32").run(x)  # type: ignore[attr-defined]
            err = _error(got, want)
            seconds, data, compiled = prepare_once(Bundle(model, None, {}), level)
            half = _error(read_record(data).runner().run(x), want)
            ok &= err <= ACCURACY and half <= FP16_ACCURACY
            counts = compiled.graph.op_counts()  # type: ignore[attr-defined]
            print(f"| {name} | {level} | {seconds * 1000:.0f} ms | {len(model.graph.nodes)} -> "
                  f"{sum(counts.values())} | {counts.get('Transpose', 0)} | "
                  f"{len(data) / 2 ** 20:.1f} MB | "
                  f"{compiled.memory.peak / 2 ** 20:.2f} MB | "  # type: ignore[attr-defined]
                  f"{len(compiled.memory.over_budget)} | "  # type: ignore[attr-defined]
                  f"{err:.1e}{'' if err <= ACCURACY else ' FAIL'} | "
                  f"{half:.1e}{'' if half <= FP16_ACCURACY else ' FAIL'} | {base:.1e} | "
                  f"{_error(got, wide):.1e} |", flush=True)
    return ok


def int8_models(names: list[str], levels: list[int]) -> bool:
    """Quantized light models (tf quantizer, per channel, 2 calibration inputs): every level's
    record, read back, bit-exact against the integer path on the unprepared quantized model."""
    from udo_build.compiler import CompileTarget, compile_bundle, read_record
    from udo_build.ir.qmodel import from_bundle, to_bundle
    from udo_build.model.onnx_import import import_onnx
    from udo_build.quant.pipeline import quantize_model
    from udo_build.runtime.integer import QuantizedSession

    ok = True
    print("| model (int8) | level | prepare | ops | integer / float-fallback / moves "
          "| outputs equal |")
    print("| --- " * 6 + "|")
    for name in names:
        model = import_onnx(light.randomized(name, 0, import_onnx))
        first = model.graph.inputs[0]
        samples = [{first.name: np.random.default_rng(s).standard_normal(
            first.static_shape).astype(np.float32)} for s in range(3)]
        qmodel = quantize_model(model, {}, samples[:2], {"per_channel": True})
        bundle = to_bundle(qmodel, None, {})
        want = QuantizedSession(from_bundle(bundle)).run_quantized(samples[2])
        for level in levels:
            start = time.process_time()
            compiled = compile_bundle(bundle, CompileTarget("v73", 8, level, {}, "default", "int8"))
            data = compiled.record()
            seconds = time.process_time() - start
            got = read_record(data).runner().run(samples[2], raw=True)  # its stored integers
            same = all(np.array_equal(got[k], want[k].reshape(got[k].shape)) for k in want)
            ok &= same
            kinds = [sum(c.kind == k for c in compiled.choices.values())
                     for k in ("integer", "float-fallback", "move")]
            print(f"| {name} | {level} | {seconds * 1000:.0f} ms | {len(compiled.graph.ops)} | "
                  f"{' / '.join(map(str, kinds))} | {'bit-exact' if same else 'FAIL'} |",
                  flush=True)
    return ok


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="1000,3000,10000")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--levels", default="1,2,3")
    parser.add_argument("--models", default="all")
    parser.add_argument("--no-light", action="store_true")
    parser.add_argument("--no-timing", action="store_true",
                        help="print the growth ratios without judging them (smoke runs)")
    parser.add_argument("--int8", default="squeezenet,shufflenet,resnet50",
                        help="light models to quantize and check bit for bit ('' for none)")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",")]
    levels = [int(s) for s in args.levels.split(",")]
    ok = synthetic(sizes, levels, args.repeats, not args.no_timing)
    if not args.no_light:
        names = list(light.NAMES) if args.models == "all" else args.models.split(",")
        print()
        ok &= light_models(names, levels)
    if args.int8:
        print()
        ok &= int8_models(args.int8.split(","), levels)
    print("\nPASS" if ok else "\nFAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
