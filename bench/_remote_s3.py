"""The S3 backend of bench/remote.py (`--backend s3`): the same fresh checkout against a warm
remote, with the remote in a bucket of moto's S3 server (tests/store/moto_s3.py).

The CI build fills `s3://udo-bench/ci`; then, --repeats times, a fresh clone with an empty store
builds against it (it must execute nothing), and the plain download fetches the same objects
(the build's GETs, read from moto's request log) with the library's plain GETs, `--parallel` at
a time, each written to disk. moto refuses unsigned GETs of private objects, so curl cannot be
the plain download here; obstore's GET is the simplest signed one. The throttled runs put
bench/_throttle.py between both clients and the server (`--rate` per connection, as nginx's
limit_rate does for the HTTP backend).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import os
import re
import statistics
import time
from pathlib import Path
from typing import Any

from _throttle import Throttle
from noop import Build, Report, build, udo_command
from remote import (
    bench_env,
    fresh_clone,
    make_project,
    ms,
    peer_build,
    report_builds,
    report_peer,
    report_target,
)

from tests.store.moto_s3 import REGION, MotoS3, moto_installed

BUCKET = "udo-bench"
PREFIX = "ci"
GET = re.compile(rf'"GET /{BUCKET}/({PREFIX}/(?:ac|cas)/[0-9a-f]{{64}}) HTTP/[0-9.]+" 200 ')


def run_s3(args: argparse.Namespace, work: Path, rep: Report) -> None:
    """Warm the bucket, then time fresh clones and plain downloads, unthrottled and at each
    of --rate."""
    if not moto_installed():
        rep.check("moto[server] and obstore are installed", False,
                  "pip install 'udo-build[test]'")
        return
    server = MotoS3(work / "moto.log").start()
    try:
        server.create_bucket(BUCKET)
        public = _warm_up(args, work, server, rep)
        for rate in (None, *(r.strip() for r in args.rate.split(",") if r.strip())):
            if rate is None:
                _scenario(args, work, server, server.port, None, public, rep)
                continue
            with Throttle("127.0.0.1", server.port, _bytes(rate)) as proxy:
                _scenario(args, work, server, proxy.port, rate, public, rep)
    finally:
        server.kill()


def _bytes(rate: str) -> float:
    """nginx's notation: 25m is 25 MiB per second, 512k 512 KiB."""
    scale = {"k": 1 << 10, "m": 1 << 20}.get(rate[-1].lower(), 1)
    return float(rate.rstrip("kKmM")) * scale


def _env(port: int) -> dict[str, str]:
    env = bench_env()
    for name in ("AWS_PROFILE", "AWS_ENDPOINT_URL_S3", "AWS_SESSION_TOKEN"):
        env.pop(name, None)
    return env | {"AWS_ENDPOINT_URL": f"http://127.0.0.1:{port}", "AWS_REGION": REGION,
                  "AWS_ACCESS_KEY_ID": "bench", "AWS_SECRET_ACCESS_KEY": "bench"}


def _warm_up(args: argparse.Namespace, work: Path, server: MotoS3, rep: Report) -> str:
    from udo_build.store.remote.trust import generate

    key = generate("bench-ci")
    (work / "ci.key").write_text(key.line + "\n")
    (work / "ci.key").chmod(0o600)
    recipe = make_project(work / "project", args.socs, args.levels, args.model)
    ci = build([*udo_command(), "--remote", f"s3://{BUCKET}/{PREFIX}", "--remote-upload",
                "--signing-key", str(work / "ci.key")], recipe, work / "store-ci",
               env=_env(server.port))
    if ci.code != 0:
        raise SystemExit(f"the CI build failed (exit {ci.code}):\n{ci.stderr[-3000:]}")
    held = server.objects(BUCKET)
    rep.fact("actions", str(len(ci.summary.get("actions", []))))
    rep.fact("CI build with uploads (cold)", f"{ci.seconds * 1000:.0f} ms, executed "
             f"{ci.count('executed')}, uploaded {ci.summary['remote']['entries_uploaded']} "
             "entries")
    rep.fact("bucket holds", f"{len(held)} objects, "
             f"{sum(len(v) for v in held.values()) / 1e6:.1f} MB")
    return key.public().line


def _scenario(args: argparse.Namespace, work: Path, server: MotoS3, port: int,
              rate: str | None, public: str, rep: Report) -> None:
    name = f"s3, throttled to {rate}B/s per connection" if rate else "s3, loopback, unthrottled"
    print(f"\n{name}:", flush=True)
    read = ["--remote", f"s3://{BUCKET}/{PREFIX}", "--trusted-key", public]
    tag = rate or "full"
    warm: list[Build] = []
    plain: list[float] = []
    fetched: list[int] = []
    peer: list[Build] = []
    for i in range(args.repeats):
        peer += peer_build(args, work, read, f"{tag}-{i}", _env(port), before=True)
        clone = fresh_clone(work / "project", work / f"clone-{tag}-{i}")
        os.sync()
        mark = server.log.stat().st_size
        warm.append(build([*udo_command(), *read], clone, work / f"store-{tag}-{i}",
                          env=_env(port)))
        time.sleep(0.2)  # moto writes its request log after answering
        keys = _gets_since(server.log, mark)
        peer += peer_build(args, work, read, f"{tag}-{i}", _env(port), before=False)
        os.sync()
        seconds, size = _plain_gets(port, keys, work / f"plain-{tag}-{i}", args.parallel)
        plain.append(seconds)
        fetched.append(size)
    _report(rep, name, warm, plain, fetched, rate is not None, args)
    report_peer(rep, name, peer, plain, "plain GETs", args)


def _gets_since(log: Path, offset: int) -> list[str]:
    with open(log, "rb") as fh:
        fh.seek(offset)
        return list(dict.fromkeys(GET.findall(fh.read().decode(errors="replace"))))


def _plain_gets(port: int, keys: list[str], dest: Path, parallel: int) -> tuple[float, int]:
    """The library's plain GETs of `keys`, `parallel` at a time, each to a file: (seconds,
    bytes)."""
    import obstore
    from obstore.store import S3Store

    store = S3Store(BUCKET, endpoint=f"http://127.0.0.1:{port}", region=REGION,
                    access_key_id="bench", secret_access_key="bench",
                    client_options={"allow_http": True})
    dest.mkdir(parents=True)

    def one(key: str) -> int:
        data: Any = obstore.get(store, key).bytes()
        (dest / key.rpartition("/")[2]).write_bytes(data)
        return len(data)

    started = time.perf_counter()
    with cf.ThreadPoolExecutor(parallel) as pool:
        size = sum(pool.map(one, keys))
    return time.perf_counter() - started, size


def _report(rep: Report, name: str, warm: list[Build], plain: list[float], fetched: list[int],
            network: bool, args: argparse.Namespace) -> None:
    report_builds(rep, warm, statistics.median(fetched))
    rep.fact("obstore plain GETs of the same objects to disk", ms(plain))
    report_target(rep, name, warm, plain, "plain GETs", statistics.median(fetched), network, args)
