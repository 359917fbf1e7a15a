"""Benchmark: a 99-target matrix of real prepares, local `-j 2` against a loopback Dask cluster
of 2 workers, and what going through the scheduler costs per action.

    python bench/distributed_builds.py [--socs N] [--shards N] [--smoke] [--keep DIR]

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

With `--shards N` it measures sharded CI instead (README, Sharded CI): the upstream is put in a
loopback nginx remote, then N `--shard K/N` builds start together with empty stores, twice:
first split by kind (no timings yet), then, after a change to the kernels that every prepare
keys (each runs again), by the seconds the first round filed. For each round: every key built
once in all, and each shard's prepare seconds within BALANCE (20%) of the shards' mean.

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
SOCS = ("sm8350", "sm8450", "sm8550", "sm8650", "sm8750", "sm8850", "qcs6490", "sm7450",
        "sa8295", "ssg2115p", "sa8797")  # 11 distinct (arch, VTCM)
OVERHEAD_MS = 50.0
LOOPBACK = ("--host", "127.0.0.1", "--no-dashboard", "--dashboard-address", "127.0.0.1:0")
BALANCE = 0.2  # each shard's prepare seconds within this fraction of the shards' mean
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


def make_project(root: Path, socs: int = len(SOCS)) -> Path:
    root.mkdir(parents=True)
    (root / ".udo-build-root").write_text("")
    shutil.copytree(REPO / "examples/squeezenet/model", root / "model")
    shutil.copytree(REPO / "examples/squeezenet/data", root / "data")
    (root / "ops").mkdir()
    for name in ("softplus.xml", "kernels.py"):
        shutil.copy(REPO / "examples/softplus/ops" / name, root / "ops" / name)
    recipe = root / "recipe.yaml"
    recipe.write_text(RECIPE.format(socs=", ".join(SOCS[:socs])))
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
        self.procs = [self._spawn("scheduler", *LOOPBACK, "--port", "0", "--scheduler-file",
                                  str(self.file))]
        deadline = time.monotonic() + 60
        while not self.file.exists():
            if time.monotonic() > deadline:
                sys.exit("the dask scheduler did not start")
            time.sleep(0.1)
        self.address = json.loads(self.file.read_text())["address"]
        for name in ("w1", "w2"):
            self.procs.append(self._spawn("worker", "--scheduler-file", str(self.file),
                                          "--nthreads", "1", "--no-nanny", "--name", name,
                                          *LOOPBACK))
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
    parser.add_argument("--shards", type=int, metavar="N",
                        help="measure N shards started together instead (see above)")
    parser.add_argument("--socs", type=int, default=len(SOCS), choices=range(1, len(SOCS) + 1),
                        metavar="N", help=f"the first N of the {len(SOCS)} SoCs (a smaller "
                        "matrix: 9 prepares per SoC; the scheduler's cost is a per-action "
                        "average, so it is meaningful from about 3 SoCs)")
    parser.add_argument("--smoke", action="store_true",
                        help="2 shards over 2 SoCs, for CI: every key built once is checked, "
                        "the balance (noise at 9 prepares a shard) only reported")
    args = parser.parse_args(argv)
    if args.smoke:
        args.shards, args.socs = 2, 2
    root = args.keep or Path(tempfile.mkdtemp(prefix="udo-bench-dist-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        if args.shards:
            return run_shards(root, args.shards, args.socs, balance=not args.smoke)
        return run(root, args.socs)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


def run(root: Path, socs: int) -> int:
    recipe = make_project(root / "project", socs)
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


def run_shards(root: Path, count: int, socs: int, balance: bool = True) -> int:
    sys.path.insert(0, str(REPO))
    from tests.store.nginx import Nginx, nginx_binary
    from udo_build.store.remote.trust import generate

    binary = nginx_binary()
    if binary is None:
        sys.exit("nginx is not installed (apt-get install nginx)")
    recipe = make_project(root / "project", socs)
    key = generate("bench")
    (root / "ci.key").write_text(key.line + "\n")
    (root / "ci.key").chmod(0o600)
    server = Nginx(root / "nginx", binary).start()
    remote = ("--remote", server.url, "--signing-key", str(root / "ci.key"), "--ci")
    try:
        build(recipe, root / "seed", root / "seed-out", *UPSTREAM, *remote)
        ok = True
        for round_, label in enumerate(("by kind", "by the last seconds")):
            if round_:  # every prepare keys the kernels' code: all of them run again
                kernels = recipe.parent / "ops" / "kernels.py"
                kernels.write_text(kernels.read_text() + "\n_BENCH_ROUND = 1\n")
            ok &= _shard_round(recipe, root / f"round{round_}", count, remote, label, balance)
    finally:
        server.kill()
    return 0 if ok else 1


def _shard_round(recipe: Path, folder: Path, count: int, remote: tuple[str, ...],
                 label: str, balance: bool) -> bool:
    started = time.perf_counter()
    procs = [subprocess.Popen([sys.executable, "-m", "udo_build", str(recipe), "--store",
                               str(folder / f"store{k}"), "-j", "1", "--json", "--shard",
                               f"{k}/{count}", *remote], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for k in range(1, count + 1)]
    summaries = []
    for proc in procs:
        out, err = proc.communicate()
        if proc.returncode != 0:
            sys.exit(f"a shard failed ({proc.returncode}):\n{err[-3000:]}")
        summaries.append(json.loads(out))
    wall = time.perf_counter() - started
    built = [a["key"] for s in summaries for a in s["actions"] if a["status"] == "built"]
    loads = [sum(a["seconds"] for a in s["actions"]
                 if a["status"] == "built" and a["kind"] == "prepare") for s in summaries]
    counts = [sum(1 for a in s["actions"] if a["status"] == "built" and a["kind"] == "prepare")
              for s in summaries]
    mean = sum(loads) / count
    worst = max(abs(load - mean) for load in loads) / mean if mean else 0.0
    once = len(built) == len(set(built))
    print(f"{label}: wall {wall:.1f} s; prepares per shard {counts}; their seconds "
          f"{[round(x, 1) for x in loads]} (mean {mean:.1f}, worst {worst:.0%} off)")
    print(f"{'PASS' if once else 'FAIL'}  every key built once in all ({len(built)} built)")
    verdict = ("PASS" if worst <= BALANCE else "FAIL") if balance else "info"
    print(f"{verdict}  {label}: each shard within {BALANCE:.0%} of the mean")
    return once and (worst <= BALANCE or not balance)


if __name__ == "__main__":
    sys.exit(main())
