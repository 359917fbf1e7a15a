"""Benchmark: a fresh checkout with an empty local store against a warm remote cache, versus a
plain download of the same bytes from the same server.

    python bench/remote.py [--backend http|grpc|s3] [--model squeezenet|resnet50] [--socs 5]
                           [--levels 1,2,3] [--repeats 5]

--backend picks the remote (default http, described below); grpc is a BuildGrid server
(bench/_remote_grpc.py), s3 moto's S3 server (bench/_remote_s3.py): each module has a
`run_<backend>(args, work, report)` that warms its remote and measures the same scenarios
against the simplest plain download from that server through bench/_throttle.py.

Starts a real nginx WebDAV server on a loopback port (tests/store/nginx.py) and copies the
SqueezeNet example (examples/squeezenet with the Softplus UDO of examples/softplus) into a
project whose recipe prepares a record for each of the first --socs SoCs of sm8350, sm8450,
sm8550, sm8650, sm8750 at each of --levels (default: 15 records of about 5 MB, a 76 MB
deployable bundle, 22 actions). `--model resnet50` is the real size instead
(bench/_remote_resnet.py: ResNet-50 with random weights and the Softplus UDO, records of about
24 MB at int8; default 3 SoCs x levels 1, 3, 14 actions, a fresh clone reads about 455 MB:
the float and quantized models, the records, the bundle's parts); there the reference build
without a remote runs once, not every round. A CI build with uploads fills the remote; then,
--repeats times:

- copies the project (a fresh clone, without its output folder) and builds it with an empty
  store and the remote (whole `udo-build` process, wall time): it must execute nothing;
- downloads exactly the files the build downloaded (its GETs in nginx's access log: entries
  and blobs) with one `curl` process (`--parallel`, each file written to disk), and with urllib
  GETs into memory in this process;
- builds the fresh clone without a remote, for reference (it executes every action).

Before the timed rounds, a fresh clone is built once in each `--download` mode (all, outputs,
minimal; the rounds use the default, outputs) and the bytes the server sent it are counted in
nginx's access log (every response body: entries, envelopes, blobs; HEADs send none). Targets:
`outputs` reads at most OUTPUTS_RATIO (1.05x) the output folder's bytes, `minimal` at most
MINIMAL_BYTES (1 MB), and none executes anything.

Each timed step starts after `sync` (no dirty pages of the step before left to write back). The
same is measured again with each response throttled by nginx (`--rate`, default 25 MB/s per
connection, a comma-separated list for several; curl then opens `--parallel` connections,
default 8, as many as udo-build's download threads), as a remote across a network would be.

Targets, on a remote across a network (the throttled runs): the fresh-clone build takes at most
RATIO times the plain download of the same bytes (medians: 1.5x for the SqueezeNet project,
1.2x for ResNet-50), and at the small size (SqueezeNet) its cost over that download is at most
OVER_MS (300 ms): the fixed cost of a build (interpreter, imports, the recipe's check, the
lookups level after level, the output folder). The unthrottled loopback run is reported with
its ratio and cost but not held to the targets: there nginx serves from memory on the same
cores as the build, so its "download" is a memory copy, and the ratio measures the CPU cost of
verifying and storing every byte durably, not a transfer. `--peer DIR` builds each round's
fresh clone with another checkout's udo-build too (PYTHONPATH=DIR), alternating, and reports it
beside: a change measured against the main branch in one run. `--smoke` is the CI size (one SoC at
one level, one round, no throttled run, no time targets; what is checked is that the fresh
clone executes nothing and that every figure is measured). Prints a table, the load average
and PASS/FAIL; exits 1 if a target is missed.
"""

from __future__ import annotations

import argparse
import os
import re
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

import noop  # noqa: E402
from noop import Build, Report, build, udo_command  # noqa: E402

from tests.store.nginx import Nginx, nginx_binary  # noqa: E402

