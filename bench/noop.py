"""Benchmark: cold, no-op and one-change builds of a synthetic 100-target recipe (and DVC's).

    python bench/noop.py [--targets 100] [--repeats 10] [--dvc PATH | --no-dvc] [--smoke]
                         [--python PATH]

Generates a project in a temporary folder (a tiny ONNX model, calibration and test data, the
Softplus op config, a recipe whose prepare matrix is N include entries with N distinct input
dimensions, so N distinct prepare keys), then times whole `udo-build` processes:

- cold build, then the no-op build (median of --repeats): `--json` must say executed == 0.
  A no-op is recorded by the first no-op build and replayed by the next (builder/uptodate.py):
  the bench waits out the stat cache's racy window after the cold build (files changed in the
  last two seconds are not trusted), then alternates a full no-op (the record removed first)
  with a replayed one, and reports both (the target is on the no-op as a user meets it, the
  replayed one); the replay must report what the full no-op reported;
- one target's input dimensions edited: exactly that prepare runs, plus what consumes it
  (assemble, run), and with `udo-build RECIPE 'prepare:*'` exactly one action runs;
- what the no-op imports (`-X importtime`: no onnx, lxml, numpy, jsonschema, emulator) and how
  often it parses the recipe (cProfile: at most once; a replayed no-op loads it not at all);
- when DVC is found (`--dvc PATH`, else `dvc` on PATH), the same pipeline as a dvc.yaml (one
  stage per udo-build action, same dependencies, `sha256sum` as the command): cold and no-op
  `dvc repro`.

Target: the no-op at most NOOP_LIMIT_MS (100 ms) of wall time (median), and at least DVC_RATIO
times faster than DVC's. Also printed: `python -c pass` (the interpreter and this environment's
site start-up, which the no-op pays first) and the no-op's time beyond it. `--python PATH` runs
the `udo-build` beside another interpreter (a venv with the wheel installed, as .ci/run makes
one: what users get, without this checkout's editable finder or other .pth files) and takes its
`-c pass` as the peer; PYTHONPATH is then not passed on. `--smoke` is the CI
size (5 targets, 2 no-op runs, no DVC, no time targets: what is checked is what the no-op does,
not how fast; about 10 s).

Kinds udo-build does not implement yet run as cheap stand-ins (bench/_cheap_kinds.py, loaded
through UDO_BUILD_PLUGINS). Prints a table and PASS/FAIL per target; exits 1 if one is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
PLUGIN = BENCH / "_cheap_kinds.py"
SOCS = ("sm8450", "sm8550", "sm8650", "sm8750")
NOOP_LIMIT_MS = 100.0
DVC_RATIO = 10.0
FORBIDDEN = ("onnx", "lxml", "numpy", "jsonschema")
PYTHON = sys.executable  # the interpreter whose udo-build is measured (--python)
# the emulator: its compiler, sessions, kernels and rewrite engine (the SoC table and the
# run settings and checks the recipe holds are allowed)
EMULATOR = ("udo_build.compiler", "udo_build.runtime.float_session", "udo_build.runtime.integer",
            "udo_build.kernels", "udo_build.rewrite")


# -- the synthetic project ------------------------------------------------------------------------


def dims(i: int) -> list[int]:
    return [1, 3, 8, 8 + i]


def make_project(folder: Path, targets: int) -> Path:
    """A project with every input the recipe names; returns the recipe path."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / ".udo-build-root").write_text("")
    ops = folder / "ops"
    ops.mkdir(exist_ok=True)
    for name in ("softplus.xml", "kernels.py"):
        shutil.copyfile(REPO / "examples" / "softplus" / "ops" / name, ops / name)
    (folder / "model").mkdir(exist_ok=True)
    (folder / "model" / "net.onnx").write_bytes(tiny_onnx())
    for listing, count in (("calib", 2), ("test", 1)):
        (folder / "data" / listing).mkdir(parents=True, exist_ok=True)
        lines = []
        for j in range(count):
            raw = folder / "data" / listing / f"input_{j}.raw"
            size = 3 * 8 * (9 if listing == "test" else 8)  # the run's input dimensions
            raw.write_bytes(_floats(size, seed=j + 7 * count))
            lines.append(f"{listing}/{raw.name}")
        (folder / "data" / f"{listing}.txt").write_text("\n".join(lines) + "\n")
    return write_recipe(folder, targets)


