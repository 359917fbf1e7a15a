"""Benchmark: a Llama-style decoder built through a recipe, each step's peak memory bounded.

    python bench/llm.py [--size tiny|small|medium|1b] [--steps convert,quantize,prepare,run]
                        [--dir DIR] [--jobs N]

The model is examples/llama/make_model.py's (`1b`: TinyLlama-1.1B's shape, 22 layers, hidden
2048, 32 heads / 4 KV heads, FFN 5632, vocabulary 32000: 4.4 GB of float32 weights in one
external data file; `medium` and `small` the same layout, smaller, with external data; `tiny`
its weights inside the model), generated at AR-1 and context 256 into a project of its own
with a recipe: the custom ops (RoPE and RMSNorm of examples/decoder and examples/encoder),
quantize (16-bit activations, 8-bit weights per channel, over 2 AR-1 steps), prepare for
sm8550 and sm8650 at AR-1 and AR-128, and a run at AR-1. Each step is `udo-build build RECIPE
ACTIONS` in a process of its own (what it needs from earlier steps comes from the store):

  convert   convert                 (the external data file a keyed source, stored streamed)
  quantize  quantize                (calibration and the quantized bundle)
  prepare   prepare:*               (the outputs resolved, 4 records)
  run       run:*                   (the deployable bundle assembled, the AR-1 run)

A step's peak is the largest resident set (ru_maxrss: anonymous and mapped file pages) of any
process of its build, the build's own process included. Target (issue 28, item 1): every
step's peak <= 2 x the largest tensor + 600 MB. Prints each step's wall time, peak and what it
built, the largest tensor, the bundle and store bytes, and PASS or FAIL per step; exits 1 when a
step misses the target (2 when a build fails).
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
         "run": ["run:*"]}
OPS = {"decoder": ("rope.xml", "kernels.py"), "encoder": ("rmsnorm.xml", "kernels.py")}
CONTEXT = 256
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
  input_list: data/calib.txt
  act_bitwidth: 16
  weights_bitwidth: 8
  bias_bitwidth: 32
  per_channel: true
  quantizer: tf
prepare:
  matrix:
    soc: [sm8550, sm8650]
    optimization_level: [2]
    input_dimensions: [{ar1}, {ar128}]
    outputs: [{{tensors: [logits]}}]
run:
  - name: token
    soc: sm8650
    input_list: data/test.txt
    outputs: {{tensors: [logits]}}
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
    make_model.write_model(size, folder / "model", 1, CONTEXT)
    make_model.write_steps(folder / "data", "calib", size, 1, CONTEXT, 2, seed=1)
    make_model.write_steps(folder / "data", "test", size, 1, CONTEXT, 1, seed=2)
    spec = make_model.SIZES[size]
    recipe = folder / "recipe.yaml"
    recipe.write_text(RECIPE.format(size=size, ar1=_dims(spec, 1), ar128=_dims(spec, 128)))
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
    return got


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=("tiny", "small", "medium", "1b"), default="1b")
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
    for step in steps:
        got = measure(folder, recipe, step, jobs)
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
    print(f"{'FAIL' if missed else 'PASS'}  " + (f"over the target: {', '.join(missed)}"
                                                 if missed else "every step within the target"))
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
