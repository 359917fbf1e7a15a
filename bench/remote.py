"""Benchmark: a fresh checkout with an empty local store against a warm remote cache, versus a
plain download of the same bytes from the same server.

    python bench/remote.py [--targets 20] [--output-bytes 4000000] [--repeats 5]

Starts a real nginx WebDAV server on a loopback port (tests/store/nginx.py), generates the
synthetic project of bench/noop.py (stand-in kinds of bench/_cheap_kinds.py whose outputs are
--output-bytes each: half text, half random, so the store keeps them zstd-compressed at about
half), builds it once with uploads (a CI build), then, --repeats times:

- copies the project to a new folder (a fresh clone) and builds it with an empty store and the
  remote (whole `udo-build` process, wall time): it must execute nothing;
- downloads every file the remote holds (the recipe's entries and blobs, exactly what the build
  fetched) with one `curl` process (one keep-alive connection, each file written to disk), and
  with urllib GETs in this process (a connection per GET, read into memory);
- builds the fresh clone without a remote, for reference (it executes every action).

Each timed step starts after `sync` (no dirty pages of the step before left to write back). The
same is measured again with each response throttled by nginx (`--rate`, default 25 MB/s per
connection; curl then opens `--parallel` connections, default 8, as many as udo-build's
download threads), as a remote across a network would be.

Target: the fresh-clone build takes at most 1.5x the curl download (medians). Prints a table
and PASS/FAIL; exits 1 if a target is missed.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
for folder in (BENCH, REPO):
    if str(folder) not in sys.path:
        sys.path.insert(0, str(folder))

from noop import Build, Report, bench_env, build, make_project, udo_command  # noqa: E402

from tests.store.nginx import Nginx, nginx_binary  # noqa: E402

RATIO = 1.5


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--targets", type=int, default=20, help="prepare targets (default 20)")
    p.add_argument("--output-bytes", type=int, default=4_000_000,
                   help="size of each stand-in output (default 4000000)")
    p.add_argument("--repeats", type=int, default=5, help="timed rounds (default 5)")
    p.add_argument("--rate", default="25m",
                   help="also measure with each response throttled to this many bytes per "
                        "second (nginx limit_rate; default 25m; '' for none)")
    p.add_argument("--parallel", type=int, default=8,
                   help="connections of the curl download (default 8: at least as many as "
                        "udo-build opens)")
    p.add_argument("--keep", metavar="DIR", help="work in DIR (kept) instead of a temp folder")
    return p.parse_args(argv)


def remote_files(server: Nginx) -> list[tuple[str, Path]]:
    """(URL path, file) of everything the remote holds."""
    return [(f"/{space}/{path.name}", path) for space in ("ac", "cas")
            for path in server.files(space)]


def curl_all(server: Nginx, files: list[tuple[str, Path]], dest: Path, parallel: int) -> float:
    dest.mkdir(parents=True)
    argv = ["curl", "--silent", "--show-error", "--fail", "--parallel", "--parallel-max",
            str(parallel)]
    for url, path in files:
        argv += ["-o", str(dest / path.name), server.url + url]
    started = time.perf_counter()
    subprocess.run(argv, check=True, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def urllib_all(server: Nginx, files: list[tuple[str, Path]]) -> float:
    started = time.perf_counter()
    for url, _ in files:
        with urllib.request.urlopen(server.url + url) as response:
            response.read()
    return time.perf_counter() - started


def fresh_clone(project: Path, dest: Path) -> Path:
    """A copy of the project's sources: without the output folder the CI build wrote."""
    shutil.copytree(project, dest, ignore=shutil.ignore_patterns("out"))
    return dest / "recipe.yaml"


def run_bench(args: argparse.Namespace, work: Path) -> Report:
    rep = Report()
    binary = nginx_binary()
    if binary is None:
        rep.check("nginx is installed", False, "apt-get install nginx")
        return rep
    server = Nginx(work / "nginx", binary).start()
    try:
        key, files = _warm_up(args, work, server, rep)
        for rate in (None, *([args.rate] if args.rate else [])):
            server.kill()
            server.limit_rate = rate
            server.start()
            _scenario(args, work, server, key, files, rep)
    finally:
        server.kill()
    return rep


