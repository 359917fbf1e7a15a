"""Benchmark: a Llama-style decoder built through a recipe, from conversion to generation.

    python bench/llm.py [--size tiny|small|medium|large|1b]
                        [--steps convert,quantize,prepare,generate] [--dir DIR] [--jobs N]

The model is examples/llama/make_model.py's (`1b`: TinyLlama-1.1B's shape, 22 layers, hidden
2048, 32 heads / 4 KV heads, FFN 5632, vocabulary 32000: 4.4 GB of float32 weights in one
external data file; `large`, `medium` and `small` the same layout, smaller, with external data
(`large`: 1.4 GB of weights, the largest tensor 62 MB, so that holding the weights breaks the
memory bound in minutes rather than hours); `tiny`
its weights inside the model), generated at AR-128 and context 256 into a project of its own
with a recipe: the custom ops (RoPE and RMSNorm of examples/decoder and examples/encoder),
quantize w4a16 (4-bit LPBQ weights in blocks of 64, 16-bit activations, calibrated over two
random token sequences of 100 and 250 tokens, each prefilled through the float model with its
KV cache fed forward: 3 steps of AR-128), prepare for sm8550 and sm8650 one weight-shared
record each holding the graphs AR-128 and AR-1, and a generate run on sm8650 (a 12-token
prompt prefilled, 16 tokens decoded, each step's KV cache fed forward). Each step is
`udo-build build RECIPE ACTIONS` in a process of its own (what it needs from earlier steps
comes from the store):

  convert   convert                 (the external data file a keyed source, stored streamed)
  quantize  quantize                (calibration and the quantized bundle)
  prepare   prepare:*               (the outputs resolved, 2 SoCs x 2 graphs)
  generate  run:gen                 (the graphs combined per SoC, the deployable bundle, the run)

A step's peak is the largest resident set (ru_maxrss: anonymous and mapped file pages) of any
process of its build, the build's own process included. Targets (issue 28): every step's peak
<= 2 x the largest tensor + 600 MB; each record <= 1.1x the model's weights at 4 bits. Prints
each step's wall time, peak and what it built, the largest tensor, the bundle and store bytes,
each record's bytes, what each step said (the generate run: token match, logits SQNR, tokens
per second) and PASS or FAIL per target; exits 1 when a target is missed (a failed build exits
with its error).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MB = 1 << 20
SLACK = 600 * MB
STEPS = {"convert": ["convert"], "quantize": ["quantize"], "prepare": ["prepare:*"],
         "generate": ["run:gen"]}
TOKENS = 16  # decoded by the generate run
OPS = {"decoder": ("rope.xml", "kernels.py"), "encoder": ("rmsnorm.xml", "kernels.py")}
CONTEXT = 256
SEQUENCES = (100, 250)  # calibration: token sequences of these lengths (1 and 2 steps of 128)
RECIPE = """\
recipe: 1
name: llm-bench-{size}
package:
  name: TransformerPackage
  domain: aisw
  version: "1.0.0"
  ops:
    - {{config: ops/decoder/rope.xml, kernels: ops/decoder/kernels.py}}
    - {{config: ops/encoder/rmsnorm.xml, kernels: ops/encoder/kernels.py}}
  backends: [CPU, HTP]
model:
  onnx: model/llama_{size}.onnx
quantize:
  sequences: data/sequences.txt
  cache: {{past: "past_{{kind}}_{{layer}}", present: "present_{{kind}}_{{layer}}"}}
  act_bitwidth: 16
  weights_bitwidth: 4
  weights_block_size: 64
  lpbq: true
  bias_bitwidth: 32
  per_channel: true
  quantizer: tf
prepare:
  matrix:
    soc: [sm8550, sm8650]
    optimization_level: [2]
    graphs:
      - {{name: ar1, input_dimensions: {ar1}}}
      - {{name: ar128, input_dimensions: {ar128}}}
    outputs: [{{tensors: {outputs}}}]
run:
  - name: gen
    soc: sm8650
    generate:
      prompt: data/prompt.txt
      tokens: {tokens}
      prefill: 128
      cache: {{past: "past_{{kind}}_{{layer}}", present: "present_{{kind}}_{{layer}}"}}
