"""Stress checks of the incremental engine: concurrent builds on one store, and kill -9.

    python bench/stress.py [--targets 100] [--processes 8] [--kills 20] [--seed N]

(a) --processes `udo-build` processes build the same fresh synthetic recipe (bench/noop.py's) on
    one store and one output folder at once: all must exit 0, and over all of their `--json`
    outputs every action must be executed exactly once (the others reuse it); then the store
    must verify clean.
(b) --kills times: change the calibration data (so quantize and everything after it is stale),
    start a build whose actions sleep --sleep-ms, `kill -9` it after a random delay (at random,
    the udo-build process alone, or its whole process group with the worker processes), kill
    what it left running, verify the store, then build again: that build must complete. At the
    end one more build must find everything built or cached, and the store must verify clean.

"Verify clean" is `udo-build store verify` exiting 0 when udo-build has that command, and
always this script's own read-only check (below): every blob under cas/ hashes to its name,
every action-cache entry is well-formed, filed under its key and names blobs that exist, and
nothing sits in quarantine/. Leftover `.tmp-*` files are counted, not failed (a killed writer
leaves them; they were never visible). Exits 1 if any check fails.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

if str(Path(__file__).resolve().parent) not in sys.path:
    sys.path.insert(0, str(Path(__file__).resolve().parent))

from noop import Build, bench_env, build, make_project, udo_command  # noqa: E402

SEED = 20261121


# -- the store check ------------------------------------------------------------------------------


@dataclass
class StoreCheck:
    blobs: int = 0
    entries: int = 0
    temporary: int = 0
    problems: list[str] = field(default_factory=list)
    tool: str = "not available"  # `udo-build store verify`: its verdict

    @property
    def clean(self) -> bool:
        return not self.problems


def check_store(store: Path) -> StoreCheck:
    """Read-only: every blob's digest, every action-cache entry, quarantine/."""
    check = StoreCheck()
    present: set[str] = set()
    for path in sorted((store / "cas").glob("*/*")):
        if path.name.startswith(".tmp-"):
            check.temporary += 1
            continue
        digest = path.name.removesuffix(".zst")
        problem = _blob_problem(path, digest)
        check.blobs += 1
        if problem:
            check.problems.append(f"blob {path.relative_to(store)}: {problem}")
        else:
            present.add(digest)
    for path in sorted((store / "ac").glob("*/*")):
        if path.name.startswith(".tmp-"):
            check.temporary += 1
            continue
        check.entries += 1
        problem = _entry_problem(path, present)
        if problem:
            check.problems.append(f"entry {path.relative_to(store)}: {problem}")
    quarantined = list((store / "quarantine").glob("*"))
    if quarantined:
        check.problems.append(f"{len(quarantined)} file(s) in quarantine/: "
                              + ", ".join(p.name for p in quarantined[:5]))
    return check


def _blob_problem(path: Path, digest: str) -> str:
    if len(digest) != 64 or path.parent.name != digest[:2]:
        return "name outside the layout"
    try:
        data = path.read_bytes()
        if path.suffix == ".zst":
            import zstandard

            data = zstandard.ZstdDecompressor().decompress(data, max_output_size=1 << 34)
    except Exception as exc:  # noqa: BLE001 - any failure to read is the finding
        return f"unreadable: {type(exc).__name__}: {exc}"
    actual = hashlib.sha256(data).hexdigest()
    return "" if actual == digest else f"bytes hash to {actual[:12]}"


def _entry_problem(path: Path, present: set[str]) -> str:
    try:
        doc = json.loads(path.read_bytes())
        outputs = doc["outputs"]
        if doc["key"] != path.stem or doc["schema"] != "udo-build/action-result":
            return "filed under another key, or not a result"
    except (OSError, ValueError, KeyError, TypeError) as exc:
        return f"malformed: {type(exc).__name__}: {exc}"
    missing = [n for n, o in outputs.items() if o.get("digest") not in present]
    return f"names missing or corrupt blobs: {', '.join(missing)}" if missing else ""


def verify(store: Path, cmd: list[str], env: dict[str, str]) -> StoreCheck:
    """This script's check, and `udo-build store verify` when udo-build has it."""
    check = check_store(store)
    if _has_store_command():
        proc = subprocess.run([*cmd, "store", "verify", "--store", str(store), "--json"],
                              env=env, capture_output=True, text=True)
        check.tool = f"exit {proc.returncode}"
        if proc.returncode != 0:
            check.problems.append(f"udo-build store verify exited {proc.returncode}: "
                                  f"{proc.stdout[-1500:]}{proc.stderr[-1500:]}")
    return check


def _has_store_command() -> bool:
    from udo_build.cli import COMMANDS

    return "store" in COMMANDS