def _warm_up(args: argparse.Namespace, work: Path, server: Nginx,
             rep: Report) -> tuple[str, list[tuple[str, Path]]]:
    """The CI build that fills the remote; returns the public key and the remote's files."""
    from udo_build.store.trust import generate

    key = generate("bench-ci")
    (work / "ci.key").write_text(key.line + "\n")
    (work / "ci.key").chmod(0o600)
    recipe = make_project(work / "project", args.targets)
    ci = build([*udo_command(), "--remote", server.url, "--remote-upload", "--signing-key",
                str(work / "ci.key")], recipe, work / "store-ci",
               env=bench_env(output_bytes=args.output_bytes))
    files = remote_files(server)
    rep.fact("actions", str(len(ci.summary.get("actions", []))))
    rep.fact("CI build with uploads (cold)", f"{ci.seconds * 1000:.0f} ms, executed "
             f"{ci.count('executed')}, uploaded {ci.summary['remote']['entries_uploaded']} "
             "entries")
    rep.fact("remote holds", f"{len(files)} files, "
             f"{sum(p.stat().st_size for _, p in files) / 1e6:.1f} MB")
    return key.public().line, files


def _scenario(args: argparse.Namespace, work: Path, server: Nginx, public: str,
              files: list[tuple[str, Path]], rep: Report) -> None:
    name = f"throttled to {server.limit_rate}B/s per connection" if server.limit_rate \
        else "loopback, unthrottled"
    print(f"\n{name}:", flush=True)
    cmd, env = udo_command(), bench_env(output_bytes=args.output_bytes)
    read = ["--remote", server.url, "--trusted-key", public]
    tag = server.limit_rate or "full"
    warm, curl, plain, local = [], [], [], []
    for i in range(args.repeats):
        clone = fresh_clone(work / "project", work / f"clone-{tag}-{i}")
        os.sync()  # each timed step starts with no dirty pages of the one before to write back
        warm.append(build([*cmd, *read], clone, work / f"store-{tag}-{i}", env=env))
        os.sync()
        if shutil.which("curl"):
            curl.append(curl_all(server, files, work / f"curl-{tag}-{i}", args.parallel))
        if not server.limit_rate or not curl:
            plain.append(urllib_all(server, files))
            other = fresh_clone(work / "project", work / f"local-{i}")
            os.sync()
            local.append(build(cmd, other, work / f"store-local-{i}", env=env).seconds)
    _report(rep, name, warm, curl, plain, local, sum(p.stat().st_size for _, p in files))


def _report(rep: Report, name: str, warm: list[Build], curl: list[float], plain: list[float],
            local: list[float], total: int) -> None:
    def ms(values: Sequence[float]) -> str:
        return (f"{statistics.median(values) * 1000:.0f} ms (min {min(values) * 1000:.0f}, "
                f"max {max(values) * 1000:.0f})")

    seconds = [b.seconds for b in warm]
    rep.fact("fresh clone + empty store + warm remote", ms(seconds))
    rep.fact("  in the build's own clock (no start-up)",
             ms([float(b.summary.get("seconds", 0)) for b in warm]))
    rep.fact("  executed / cached / remote hits",
             ", ".join(f"{b.count('executed')}/{b.count('cached')}/"
                       f"{b.summary.get('remote', {}).get('hits')}" for b in warm))
    downloaded = warm[0].summary["remote"]["bytes_downloaded"]
    rep.fact("  downloaded by the build", f"{downloaded / 1e6:.1f} MB")
    if curl:
        rep.fact("curl, every remote file to disk", ms(curl))
        rep.fact("build / curl", f"{statistics.median(seconds) / statistics.median(curl):.2f}x")
    else:
        rep.fact("curl", "not installed: the urllib figure is the download")
    if plain:
        rep.fact("urllib GETs into memory, in-process", ms(plain))
        rep.fact("build / urllib", f"{statistics.median(seconds) / statistics.median(plain):.2f}x")
    if local:
        rep.fact("fresh clone, empty store, no remote", ms(local))
    rep.check(f"{name}: executed 0", all(b.code == 0 and b.count("executed") == 0
                                         for b in warm),
              f"executed {[b.count('executed') for b in warm]}, exits {[b.code for b in warm]}")
    baseline, how = (curl, "curl") if curl else (plain, "urllib")
    ratio = statistics.median(seconds) / statistics.median(baseline)
    rep.check(f"{name}: <= {RATIO}x the download of its bytes", ratio <= RATIO,
              f"{ratio:.2f}x ({statistics.median(seconds) * 1000:.0f} ms vs {how} "
              f"{statistics.median(baseline) * 1000:.0f} ms for {total / 1e6:.1f} MB)")


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.keep:
        work = Path(args.keep).resolve()
        work.mkdir(parents=True, exist_ok=False)
        rep = run_bench(args, work)
    else:
        with tempfile.TemporaryDirectory(prefix="udo-bench-remote-") as tmp:
            rep = run_bench(args, Path(tmp))
    return 0 if rep.print_checks() else 1


if __name__ == "__main__":
    sys.exit(main())