"""


def make_project(folder: Path, size: str) -> Path:
    """The model, its data and the recipe in `folder` (a project of its own)."""
    sys.path.insert(0, str(ROOT / "examples" / "llama"))
    import make_model

    (folder / ".udo-build-root").write_text("")
    for example, files in OPS.items():
        (folder / "ops" / example).mkdir(parents=True, exist_ok=True)
        for name in files:
            shutil.copy(ROOT / "examples" / example / "ops" / name, folder / "ops" / example)
    if not (folder / "model" / f"llama_{size}.onnx").exists():  # a model there is reused
        make_model.write_model(size, folder / "model", 128, CONTEXT)
    (folder / "data").mkdir(exist_ok=True)
    make_model.write_prompt(folder / "data" / "prompt.txt", size, 12, seed=4)
    spec = make_model.SIZES[size]
    import numpy as np

    rng = np.random.default_rng(1)
    (folder / "data" / "sequences.txt").write_text("# calibration: token id sequences\n" + "".join(
        " ".join(map(str, rng.integers(0, spec.vocab, n))) + "\n" for n in SEQUENCES))
    outputs = ["logits"] + [f"present_{kind}_{i}" for i in range(spec.layers)
                            for kind in ("key", "value")]
    recipe = folder / "recipe.yaml"
    recipe.write_text(RECIPE.format(size=size, ar1=_dims(spec, 1), ar128=_dims(spec, 128),
                                    outputs=json.dumps(outputs), tokens=TOKENS))
    return recipe


def _dims(spec: object, tokens: int) -> str:
    """The input dimensions of AR-`tokens` at CONTEXT, as YAML flow."""
    kv, dh, layers = spec.kv_heads, spec.head_dim, spec.layers  # type: ignore[attr-defined]
    dims = {"input_ids": [1, tokens], "position_ids": [1, tokens],
            "attention_mask": [1, 1, tokens, CONTEXT]}
    for i in range(layers):
        for kind in ("key", "value"):
            dims[f"past_{kind}_{i}"] = [1, kv, CONTEXT - tokens, dh]
    return json.dumps(dims)


def largest_tensor(model: Path) -> int:
    """The bytes of the model's largest initializer (read without its data)."""
    import math

    import onnx
    from onnx.helper import tensor_dtype_to_np_dtype

    loaded = onnx.load(model, load_external_data=False)
    return max(math.prod(t.dims) * tensor_dtype_to_np_dtype(t.data_type).itemsize
               for t in loaded.graph.initializer)


def wrap(command: list[str]) -> int:
    """Run `command`; print its exit status, wall time and the peak resident set of its
    processes (this process is fresh: its children's ru_maxrss is theirs alone)."""
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True)
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    print(json.dumps({"rc": done.returncode, "wall_s": time.perf_counter() - start,
                      "peak": peak, "stdout": done.stdout[-200_000:],
                      "stderr": done.stderr[-3000:]}))
    return 0


