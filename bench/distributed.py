"""Benchmark: a 99-target matrix of real prepares, local `-j 2` against a loopback Dask cluster
of 2 workers, and what going through the scheduler costs per action.

    python bench/distributed.py [--keep DIR]

The project (written in a temp folder): the SqueezeNet example (examples/squeezenet: the onnx
wheel's light SqueezeNet with random weights and the Softplus UDO), quantized int8, prepared for
11 SoCs that differ in arch or VTCM x 3 levels x 3 output sets = 99 targets (99 distinct keys,
bench/noop.py's 100-target matrix made expensive: every prepare compiles the real model), one
run and its check. The upstream steps (opdef, packages, convert, quantize, outputs) are built
once into a seed store; each configuration then builds the whole recipe from a copy of it, so
both time the same 102 actions (99 prepares, assemble, run, check):

- local: the `udo-build` of this interpreter, `-j 2` (the forkserver pool);
- dask: `dask scheduler` and two `dask worker --nthreads 1 --no-nanny` on 127.0.0.1, the same
  store path (one machine: the store is the data plane), `--executor dask://HOST:PORT`.

Per-action overhead: (wall time x 2 workers - the sum of the actions' own seconds) / actions, the
part of each worker slot not spent running an action (submitting, scheduling, sending the spec,
storing the result, the engine's turn); the scheduler's cost is the dask figure minus the local
one. Target: at most 50 ms per action through Dask. The output folders must be byte-identical.
Prints a table and PASS/FAIL; exits 1 if a target is missed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
# this script's folder is sys.path[0], where its own name would shadow the `distributed` package
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != BENCH]
SOCS = ("sm8350", "sm8450", "sm8550", "sm8650", "sm8750", "sm8850", "qcs6490", "sm7450",
        "sa8295", "ssg2115p", "sa8797")  # 11 distinct (arch, VTCM)
OVERHEAD_MS = 50.0
UPSTREAM = ("opdef", "package:*", "convert", "quantize", "outputs:*")

RECIPE = """recipe: 1
name: distributed-bench
package:
  name: SoftplusPackage
  domain: aisw
  version: "1.0.0"
  ops:
    - config: ops/softplus.xml
      kernels: ops/kernels.py
  backends: [CPU, HTP]
model:
  onnx: model/squeezenet_softplus.onnx
quantize:
  input_list: data/calib.txt
  quantizer: tf
  per_channel: true
prepare:
  matrix:
    soc: [{socs}]
    optimization_level: [1, 2, 3]
    outputs: [default, {{tensors: [r64]}}, {{tensors: [r60]}}]
run:
  - name: smoke
    soc: sm8650
    input_list: data/test.txt
    check: {{min_sqnr_db: 15}}