RATIO = {"squeezenet": 1.5, "resnet50": 1.2}  # fresh clone / download
OVER_MS = 300.0  # the small project's fresh clone: its cost over the download
SOCS = ("sm8350", "sm8450", "sm8550", "sm8650", "sm8750")
BACKENDS = ("http", "grpc", "s3")
MODELS = ("squeezenet", "resnet50")
MATRIX = {"squeezenet": (5, "1,2,3"), "resnet50": (3, "1,3")}  # default SoCs, levels
GET = re.compile(r'"GET (/(?:ac|cas)/[0-9a-f]{64}) HTTP/[0-9.]+" 200 ')
SENT = re.compile(r'"[A-Z]+ /(?:ac|cas)/[0-9a-f]{64} HTTP/[0-9.]+" \d{3} (\d+) ')
OUTPUTS_RATIO = 1.05  # --download outputs: bytes read / the output folder's bytes
MINIMAL_BYTES = 1_000_000  # --download minimal: bytes read (the entries and their envelopes)


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--backend", choices=BACKENDS, default="http",
                   help="the remote: nginx's WebDAV (http, default), BuildGrid over REAPI "
                        "gRPC (grpc), moto's S3 server (s3)")
    p.add_argument("--model", choices=MODELS, default="squeezenet",
                   help="the project: the SqueezeNet example (default: records of ~5 MB) or "
                        "ResNet-50 with the Softplus UDO, the real size (records of ~24 MB)")
    p.add_argument("--socs", type=int, choices=range(1, len(SOCS) + 1),
                   help=f"SoCs of the matrix, the first N of {', '.join(SOCS)} (default 5; "
                        "3 for resnet50)")
    p.add_argument("--levels",
                   help="optimization levels of the matrix (default 1,2,3; 1,3 for resnet50)")
    p.add_argument("--repeats", type=int, default=5, help="timed rounds (default 5)")
    p.add_argument("--rate", default="25m",
                   help="also measure with each response throttled to this many bytes per "
                        "second (nginx limit_rate; default 25m; a comma-separated list for "
                        "several; '' for none)")
    p.add_argument("--parallel", type=int, default=8,
                   help="connections of the curl download (default 8: at least as many as "
                        "udo-build opens)")
    p.add_argument("--keep", metavar="DIR", help="work in DIR (kept) instead of a temp folder")
    p.add_argument("--python", metavar="PATH",
                   help="measure the udo-build installed beside this interpreter (a venv with "
                        "the wheel: what users get); PYTHONPATH is then not passed on")
    p.add_argument("--peer", metavar="DIR",
                   help="also build every fresh clone with the udo-build of the checkout DIR "
                        "(PYTHONPATH=DIR; the main branch, to measure a change), in the same "
                        "rounds, each round in the other order, and report it beside")
    p.add_argument("--smoke", action="store_true",
                   help="the CI size: one SoC at level 2, one round, no throttled run, no time "
                        "targets")
    args = p.parse_args(argv)
    noop.use_python(args.python)
    args.timing = not args.smoke
    if args.smoke:
        args.socs, args.levels, args.repeats, args.rate = 1, "2", 1, ""
    socs, levels = MATRIX[args.model]
    args.socs = args.socs or socs
    args.levels = args.levels or levels
    return args


def make_project(folder: Path, socs: int, levels: str, model: str = "squeezenet") -> Path:
    """The project of `model` (the SqueezeNet example, or ResNet-50 from
    bench/_remote_resnet.py) with a prepare matrix of the first `socs` SoCs x `levels`;
    returns the recipe."""
    if model == "resnet50":
        from _remote_resnet import make_resnet50

        return make_resnet50(folder, SOCS[:socs], levels)
    for name in ("softplus", "squeezenet"):
        shutil.copytree(REPO / "examples" / name, folder / "examples" / name,
                        ignore=shutil.ignore_patterns("__pycache__"))
    (folder / ".udo-build-root").write_text("")
    text = (REPO / "recipes" / "squeezenet.yaml").read_text()
    matrix = re.compile(r"    soc: \[.*\]\n    optimization_level: \[.*\]\n")
    assert matrix.search(text), "recipes/squeezenet.yaml: the prepare matrix moved"
    text = matrix.sub(f"    soc: [{', '.join(SOCS[:socs])}]\n"
                      f"    optimization_level: [{levels}]\n", text)
    (folder / "recipes").mkdir()
    recipe = folder / "recipes" / "squeezenet.yaml"
    recipe.write_text(text)
    return recipe