def write_recipe(folder: Path, targets: int, changed: dict[int, list[int]] | None = None
                 ) -> Path:
    """The recipe: N include entries (SoCs in turn, input dimensions all different)."""
    changed = changed or {}
    entries = [f"      - {{soc: {SOCS[i % len(SOCS)]}, "
               f"input_dimensions: {{input: {changed.get(i, dims(i))}}}}}"
               for i in range(targets)]
    text = "\n".join([
        "# generated by bench/noop.py", "recipe: 1", "name: bench-noop",
        "package:", "  name: BenchPackage", "  ops:", "    - config: ops/softplus.xml",
        "      kernels: ops/kernels.py", "  backends: [CPU, HTP]",
        "model:", "  onnx: model/net.onnx",
        "quantize:", "  input_list: data/calib.txt", "  quantizer: tf",
        "prepare:", "  matrix:", "    include:", *entries,
        "run:", "  - name: smoke", "    soc: sm8550", "    input_list: data/test.txt",
        f"    input_dimensions: {{input: {dims(1)}}}", "",  # target 1 is sm8550's
    ])
    recipe = folder / "recipe.yaml"
    recipe.write_text(text)
    return recipe


def tiny_onnx() -> bytes:
    """A real ONNX model, input [1,3,8,8] -> Relu -> logits (about 100 bytes)."""
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["input"], ["logits"], name="head")], "bench",
        [helper.make_tensor_value_info("input", TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 3, 8, 8])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model.SerializeToString()


def _floats(count: int, seed: int) -> bytes:
    import struct

    return struct.pack(f"<{count}f", *(((seed * 31 + k * 17) % 97) / 97.0 - 0.5
                                       for k in range(count)))


# -- running udo-build ----------------------------------------------------------------------------


def find_script(name: str, python: Path | None = None) -> Path | None:
    """The console script next to this Python (not a pyenv shim), else the one on PATH."""
    beside = Path(python or PYTHON).parent / name
    if python is not None:
        return beside if beside.exists() else None
    if beside.exists():
        return beside
    found = shutil.which(name)
    return Path(found) if found else None


def udo_command(via: str = "script") -> list[str]:
    script = find_script("udo-build")
    if via == "script" and script is not None:
        return [str(script)]
    return [PYTHON, "-m", "udo_build"]