"""


def make_project(root: Path) -> Path:
    root.mkdir(parents=True)
    (root / ".udo-build-root").write_text("")
    shutil.copytree(REPO / "examples/squeezenet/model", root / "model")
    shutil.copytree(REPO / "examples/squeezenet/data", root / "data")
    (root / "ops").mkdir()
    for name in ("softplus.xml", "kernels.py"):
        shutil.copy(REPO / "examples/softplus/ops" / name, root / "ops" / name)
    recipe = root / "recipe.yaml"
    recipe.write_text(RECIPE.format(socs=", ".join(SOCS)))
    return recipe


def build(recipe: Path, store: Path, out: Path, *extra: str) -> tuple[dict[str, Any], float]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    started = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "udo_build", str(recipe), "--store", str(store),
                           "--out", str(out), "--json", *extra], capture_output=True, text=True,
                          env=env, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"build failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout), wall


class Cluster:
    """A scheduler and two workers on loopback, as subprocesses."""

    def __init__(self, folder: Path) -> None:
        self.file = folder / "scheduler.json"
        self.procs = [self._spawn("scheduler", "--host", "127.0.0.1", "--port", "0",
                                  "--no-dashboard", "--scheduler-file", str(self.file))]
        deadline = time.monotonic() + 60
        while not self.file.exists():
            if time.monotonic() > deadline:
                sys.exit("the dask scheduler did not start")
            time.sleep(0.1)
        self.address = json.loads(self.file.read_text())["address"]
        for name in ("w1", "w2"):
            self.procs.append(self._spawn("worker", "--scheduler-file", str(self.file),
                                          "--nthreads", "1", "--no-nanny", "--name", name,
                                          "--host", "127.0.0.1", "--no-dashboard"))
        self._wait_workers(2)

    def _spawn(self, *args: str) -> subprocess.Popen[bytes]:
        return subprocess.Popen([sys.executable, "-m", "distributed.cli.dask_" + args[0],
                                 *args[1:]], stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)

    def _wait_workers(self, count: int) -> None:
        from distributed import Client

        with Client(self.address, timeout=60, set_as_default=False) as client:
            client.wait_for_workers(count, timeout=60)

    @property
    def url(self) -> str:
        return "dask://" + self.address.removeprefix("tcp://")

    def stop(self) -> None:
        for proc in reversed(self.procs):
            proc.terminate()
        for proc in self.procs:
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


def folder_digest(folder: Path) -> str:
    h = hashlib.sha256()
    for path in sorted(p for p in folder.rglob("*") if p.is_file()):
        if not path.name.startswith(".udo-build"):
            h.update(path.relative_to(folder).as_posix().encode() + b"\0" + path.read_bytes())
    return h.hexdigest()


def measure(summary: dict[str, Any], wall: float, workers: int) -> dict[str, float]:
    ran = [a for a in summary["actions"] if a["status"] == "built"]
    busy = sum(a["seconds"] for a in ran)
    return {"wall": wall, "executed": len(ran), "busy": busy,
            "overhead_ms": (wall * workers - busy) / max(len(ran), 1) * 1000}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--keep", type=Path, help="work here and keep it (default: a temp dir)")
    args = parser.parse_args(argv)
    root = args.keep or Path(tempfile.mkdtemp(prefix="udo-bench-dist-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        return run(root)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


def run(root: Path) -> int:
    recipe = make_project(root / "project")
    seed = root / "seed"
    build(recipe, seed, root / "seed-out", *UPSTREAM)
    results = {}
    digests = {}
    for name in ("local", "dask"):
        store = root / f"store-{name}"
        shutil.copytree(seed, store, symlinks=True)
        out = root / f"out-{name}"
        cluster = Cluster(root) if name == "dask" else None
        try:
            extra = ("--executor", cluster.url) if cluster else ("-j", "2")
            summary, wall = build(recipe, store, out, *extra)
        finally:
            if cluster is not None:
                cluster.stop()
        results[name] = measure(summary, wall, 2)
        digests[name] = folder_digest(out)
    for name, m in results.items():
        print(f"{name:>6}: wall {m['wall']:.2f} s, executed {m['executed']:.0f}, actions' own "
              f"{m['busy']:.2f} s, per-action overhead {m['overhead_ms']:.0f} ms")
    local, dask = results["local"], results["dask"]
    scheduler = dask["overhead_ms"] - local["overhead_ms"]
    same = digests["local"] == digests["dask"]
    ok_overhead = scheduler <= OVERHEAD_MS
    print(f"dask / local wall: {dask['wall'] / local['wall']:.2f}x")
    print(f"{'PASS' if ok_overhead else 'FAIL'}  the scheduler's cost per action {scheduler:.0f} "
          f"ms (dask {dask['overhead_ms']:.0f} - local {local['overhead_ms']:.0f}; target <= "
          f"{OVERHEAD_MS:.0f} ms)")
    print(f"{'PASS' if same else 'FAIL'}  output folders byte-identical")
    return 0 if ok_overhead and same else 1


if __name__ == "__main__":
    sys.exit(main())