# -- (a) concurrent builds ------------------------------------------------------------------------


def concurrent_builds(recipe: Path, store: Path, processes: int, env: dict[str, str]
                      ) -> tuple[list[Build], float]:
    cmd = udo_command()
    argv = [*cmd, str(recipe), "--store", str(store), "--json"]
    started = time.perf_counter()
    procs = [subprocess.Popen(argv, cwd=recipe.parent, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(processes)]
    builds = []
    for proc in procs:
        out, err = proc.communicate()
        try:
            summary = json.loads(out) if out.strip() else {}
        except ValueError:
            summary = {"unparsed": out[-2000:]}
        builds.append(Build(time.perf_counter() - started, proc.returncode, summary, err))
    return builds, time.perf_counter() - started


def stress_concurrent(args: argparse.Namespace, work: Path, results: list[Check]) -> None:
    recipe = make_project(work / "concurrent", args.targets)
    store = work / "store-concurrent"
    builds, seconds = concurrent_builds(recipe, store, args.processes,
                                        bench_env(args.sleep_ms, args.output_bytes))
    plans = {len(b.summary.get("actions", [])) for b in builds}
    actions = max(plans)
    per_id: Counter[str] = Counter()
    for b in builds:
        per_id.update(b.executed_ids())
    executed = sum(max(b.count("executed"), 0) for b in builds)
    codes = [b.code for b in builds]
    print(f"(a) {args.processes} processes, {actions} actions each, {args.sleep_ms:g} ms per "
          f"action: {seconds:.2f} s wall; executed per process "
          f"{[b.count('executed') for b in builds]}, sum {executed}; exits {codes}", flush=True)
    twice = sorted(i for i, n in per_id.items() if n > 1)
    results.append(Check("(a) all processes exit 0", all(c == 0 for c in codes), f"{codes}"
                         + "".join(f"\n{b.stderr[-800:]}" for b in builds if b.code)))
    results.append(Check("(a) every action executed exactly once in total",
                         executed == actions and not twice and len(per_id) == actions
                         and plans == {actions},
                         f"sum of executed {executed}, actions {actions}, plans {sorted(plans)}"
                         + (f", executed more than once: {twice[:5]}" if twice else "")))
    check = verify(store, udo_command(), bench_env(0, args.output_bytes))
    results.append(Check("(a) store verifies clean", check.clean, _describe(check)))


# -- (b) kill -9 ----------------------------------------------------------------------------------


def process_group(pgid: int) -> list[int]:
    """Live processes of a process group (Linux /proc), zombies excluded."""
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2:].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            pids.append(int(entry))
    return pids


def kill_group(pgid: int) -> None:
    """SIGKILL what is left of a build we started, and wait until it is gone."""
    try:
        os.killpg(pgid, signal.SIGKILL)
    except ProcessLookupError:
        return
    deadline = time.monotonic() + 10
    while process_group(pgid) and time.monotonic() < deadline:
        time.sleep(0.01)


def change_calibration(project: Path, salt: int) -> None:
    raw = project / "data" / "calib" / "input_0.raw"
    data = bytearray(raw.read_bytes())
    data[:4] = salt.to_bytes(4, "little")
    raw.write_bytes(bytes(data))


@dataclass
class Kill:
    mode: str  # "build": the udo-build process only; "group": it and its workers at once
    delay: float
    orphans: int
    check: StoreCheck
    after: Build