def bench_env(sleep_ms: float = 0, output_bytes: int = 1024) -> dict[str, str]:
    """The environment of a bench build: the stand-in kinds, how long each sleeps, how large
    their outputs are (keep that one fixed over builds on one store: it does not enter keys)."""
    env = dict(os.environ)
    env["UDO_BUILD_PLUGINS"] = str(PLUGIN)
    env["UDO_BENCH_SLEEP_MS"] = str(sleep_ms)
    env["UDO_BENCH_OUTPUT_BYTES"] = str(output_bytes)
    env.pop("UDO_BUILD_STORE", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # measure as installed: with bytecode caches
    if PYTHON != sys.executable:  # another environment's udo-build: its own install
        env.pop("PYTHONPATH", None)
    return env


@dataclass
class Build:
    seconds: float
    code: int
    summary: dict[str, Any] = field(default_factory=dict)
    stderr: str = ""
    cpu: float = 0.0  # user + system seconds of the process (less moved by the machine's load)

    def count(self, key: str) -> int:
        return int(self.summary.get(key, -1))

    def executed_ids(self) -> list[str]:
        return [a["id"] for a in self.summary.get("actions", []) if a["status"] == "built"]


def build(cmd: Sequence[str], recipe: Path, store: Path, *, env: dict[str, str],
          targets: Sequence[str] = ()) -> Build:
    argv = [*cmd, str(recipe), *targets, "--store", str(store), "--json"]
    used = children_cpu()
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=recipe.parent, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    try:
        summary = json.loads(proc.stdout) if proc.stdout.strip() else {}
    except ValueError:
        summary = {"unparsed": proc.stdout[-2000:]}
    return Build(seconds, proc.returncode, summary, proc.stderr, children_cpu() - used)


def children_cpu() -> float:
    """User + system seconds of this process's finished children so far."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed(argv: Sequence[str], *, cwd: Path, env: dict[str, str] | None = None,
          check: bool = True) -> tuple[float, subprocess.CompletedProcess[str]]:
    started = time.perf_counter()
    proc = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True)
    seconds = time.perf_counter() - started
    if check and proc.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, argv))} exited {proc.returncode}:\n"
                           f"{proc.stdout[-2000:]}\n{proc.stderr[-2000:]}")
    return seconds, proc


def median_ms(values: Sequence[float]) -> float:
    return statistics.median(values) * 1000


# -- what the no-op imports and how often it parses the recipe ------------------------------------


def import_report(cmd: Sequence[str], recipe: Path, store: Path, env: dict[str, str],
                  terminal: bool = False) -> tuple[list[str], list[tuple[int, str]]]:
    """(forbidden modules imported, the 12 costliest top-level imports as (µs, name)); with
    `terminal`, the no-op as on a terminal (FORCE_COLOR, its summary in color, not JSON), where
    rich is forbidden too."""
    python = [PYTHON, "-X", "importtime"]
    argv = [*python, "-m", "udo_build"] if cmd[0] == PYTHON else [*python, cmd[0]]
    env = dict(env, FORCE_COLOR="1") if terminal else env
    _, proc = timed([*argv, str(recipe), "--store", str(store),
                     *(() if terminal else ("--json",))], cwd=recipe.parent, env=env)
    modules: list[tuple[int, int, str]] = []
    for line in proc.stderr.splitlines():
        m = re.match(r"import time:\s+(\d+) \|\s+(\d+) \|( *)(\S+)", line)
        if m:
            modules.append((int(m[2]), len(m[3]), m[4]))
    names = [name for _, _, name in modules]
    forbidden = (*FORBIDDEN, "rich") if terminal else FORBIDDEN
    bad = [n for n in names if n.split(".")[0] in forbidden
           or any(n == e or n.startswith(e + ".") for e in EMULATOR)]
    top = sorted(((us, name) for us, depth, name in modules if depth == 1), reverse=True)
    return bad, top[:12]


def profile_report(recipe: Path, store: Path, env: dict[str, str], folder: Path
                   ) -> tuple[int, int, list[str]]:
    """(load_recipe calls, YAML parses, the top udo_build functions by cumulative time)."""
    import pstats

    out = folder / "noop.prof"
    timed([PYTHON, "-m", "cProfile", "-o", str(out), "-m", "udo_build", str(recipe),
           "--store", str(store), "--json"], cwd=recipe.parent, env=env)
    stats = pstats.Stats(str(out))
    raw: dict[Any, Any] = stats.stats  # type: ignore[attr-defined]
    def calls(module: str, function: str) -> int:
        suffix = os.path.join("udo_build", *module.split("/"))
        return sum(v[1] for (file, _, fn), v in raw.items()
                   if fn == function and file.endswith(suffix))

    loads, parses = calls("recipe/load.py", "load_recipe"), calls("source.py", "load_yaml")
    rows = sorted(((v[3], v[1], f"{Path(file).name}:{fn}") for (file, _, fn), v in raw.items()
                   if "udo_build" in file), reverse=True)
    lines = [f"{cum * 1000:8.1f} ms  {calls:6d}x  {name}" for cum, calls, name in rows[:15]]
    return loads, parses, lines


# -- DVC ------------------------------------------------------------------------------------------


def dvc_pipeline(recipe: Path, folder: Path) -> int:
    """The recipe's plan as a dvc.yaml in `folder` (sources copied); returns the stage count."""
    from udo_build.builder.plan import Dep, plan_recipe
    from udo_build.recipe import load_recipe

    plan = plan_recipe(load_recipe(recipe))
    project = recipe.parent
    for sub in ("ops", "model", "data"):
        shutil.copytree(project / sub, folder / sub, dirs_exist_ok=True)
    names = {aid: f"s{i:03d}_{a.kind}" for i, (aid, a) in enumerate(plan.actions.items())}
    stages = {}
    for aid, action in plan.actions.items():
        deps = sorted({f"out/{names[i.action]}.txt" if isinstance(i, Dep)
                       else i.path.relative_to(project).as_posix()
                       for i in action.inputs.values()})
        out = f"out/{names[aid]}.txt"
        stages[names[aid]] = {"cmd": f"sha256sum {' '.join(deps)} > {out}", "deps": deps,
                              "outs": [out]}
    (folder / "out").mkdir(exist_ok=True)
    (folder / "dvc.yaml").write_text(json.dumps({"stages": stages}, indent=1))  # JSON is YAML
    return len(stages)


def bench_dvc(dvc: str, recipe: Path, folder: Path, repeats: int) -> dict[str, float]:
    folder.mkdir(parents=True)
    stages = dvc_pipeline(recipe, folder)
    env = dict(os.environ, DVC_NO_ANALYTICS="1")
    timed([dvc, "init", "--no-scm", "-q"], cwd=folder, env=env)
    timed([dvc, "config", "core.analytics", "false"], cwd=folder, env=env)
    timed([dvc, "config", "core.check_update", "false"], cwd=folder, env=env, check=False)
    cold, _ = timed([dvc, "repro"], cwd=folder, env=env)
    noops = []
    for _ in range(repeats):
        seconds, proc = timed([dvc, "repro"], cwd=folder, env=env)
        if "up to date" not in proc.stdout + proc.stderr:
            raise RuntimeError(f"dvc repro was not a no-op:\n{proc.stdout[-2000:]}")
        noops.append(seconds)
    version = timed([dvc, "--version"], cwd=folder, env=env)[1].stdout.strip()
    return {"stages": stages, "cold_ms": cold * 1000, "noop_ms": median_ms(noops),
            "version": version}  # type: ignore[dict-item]


# -- the benchmark --------------------------------------------------------------------------------


@dataclass
class Report:
    rows: list[tuple[str, str]] = field(default_factory=list)
    checks: list[tuple[str, bool, str]] = field(default_factory=list)

    def fact(self, name: str, value: str) -> None:
        self.rows.append((name, value))
        print(f"  {name:<44} {value}", flush=True)

    def check(self, name: str, ok: bool, detail: str) -> None:
        self.checks.append((name, ok, detail))

    def print_checks(self) -> bool:
        print("\ntargets:")
        for name, ok, detail in self.checks:
            print(f"  {'PASS' if ok else 'FAIL'}  {name}: {detail}")
        return all(ok for _, ok, _ in self.checks)


def run_bench(args: argparse.Namespace, work: Path) -> Report:
    rep = Report()
    cmd = udo_command(args.via)
    env = bench_env()
    project, store = work / "project", work / "store"
    recipe = make_project(project, args.targets)
    print(f"udo-build: {' '.join(cmd)}  (python {sys.version.split()[0]}, "
          f"{os.cpu_count()} cores)\npeer: {PYTHON} -c pass\nproject: {project}", flush=True)
    rep.fact("load average (1, 5, 15 min)", ", ".join(f"{x:.2f}" for x in os.getloadavg()))

    cold = build(cmd, recipe, store, env=env)
    actions = len(cold.summary.get("actions", []))
    rep.fact("actions in the plan", str(actions))
    rep.fact("cold build", f"{cold.seconds * 1000:.0f} ms, executed {cold.count('executed')}, "
             f"exit {cold.code}")
    rep.check("cold build succeeds", cold.code == 0 and cold.count("executed") == actions,
              f"exit {cold.code}, executed {cold.count('executed')} of {actions}"
              + (f"\n{cold.stderr[-1500:]}" if cold.code else ""))

    time.sleep(racy_window())  # what the cold build wrote is trusted from now on
    full, noops, passes = noop_builds(cmd, recipe, store, env, args.repeats)
    noop_ms = median_ms([b.seconds for b in noops])
    full_ms = median_ms([b.seconds for b in full])
    executed = sorted({b.count("executed") for b in [*full, *noops]})
    rep.fact(f"no-op build, full (median of {len(full)})",
             f"{full_ms:.1f} ms (min {min(b.seconds for b in full) * 1000:.1f}), the record "
             "removed before each")
    rep.fact(f"no-op build, replayed (median of {len(noops)})",
             f"{noop_ms:.1f} ms (min {min(b.seconds for b in noops) * 1000:.1f}, "
             f"max {max(b.seconds for b in noops) * 1000:.1f}), executed {executed}")
    rep.check("no-op executes nothing", executed == [0]
              and all(b.code == 0 for b in [*full, *noops]),
              f"executed {executed}, exits {sorted({b.code for b in [*full, *noops]})}")
    same = all(_told(b) == _told(full[0]) for b in [*full, *noops])
    rep.check("a replayed no-op reports what the full one does", same,
              "the same actions, keys, statuses" if same else "reports differ")
    if args.timing:
        rep.check(f"no-op <= {NOOP_LIMIT_MS:.0f} ms", noop_ms <= NOOP_LIMIT_MS,
                  f"median {noop_ms:.1f} ms")
    pass_ms = median_ms([b.seconds for b in passes])
    rep.fact("python -c pass, in the same rounds (median)", f"{pass_ms:.1f} ms")
    rep.fact("no-op beyond python -c pass (medians)",
             f"replayed {noop_ms - pass_ms:.1f} ms, full {full_ms - pass_ms:.1f} ms")
    cpu = {name: median_ms([b.cpu for b in runs])
           for name, runs in (("replayed", noops), ("full", full), ("python -c pass", passes))}
    rep.fact("CPU, user + system (medians)", ", ".join(f"{n} {ms:.1f} ms" for n, ms in cpu.items()))
    _references(rep, cmd, recipe, store, env, args.repeats)

    bad, top = import_report(cmd, recipe, store, env)
    rep.check("no-op imports no onnx/lxml/numpy/jsonschema/emulator", not bad,
              ", ".join(bad) or "none imported")
    bad = import_report(cmd, recipe, store, env, terminal=True)[0]
    rep.check("no-op on a terminal imports no rich either (nor the others)", not bad,
              ", ".join(bad) or "none imported")
    if args.profile:
        print("\nno-op: costliest top-level imports (cumulative µs, -X importtime):")
        for us, name in top:
            print(f"  {us:8d}  {name}")
        loads, parses, lines = profile_report(recipe, store, env, work)
        print("\nno-op: cProfile, udo_build functions by cumulative time:")
        print("\n".join(f"  {line}" for line in lines))
        rep.check("no-op loads the recipe once at most (parsing YAML once at most)",
                  loads <= 1 and parses <= 1,
                  f"load_recipe called {loads}x (0: replayed), load_yaml {parses}x")

    _comment_only(rep, cmd, recipe, store, env)
    _one_change(rep, cmd, recipe, store, env, args.targets)
    if args.dvc:
        _dvc(rep, args, recipe, work, noop_ms)
    return rep


def racy_window() -> float:
    """Seconds after which what a build wrote is trusted by the stat cache and the no-op
    record (see store/filecache.py, builder/uptodate.py), with a margin."""
    from udo_build.builder.uptodate import RACY_NS
    from udo_build.store.filecache import RACY_SECONDS

    return max(RACY_SECONDS, RACY_NS / 1e9) + 0.2


def noop_builds(cmd: Sequence[str], recipe: Path, store: Path, env: dict[str, str],
                repeats: int) -> tuple[list[Build], list[Build], list[Build]]:
    """(full no-ops, replayed no-ops, `python -c pass` runs), in turn, round after round
    (the machine's load moves all three alike): before each full one the record is removed
    (it writes it again), so the replay after it has one."""
    from udo_build.builder.uptodate import FOLDER

    full, replayed, passes = [], [], []
    for _ in range(repeats):
        shutil.rmtree(store / FOLDER, ignore_errors=True)
        full.append(build(cmd, recipe, store, env=env))
        replayed.append(build(cmd, recipe, store, env=env))
        used = children_cpu()
        seconds = timed([PYTHON, "-c", "pass"], cwd=recipe.parent)[0]
        passes.append(Build(seconds, 0, cpu=children_cpu() - used))
    return full, replayed, passes


def _told(b: Build) -> list[tuple[str, str, str]]:
    return [(a["id"], a["key"], a["status"]) for a in b.summary.get("actions", [])]


def _references(rep: Report, cmd: list[str], recipe: Path, store: Path, env: dict[str, str],
                repeats: int) -> None:
    imports = [timed([PYTHON, "-c", "import udo_build.cli"], cwd=recipe.parent, env=env)[0]
               for _ in range(repeats)]
    rep.fact("python -c 'import udo_build.cli' (median)", f"{median_ms(imports):.1f} ms")
    other = udo_command("module" if cmd[0] != PYTHON else "script")
    if other != cmd:
        runs = [build(other, recipe, store, env=env).seconds for _ in range(repeats)]
        rep.fact(f"no-op via {' '.join(Path(a).name for a in other)} (median)",
                 f"{median_ms(runs):.1f} ms")


def _comment_only(rep: Report, cmd: list[str], recipe: Path, store: Path,
                  env: dict[str, str]) -> None:
    """A comment added to the recipe: no key changes, but the recipe is parsed and checked."""
    text = recipe.read_text()
    recipe.write_text(text + "# a comment\n")
    edited = build(cmd, recipe, store, env=env)
    again = build(cmd, recipe, store, env=env)
    recipe.write_text(text)
    rep.fact("recipe edited (a comment), first build", f"{edited.seconds * 1000:.0f} ms, "
             f"executed {edited.count('executed')}; the next: {again.seconds * 1000:.0f} ms")
    rep.check("a comment in the recipe reruns nothing", edited.code == 0
              and edited.count("executed") == 0, f"executed {edited.count('executed')}")


def _one_change(rep: Report, cmd: list[str], recipe: Path, store: Path, env: dict[str, str],
                targets: int) -> None:
    k = targets // 2
    write_recipe(recipe.parent, targets, {k: dims(targets + 1)})
    changed = build(cmd, recipe, store, env=env)
    ids = changed.executed_ids()
    prepares = [i for i in ids if i.startswith("prepare:")]
    rep.fact("one target changed, whole recipe", f"{changed.seconds * 1000:.0f} ms, executed "
             f"{len(ids)}: {', '.join(ids)}")
    rep.check("one change: one prepare runs, then only what consumes it",
              changed.code == 0 and len(prepares) == 1
              and set(ids) - set(prepares) <= {"assemble", "run:smoke"},
              f"executed {ids}")
    write_recipe(recipe.parent, targets, {k: dims(targets + 2)})
    selected = build(cmd, recipe, store, env=env, targets=["prepare:*"])
    rep.fact("one target changed, 'prepare:*' only", f"{selected.seconds * 1000:.0f} ms, "
             f"executed {selected.executed_ids()}")
    rep.check("one change: exactly one action executed ('prepare:*')",
              selected.code == 0 and selected.count("executed") == 1,
              f"executed {selected.count('executed')}: {selected.executed_ids()}")
    write_recipe(recipe.parent, targets)


def _dvc(rep: Report, args: argparse.Namespace, recipe: Path, work: Path,
         noop_ms: float) -> None:
    dvc = args.dvc_path or shutil.which("dvc")
    if dvc is None:
        rep.fact("dvc", "not installed: comparison skipped (pip install dvc, or --dvc PATH)")
        if args.timing:
            rep.check(f"no-op >= {DVC_RATIO:.0f}x faster than dvc repro", False,
                      "dvc not found: not measured")
        return
    figures = bench_dvc(dvc, recipe, work / "dvc", args.repeats)
    ratio = figures["noop_ms"] / noop_ms
    rep.fact("dvc", f"{figures['version']} ({figures['stages']} stages)")
    rep.fact("dvc repro, cold", f"{figures['cold_ms']:.0f} ms")
    rep.fact(f"dvc repro, no-op (median of {args.repeats})", f"{figures['noop_ms']:.0f} ms")
    rep.fact("dvc no-op / udo-build no-op", f"{ratio:.1f}x")
    if args.timing:
        rep.check(f"no-op >= {DVC_RATIO:.0f}x faster than dvc repro", ratio >= DVC_RATIO,
                  f"{ratio:.1f}x")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--targets", type=int, default=100, help="prepare targets (default 100)")
    p.add_argument("--repeats", type=int, default=10, help="no-op runs to take the median of")
    p.add_argument("--via", choices=("script", "module"), default="script",
                   help="run the udo-build console script (default) or python -m udo_build")
    p.add_argument("--dvc", dest="dvc_path", metavar="PATH", help="the dvc executable")
    p.add_argument("--no-dvc", dest="dvc", action="store_false", help="skip the DVC comparison")
    p.add_argument("--no-timing", dest="timing", action="store_false",
                   help="check correctness only, not the time targets (for smoke tests)")
    p.add_argument("--no-profile", dest="profile", action="store_false",
                   help="skip the import-time listing and cProfile run")
    p.add_argument("--keep", metavar="DIR", help="work in DIR (kept) instead of a temp folder")
    p.add_argument("--python", metavar="PATH",
                   help="measure the udo-build installed beside this interpreter (a venv with "
                        "the wheel: what users get), its `-c pass` the peer")
    p.add_argument("--smoke", action="store_true",
                   help="the CI size: 5 targets, 2 no-op runs, no DVC, no time targets")
    args = p.parse_args(argv)
    use_python(args.python)
    if args.smoke:
        args.targets, args.repeats, args.dvc, args.timing = 5, 2, False, False
    return args


def use_python(path: str | None) -> None:
    """Measure the udo-build of the interpreter at `path` (None: this one)."""
    global PYTHON
    if path is not None:
        if not os.access(path, os.X_OK) or find_script("udo-build", Path(path)) is None:
            raise SystemExit(f"--python {path}: no interpreter with a udo-build beside it")
        PYTHON = path


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.keep:
        work = Path(args.keep).resolve()
        work.mkdir(parents=True, exist_ok=False)
        rep = run_bench(args, work)
    else:
        with tempfile.TemporaryDirectory(prefix="udo-bench-noop-") as tmp:
            rep = run_bench(args, Path(tmp))
    return 0 if rep.print_checks() else 1


if __name__ == "__main__":
    sys.exit(main())