class Downloads:
    """The files a build downloaded, read from the server's access log."""

    def __init__(self, server: Nginx) -> None:
        self.log = server.prefix / "access.log"
        self.offset = 0

    def mark(self) -> None:
        self.offset = self.log.stat().st_size if self.log.exists() else 0

    def since_mark(self) -> list[str]:
        with open(self.log, "rb") as fh:
            fh.seek(self.offset)
            text = fh.read().decode(errors="replace")
        return list(dict.fromkeys(GET.findall(text)))

    def bytes_since_mark(self) -> int:
        """The body bytes the server sent since the mark (every request: GET, HEAD, ...)."""
        with open(self.log, "rb") as fh:
            fh.seek(self.offset)
            text = fh.read().decode(errors="replace")
        return sum(int(n) for n in SENT.findall(text))


def curl_all(server: Nginx, urls: list[str], dest: Path, parallel: int) -> float:
    dest.mkdir(parents=True)
    argv = ["curl", "--silent", "--show-error", "--fail", "--parallel", "--parallel-max",
            str(parallel)]
    for url in urls:
        argv += ["-o", str(dest / url.rsplit("/", 1)[1]), server.url + url]
    started = time.perf_counter()
    subprocess.run(argv, check=True, stderr=subprocess.DEVNULL)
    return time.perf_counter() - started


def urllib_all(server: Nginx, urls: list[str]) -> float:
    started = time.perf_counter()
    for url in urls:
        with urllib.request.urlopen(server.url + url) as response:
            response.read()
    return time.perf_counter() - started


def fresh_clone(project: Path, dest: Path) -> Path:
    """A copy of the project's sources: without the output folder the CI build wrote."""
    shutil.copytree(project, dest, ignore=shutil.ignore_patterns("out"))
    (recipe,) = (dest / "recipes").glob("*.yaml")
    return recipe


def bench_env() -> dict[str, str]:
    env = dict(os.environ)
    env.pop("UDO_BUILD_STORE", None)
    env.pop("UDO_BUILD_REMOTE", None)
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # measure as installed: with bytecode caches
    if noop.PYTHON != sys.executable:  # another environment's udo-build: its own install
        env.pop("PYTHONPATH", None)
    return env