def one_kill(recipe: Path, store: Path, mode: str, delay: float, slow: dict[str, str],
             env: dict[str, str]) -> Kill:
    cmd = udo_command()
    proc = subprocess.Popen([*cmd, str(recipe), "--store", str(store), "--json"],
                            cwd=recipe.parent, env=slow, start_new_session=True,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(delay)
    if mode == "group":  # like a cancelled CI job or a stopped container
        kill_group(proc.pid)
    else:  # like `kill -9 PID` or the OOM killer
        proc.send_signal(signal.SIGKILL)
    proc.wait()
    time.sleep(0.2)  # what outlives the build process: its worker processes, orphaned
    orphans = len(process_group(proc.pid))
    kill_group(proc.pid)
    check = verify(store, cmd, env)
    after = build(cmd, recipe, store, env=env)
    return Kill(mode, delay, orphans, check, after)


def stress_kills(args: argparse.Namespace, work: Path, results: list[Check]) -> None:
    rng = random.Random(args.seed)
    recipe = make_project(work / "kills", args.targets)
    store = work / "store-kills"
    cmd = udo_command()
    env, slow = bench_env(0, args.output_bytes), bench_env(args.sleep_ms, args.output_bytes)
    build(cmd, recipe, store, env=env)  # everything before quantize is cached from now on
    change_calibration(recipe.parent, 0)
    span = build(cmd, recipe, store, env=slow).seconds
    print(f"(b) a full build with {args.sleep_ms:g} ms per action takes {span:.2f} s; kills land "
          f"uniformly in [0.05 s, {span:.2f} s], seed {args.seed}", flush=True)
    kills = []
    for i in range(args.kills):
        change_calibration(recipe.parent, i + 1)
        mode = rng.choice(("build", "group"))
        kill = one_kill(recipe, store, mode, rng.uniform(0.05, max(span, 0.1)), slow, env)
        kills.append(kill)
        print(f"  kill {i + 1:2d} ({kill.mode:5}) at {kill.delay:5.2f} s: orphans "
              f"{kill.orphans}, verify "
              f"{'clean' if kill.check.clean else 'FAILED'} ({kill.check.blobs} blobs, "
              f"{kill.check.entries} entries, {kill.check.temporary} tmp; tool "
              f"{kill.check.tool}); next build exit {kill.after.code}, executed "
              f"{kill.after.count('executed')}, cached {kill.after.count('cached')}",
              flush=True)
        for problem in kill.check.problems[:5]:
            print(f"      {problem}")
    final = build(cmd, recipe, store, env=env)
    final_check = verify(store, cmd, env)
    bad = [k for k in kills if not k.check.clean]
    failed_after = [k for k in kills if not _complete(k.after)]
    orphaned = sum(1 for k in kills if k.orphans)
    builds = sum(1 for k in kills if k.mode == "build")
    print(f"(b) final build: exit {final.code}, executed {final.count('executed')}, cached "
          f"{final.count('cached')}, failed {final.count('failed')}, skipped "
          f"{final.count('skipped')}; kills of the build process alone that left orphan "
          f"worker processes: {orphaned} of {builds}", flush=True)
    results.append(Check(f"(b) store verifies clean after each of {len(kills)} kills", not bad,
                         f"{len(bad)} unclean" + "".join(
                             f"\n      {p}" for k in bad for p in k.check.problems[:3])))
    results.append(Check("(b) the build after each kill completes", not failed_after,
                         f"{len(failed_after)} incomplete" + "".join(
                             f"\n{k.after.stderr[-800:]}" for k in failed_after[:2])))
    results.append(Check("(b) final build: everything built or cached", _complete(final),
                         f"exit {final.code}, failed {final.count('failed')}, skipped "
                         f"{final.count('skipped')}"))
    results.append(Check("(b) store verifies clean at the end", final_check.clean,
                         _describe(final_check)))


def _complete(b: Build) -> bool:
    actions = b.summary.get("actions", [])
    return b.code == 0 and bool(actions) and all(a["status"] in ("built", "cached")
                                                 for a in actions)


def _describe(check: StoreCheck) -> str:
    text = (f"{check.blobs} blobs, {check.entries} entries, {check.temporary} tmp files; "
            f"udo-build store verify: {check.tool}")
    return text + "".join(f"\n      {p}" for p in check.problems[:10])


# -- main -----------------------------------------------------------------------------------------


@dataclass
class Check:
    name: str
    ok: bool
    detail: str


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--targets", type=int, default=100, help="prepare targets (default 100)")
    p.add_argument("--processes", type=int, default=8, help="concurrent builds (default 8)")
    p.add_argument("--kills", type=int, default=20, help="kill -9 rounds (default 20)")
    p.add_argument("--sleep-ms", type=float, default=20.0,
                   help="each stand-in action sleeps this long (default 20)")
    p.add_argument("--output-bytes", type=int, default=1024,
                   help="size of each stand-in output (default 1024)")
    p.add_argument("--seed", type=int, default=SEED, help=f"random seed (default {SEED})")
    p.add_argument("--keep", metavar="DIR", help="work in DIR (kept) instead of a temp folder")
    return p.parse_args(argv)


def run_stress(args: argparse.Namespace, work: Path) -> list[Check]:
    results: list[Check] = []
    print(f"udo-build: {' '.join(udo_command())}; {os.cpu_count()} cores; store verify: "
          f"{'udo-build store verify + ' if _has_store_command() else ''}own digest check",
          flush=True)
    if args.processes > 0:
        stress_concurrent(args, work, results)
    if args.kills > 0:
        stress_kills(args, work, results)
    return results


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.keep:
        work = Path(args.keep).resolve()
        work.mkdir(parents=True, exist_ok=False)
        results = run_stress(args, work)
    else:
        with tempfile.TemporaryDirectory(prefix="udo-bench-stress-") as tmp:
            results = run_stress(args, Path(tmp))
    print("\nchecks:")
    for r in results:
        print(f"  {'PASS' if r.ok else 'FAIL'}  {r.name}: {r.detail}")
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