def measure(folder: Path, recipe: Path, step: str, jobs: int) -> dict:
    build = [sys.executable, "-m", "udo_build", "build", str(recipe), *STEPS[step], "--store",
             str(folder / "store"), "--out", str(folder / "out"), "--json", "-j", str(jobs)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    done = subprocess.run([sys.executable, __file__, "--wrap", *build], capture_output=True,
                          text=True, env=env)
    got = json.loads(done.stdout.strip().splitlines()[-1])
    if got["rc"] != 0:
        sys.exit(f"step {step} failed (exit {got['rc']}):\n{got['stderr']}")
    summary = json.loads(got["stdout"])
    got["built"] = sorted(a["id"] for a in summary["actions"] if a["status"] == "built")
    got["said"] = {a["id"]: a["description"] for a in summary["actions"]}
    return got


def weight_bytes_at_4_bits(model: Path) -> int:
    """The bytes of the model's weights (every initializer of 2 or more dimensions: the
    projections, the FFN and the embedding) at 4 bits each."""
    import math

    import onnx

    loaded = onnx.load(model, load_external_data=False)
    return sum(math.prod(t.dims) for t in loaded.graph.initializer if len(t.dims) >= 2) // 2


def records(bundle: Path) -> dict[str, tuple[int, list[str]]]:
    """The deployable bundle's distinct records: part -> (bytes, the arch and graph of each
    record it holds), as `udo-build info --json` says."""
    done = subprocess.run([sys.executable, "-m", "udo_build", "info", "--json", str(bundle)],
                          capture_output=True, text=True, env={**os.environ,
                                                               "PYTHONPATH": str(ROOT)})
    if done.returncode != 0:
        sys.exit(f"udo-build info {bundle} failed:\n{done.stderr}")
    parts: dict[str, tuple[int, list[str]]] = {}
    for record in json.loads(done.stdout)["records"]:
        size, held = parts.get(record["part"], (record["size"], []))
        parts[record["part"]] = (size, held + [f"{record['arch']} {record.get('graph')}"])
    return parts


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=("tiny", "small", "medium", "large", "1b"), default="1b")
    parser.add_argument("--steps", default=",".join(STEPS),
                        help="the steps to measure, in order (default: all)")
    parser.add_argument("--dir", type=Path, help="work here (kept; a model there is reused) "
                        "instead of a temp folder")
    parser.add_argument("--jobs", type=int, default=1, help="udo-build build -j (default 1)")
    parser.add_argument("--wrap", nargs=argparse.REMAINDER, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.wrap:
        return wrap(args.wrap)
    steps = [s for s in args.steps.split(",") if s]
    unknown = [s for s in steps if s not in STEPS]
    if unknown:
        parser.error(f"unknown steps {unknown}: choose from {', '.join(STEPS)}")
    folder = args.dir or Path(tempfile.mkdtemp(prefix="udo-bench-llm-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        return report(folder, args.size, steps, args.jobs)
    finally:
        if args.dir is None:
            shutil.rmtree(folder, ignore_errors=True)


def report(folder: Path, size: str, steps: list[str], jobs: int) -> int:
    recipe = folder / "recipe.yaml"
    start = time.perf_counter()
    if not recipe.exists():
        make_project(folder, size)
        print(f"generate  {time.perf_counter() - start:8.1f} s   (model, data and recipe)",
              flush=True)
    largest = largest_tensor(folder / "model" / f"llama_{size}.onnx")
    limit = 2 * largest + SLACK
    missed = []
    saids = []
    for step in steps:
        got = measure(folder, recipe, step, jobs)
        saids += [f"{step}: {got['said'][a]}" for a in STEPS[step] if a in got["said"]]
        ok = got["peak"] <= limit
        missed += [] if ok else [step]
        kinds: dict[str, int] = {}
        for action in got["built"]:
            kinds[action.split(":")[0]] = kinds.get(action.split(":")[0], 0) + 1
        print(f"{step:9s} {got['wall_s']:8.1f} s   peak {got['peak'] / MB:7.0f} MB   "
              f"{'PASS' if ok else 'FAIL'}   built: "
              f"{', '.join(f'{k} x{n}' for k, n in kinds.items())}", flush=True)
    bundle = folder / "out" / "model" / f"llama_{size}.udb"
    store = sum(p.stat().st_size for p in (folder / "store").rglob("*") if p.is_file())
    data = folder / "model" / f"llama_{size}.data"
    print(f"largest tensor {largest / MB:.0f} MB; target: every step's peak <= 2 x "
          f"{largest / MB:.0f} + 600 = {limit / MB:.0f} MB")
    print(f"external data {data.stat().st_size / MB if data.exists() else 0:.0f} MB, bundle "
          f"{bundle.stat().st_size / MB if bundle.exists() else 0:.0f} MB, store "
          f"{store / MB:.0f} MB")
    deploy = folder / "out" / "model" / f"llama_{size}_deploy.udb"
    if deploy.exists():
        four_bit = weight_bytes_at_4_bits(folder / "model" / f"llama_{size}.onnx")
        for part, (nbytes, held) in sorted(records(deploy).items()):
            ratio = nbytes / four_bit
            missed += [] if ratio <= 1.1 else [f"record {part}"]
            print(f"record {part}: {nbytes / MB:.1f} MB ({', '.join(sorted(held))}), "
                  f"{ratio:.3f}x the weights at 4 bits ({four_bit / MB:.1f} MB; target "
                  f"<= 1.1x)  {'PASS' if ratio <= 1.1 else 'FAIL'}")
    for said in saids:
        print(said)
    print(f"{'FAIL' if missed else 'PASS'}  " + (f"missed: {', '.join(missed)}"
                                                 if missed else "every target met"))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