def run_bench(args: argparse.Namespace, work: Path) -> Report:
    rep = Report()
    rep.fact("load average (1, 5, 15 min)", ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    if args.backend != "http":
        run_backend(args, work, rep)
        return rep
    binary = nginx_binary()
    if binary is None:
        rep.check("nginx is installed", False, "apt-get install nginx")
        return rep
    server = Nginx(work / "nginx", binary).start()
    try:
        key, out_bytes = _warm_up(args, work, server, rep)
        _download_modes(work, server, key, out_bytes, rep)
        for rate in (None, *(r.strip() for r in args.rate.split(",") if r.strip())):
            server.kill()
            server.limit_rate = rate
            server.start()
            _scenario(args, work, server, key, rep)
    finally:
        server.kill()
    return rep


def run_backend(args: argparse.Namespace, work: Path, rep: Report) -> None:
    """The scenarios against another backend: `run_<backend>(args, work, rep)` of
    bench/_remote_<backend>.py (imported only when asked for)."""
    import importlib

    try:
        module = importlib.import_module(f"_remote_{args.backend}")
    except ModuleNotFoundError as exc:
        if exc.name != f"_remote_{args.backend}":
            raise
        rep.check(f"the {args.backend} backend of the bench", False,
                  f"bench/_remote_{args.backend}.py is not there yet")
        return
    getattr(module, f"run_{args.backend}")(args, work, rep)


def _warm_up(args: argparse.Namespace, work: Path, server: Nginx, rep: Report
             ) -> tuple[str, int]:
    """The CI build that fills the remote; returns its public key and the bytes of its output
    folder."""
    from udo_build.store.remote.trust import generate

    key = generate("bench-ci")
    (work / "ci.key").write_text(key.line + "\n")
    (work / "ci.key").chmod(0o600)
    recipe = make_project(work / "project", args.socs, args.levels, args.model)
    ci = build([*udo_command(), "--remote", server.url, "--remote-upload", "--signing-key",
                str(work / "ci.key")], recipe, work / "store-ci", env=bench_env())
    if ci.code != 0:
        raise SystemExit(f"the CI build failed (exit {ci.code}):\n{ci.stderr[-3000:]}")
    held = [p for space in ("ac", "cas") for p in server.files(space)]
    out = recipe.parent / ci.summary["out"]
    rep.fact("actions", str(len(ci.summary.get("actions", []))))
    rep.fact("CI build with uploads (cold)", f"{ci.seconds * 1000:.0f} ms, executed "
             f"{ci.count('executed')}, uploaded {ci.summary['remote']['entries_uploaded']} "
             "entries")
    rep.fact("remote holds", f"{len(held)} files, "
             f"{sum(p.stat().st_size for p in held) / 1e6:.1f} MB")
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    rep.fact("output folder", f"{size / 1e6:.1f} MB")
    return key.public().line, size


def _download_modes(work: Path, server: Nginx, public: str, out_bytes: int,
                    rep: Report) -> None:
    """A fresh clone built once in each `--download` mode: the bytes the server sent it (its
    access log: entries, envelopes, blobs, HEADs), against the output folder's bytes."""
    print("\n--download modes (loopback):", flush=True)
    cmd, env = udo_command(), bench_env()
    log = Downloads(server)
    read: dict[str, int] = {}
    for mode in ("all", "outputs", "minimal"):
        clone = fresh_clone(work / "project", work / f"clone-download-{mode}")
        log.mark()
        got = build([*cmd, "--remote", server.url, "--trusted-key", public, "--download", mode],
                    clone, work / f"store-download-{mode}", env=env)
        read[mode] = log.bytes_since_mark()
        rep.check(f"--download {mode}: executed 0", got.code == 0 and got.count("executed") == 0,
                  f"exit {got.code}, executed {got.count('executed')}")
        rep.fact(f"--download {mode}: read from the server",
                 f"{read[mode] / 1e6:.2f} MB ({read[mode] / out_bytes:.3f}x the output "
                 f"folder's {out_bytes / 1e6:.1f} MB), {got.seconds * 1000:.0f} ms")
    rep.check(f"--download outputs: <= {OUTPUTS_RATIO}x the output folder's bytes",
              read["outputs"] <= OUTPUTS_RATIO * out_bytes,
              f"{read['outputs'] / out_bytes:.3f}x")
    rep.check(f"--download minimal: <= {MINIMAL_BYTES / 1e6:g} MB read",
              read["minimal"] <= MINIMAL_BYTES, f"{read['minimal'] / 1e6:.3f} MB")


def _scenario(args: argparse.Namespace, work: Path, server: Nginx, public: str,
              rep: Report) -> None:
    name = f"throttled to {server.limit_rate}B/s per connection" if server.limit_rate \
        else "loopback, unthrottled"
    print(f"\n{name}:", flush=True)
    cmd, env = udo_command(), bench_env()
    read = ["--remote", server.url, "--trusted-key", public]
    tag = server.limit_rate or "full"
    log = Downloads(server)
    warm, curl, plain, local, fetched, peer = [], [], [], [], [], []
    for i in range(args.repeats):
        peer += peer_build(args, work, read, f"{tag}-{i}", env, before=True)
        clone = fresh_clone(work / "project", work / f"clone-{tag}-{i}")
        os.sync()  # each timed step starts with no dirty pages of the one before to write back
        log.mark()
        warm.append(build([*cmd, *read], clone, work / f"store-{tag}-{i}", env=env))
        urls = log.since_mark()
        peer += peer_build(args, work, read, f"{tag}-{i}", env, before=False)
        fetched.append(sum((server.root / u.lstrip("/")).stat().st_size for u in urls))
        os.sync()
        if shutil.which("curl"):
            curl.append(curl_all(server, urls, work / f"curl-{tag}-{i}", args.parallel))
        if not server.limit_rate or not curl:
            plain.append(urllib_all(server, urls))
        if not server.limit_rate and (i == 0 or args.model == "squeezenet"):  # once at size
            other = fresh_clone(work / "project", work / f"local-{i}")
            os.sync()
            local.append(build(cmd, other, work / f"store-local-{i}", env=env).seconds)
    _report(rep, name, warm, curl, plain, local, fetched, bool(server.limit_rate), args)
    report_peer(rep, name, peer, curl or plain, "curl" if curl else "urllib", args)


def peer_build(args: argparse.Namespace, work: Path, read: list[str], tag: str,
               env: dict[str, str], *, before: bool) -> list[Build]:
    """With --peer: the round's fresh clone built by the peer checkout's udo-build, before this
    one's in odd rounds and after it in even ones (`tag` ends with the round); else none."""
    if args.peer is None or before != (int(tag.rpartition("-")[2]) % 2 == 1):
        return []
    clone = fresh_clone(work / "project", work / f"peer-clone-{tag}")
    os.sync()
    return [build([*udo_command(), *read], clone, work / f"peer-store-{tag}",
                  env={**env, "PYTHONPATH": str(Path(args.peer).resolve())})]


def report_peer(rep: Report, name: str, peer: list[Build], baseline: list[float], how: str,
                args: argparse.Namespace) -> None:
    """The peer checkout's fresh clones (--peer), against the same download: a figure beside
    this checkout's, held to no target."""
    if not peer:
        return
    rep.check(f"{name}: the peer's fresh clone executed 0",
              all(b.code == 0 and b.count("executed") == 0 for b in peer),
              f"executed {[b.count('executed') for b in peer]}, exits {[b.code for b in peer]}")
    seconds, base = statistics.median([b.seconds for b in peer]), statistics.median(baseline)
    rep.fact(f"peer {args.peer}: fresh clone", ms([b.seconds for b in peer]))
    rep.fact("  peer: ratio, cost over the download",
             f"{seconds / base:.2f}x, {(seconds - base) * 1000:+.0f} ms (vs {how} "
             f"{base * 1000:.0f} ms)")


def ms(values: Sequence[float]) -> str:
    return (f"{statistics.median(values) * 1000:.0f} ms (min {min(values) * 1000:.0f}, "
            f"max {max(values) * 1000:.0f})")


def report_builds(rep: Report, warm: list[Build], fetched: float) -> None:
    """What the fresh clones did (every backend): times, what ran, the bytes they read."""
    rep.fact("fresh clone + empty store + warm remote", ms([b.seconds for b in warm]))
    rep.fact("  in the build's own clock (no start-up)",
             ms([float(b.summary.get("seconds", 0)) for b in warm]))
    rep.fact("  executed / cached / remote hits",
             ", ".join(f"{b.count('executed')}/{b.count('cached')}/"
                       f"{(b.summary.get('remote') or {}).get('hits')}" for b in warm))
    rep.fact("  downloaded by the build (its GETs)", f"{fetched / 1e6:.1f} MB")


def report_target(rep: Report, name: str, warm: list[Build], baseline: list[float], how: str,
                  fetched: float, network: bool, args: argparse.Namespace) -> None:
    """The targets (every backend): nothing executed; on a network, at most RATIO times the
    plain download `how` of the same bytes, and for the small project at most OVER_MS more."""
    rep.check(f"{name}: executed 0", all(b.code == 0 and b.count("executed") == 0
                                         for b in warm),
              f"executed {[b.count('executed') for b in warm]}, exits {[b.code for b in warm]}")
    seconds, base = statistics.median([b.seconds for b in warm]), statistics.median(baseline)
    ratio, over = seconds / base, (seconds - base) * 1000
    detail = (f"{ratio:.2f}x, {over:+.0f} ms ({seconds * 1000:.0f} ms vs {how} "
              f"{base * 1000:.0f} ms for {fetched / 1e6:.1f} MB; load {os.getloadavg()[0]:.2f})")
    limit = RATIO[args.model]
    if network and args.timing:
        rep.check(f"{name}: <= {limit}x the download of its bytes", ratio <= limit, detail)
        if args.model == "squeezenet":
            rep.check(f"{name}: <= {OVER_MS:.0f} ms over the download", over <= OVER_MS,
                      detail)
    else:
        why = "not a network" if not network else "--smoke"
        rep.fact(f"ratio, cost over the download ({why}: not held to the targets)", detail)


def _report(rep: Report, name: str, warm: list[Build], curl: list[float], plain: list[float],
            local: list[float], fetched: list[int], network: bool,
            args: argparse.Namespace) -> None:
    report_builds(rep, warm, statistics.median(fetched))
    seconds = statistics.median([b.seconds for b in warm])
    if curl:
        rep.fact("curl, the same files to disk", ms(curl))
        rep.fact("build / curl", f"{seconds / statistics.median(curl):.2f}x")
    else:
        rep.fact("curl", "not installed: the urllib figure is the download")
    if plain:
        rep.fact("urllib GETs into memory, in-process", ms(plain))
        rep.fact("build / urllib", f"{seconds / statistics.median(plain):.2f}x")
    if local:
        rep.fact("fresh clone, empty store, no remote", ms(local))
    baseline, how = (curl, "curl") if curl else (plain, "urllib")
    report_target(rep, name, warm, baseline, how, statistics.median(fetched), network, args)


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
