"""The gRPC backend of bench/remote.py (`--backend grpc`): the same fresh checkout against a warm
remote, with the remote a BuildGrid server (REAPI over gRPC; tests/store/buildgrid.py).

The CI build fills the instance "bench" of a BuildGrid with an in-memory CAS and action cache;
then, --repeats times, a fresh clone with an empty store builds against it (it must execute
nothing), and the plain download reads the same bytes with the simplest REAPI client: one
channel, `--parallel` calls at a time, GetActionResult for each entry, BatchReadBlobs for each
small blob and a ByteStream Read for each large one (as udo-build splits them), each blob
written to a file. The list of what to read (every entry, its envelope, every output blob and
tree file) comes from the CI build's store, untimed. The throttled runs put bench/_throttle.py
between both clients and the server (`--rate` per connection; gRPC multiplexes its calls on
one connection, for the build and the plain download alike).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import os
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

from tests.store.buildgrid import BuildGrid, bgd_binary

INSTANCE = "bench"


def run_grpc(args: argparse.Namespace, work: Path, rep: Report) -> None:
    """Warm BuildGrid, then time fresh clones and plain downloads, unthrottled and at each
    of --rate."""
    binary = bgd_binary()
    if binary is None:
        rep.check("BuildGrid is installed", False, "python3 -m venv /opt/buildgrid && "
                  "/opt/buildgrid/bin/pip install buildgrid (or set UDO_BUILD_BUILDGRID_BGD)")
        return
    server = BuildGrid(work / "bgd", binary, instances=(INSTANCE,)).start()
    try:
        public, keys = _warm_up(args, work, server, rep)
        wanted = _wanted(work, server.port, keys)
        rep.fact("remote holds (what a fresh clone reads)",
                 f"{len(keys)} entries, {len(wanted)} blobs, "
                 f"{sum(wanted.values()) / 1e6:.1f} MB")
        for rate in (None, *(r.strip() for r in args.rate.split(",") if r.strip())):
            if rate is None:
                _scenario(args, work, server.port, None, public, keys, wanted, rep)
                continue
            with Throttle("127.0.0.1", server.port, rate_bytes(rate)) as proxy:
                _scenario(args, work, proxy.port, rate, public, keys, wanted, rep)
    finally:
        server.kill()


def rate_bytes(rate: str) -> float:
    """nginx's notation: 25m is 25 MiB per second, 512k 512 KiB."""
    scale = {"k": 1 << 10, "m": 1 << 20}.get(rate[-1].lower(), 1)
    return float(rate.rstrip("kKmM")) * scale


def _warm_up(args: argparse.Namespace, work: Path, server: BuildGrid,
             rep: Report) -> tuple[str, list[str]]:
    """The CI build that fills the remote: its public key and action keys."""
    from udo_build.store.remote.trust import generate

    key = generate("bench-ci")
    (work / "ci.key").write_text(key.line + "\n")
    (work / "ci.key").chmod(0o600)
    recipe = make_project(work / "project", args.socs, args.levels, args.model)
    ci = build([*udo_command(), "--remote", f"{server.url}/{INSTANCE}", "--remote-upload",
                "--signing-key", str(work / "ci.key")], recipe, work / "store-ci",
               env=bench_env())
    if ci.code != 0:
        raise SystemExit(f"the CI build failed (exit {ci.code}):\n{ci.stderr[-3000:]}")
    rep.fact("actions", str(len(ci.summary.get("actions", []))))
    rep.fact("CI build with uploads (cold)", f"{ci.seconds * 1000:.0f} ms, executed "
             f"{ci.count('executed')}, uploaded {ci.summary['remote']['entries_uploaded']} "
             "entries")
    return key.public().line, [a["key"] for a in ci.summary["actions"]]


def _wanted(work: Path, port: int, keys: list[str]) -> dict[str, int]:
    """Every blob a fresh clone reads (digest -> size): envelopes, outputs, trees' files."""
    from udo_build.store import Store
    from udo_build.store.remote.grpccache import GrpcCache
    from udo_build.store.remote.reapi import entry_envelope

    store = Store(work / "store-ci", create=False)
    client = GrpcCache(f"grpc://127.0.0.1:{port}/{INSTANCE}")
    blobs: dict[str, int] = {}
    for key in keys:
        pointer = entry_envelope(client.get("ac", key, limit=1 << 20) or b"", 1 << 22)
        result = store.ac.get(key)
        assert not isinstance(pointer, str) and result is not None, (key, pointer)
        blobs[pointer.digest] = pointer.size
        for output in result.outputs.values():
            blobs[output.digest] = output.size
            files = store.cas.tree_entries(output.digest) if output.type == "tree" else None
            blobs.update((f["digest"], f["size"]) for f in files or [])
    client.close()
    return blobs


def _scenario(args: argparse.Namespace, work: Path, port: int, rate: str | None, public: str,
              keys: list[str], wanted: dict[str, int], rep: Report) -> None:
    name = f"grpc, throttled to {rate}B/s per connection" if rate \
        else "grpc, loopback, unthrottled"
    print(f"\n{name}:", flush=True)
    read = ["--remote", f"grpc://127.0.0.1:{port}/{INSTANCE}", "--trusted-key", public]
    tag = rate or "full"
    warm: list[Build] = []
    plain: list[float] = []
    peer: list[Build] = []
    for i in range(args.repeats):
        peer += peer_build(args, work, read, f"{tag}-{i}", bench_env(), before=True)
        clone = fresh_clone(work / "project", work / f"clone-{tag}-{i}")
        os.sync()
        warm.append(build([*udo_command(), *read], clone, work / f"store-{tag}-{i}",
                          env=bench_env()))
        peer += peer_build(args, work, read, f"{tag}-{i}", bench_env(), before=False)
        os.sync()
        plain.append(plain_download(port, keys, wanted, work / f"plain-{tag}-{i}",
                                    args.parallel))
    _report(rep, name, warm, plain, sum(wanted.values()), rate is not None, args)
    report_peer(rep, name, peer, plain, "plain reads", args)


def plain_download(port: int, keys: list[str], wanted: dict[str, int], dest: Path,
                   parallel: int) -> float:
    """The simplest REAPI reads of the entries and blobs, `parallel` at a time on one
    channel, each blob to a file: seconds."""
    import grpc

    from udo_build.store.remote import reapi as R
    from udo_build.store.remote.grpccache import BATCH_LIMIT, MAX_MESSAGE

    channel = grpc.insecure_channel(f"127.0.0.1:{port}",
                                    [("grpc.max_receive_message_length", MAX_MESSAGE)])
    rpc = "/build.bazel.remote.execution.v2."
    get_entry = channel.unary_unary(f"{rpc}ActionCache/GetActionResult",
                                    request_serializer=_bytes, response_deserializer=None)
    batch = channel.unary_unary(f"{rpc}ContentAddressableStorage/BatchReadBlobs",
                                request_serializer=_bytes,
                                response_deserializer=R.BatchReadBlobsResponse.FromString)
    stream = channel.unary_stream("/google.bytestream.ByteStream/Read",
                                  request_serializer=_bytes,
                                  response_deserializer=R.ReadResponse.FromString)
    dest.mkdir(parents=True)

    def blob(digest: str) -> None:
        size = wanted[digest]
        with open(dest / digest, "wb") as fh:
            if size <= BATCH_LIMIT:
                fh.write(batch(R.BatchReadBlobsRequest(instance_name=INSTANCE, digests=[
                    R.Digest(hash=digest, size_bytes=size)])).responses[0].data)
                return
            for chunk in stream(R.ReadRequest(
                    resource_name=f"{INSTANCE}/blobs/{digest}/{size}")):
                fh.write(chunk.data)

    def entry(key: str) -> None:
        get_entry(R.GetActionResultRequest(instance_name=INSTANCE,
                                           action_digest=R.action_digest(key)))

    started = time.perf_counter()
    with cf.ThreadPoolExecutor(parallel) as pool:
        list(pool.map(entry, keys))
        list(pool.map(blob, sorted(wanted, key=wanted.__getitem__, reverse=True)))
    seconds = time.perf_counter() - started
    channel.close()
    return seconds


def _bytes(message: Any) -> bytes:
    return bytes(message.SerializeToString())


def _report(rep: Report, name: str, warm: list[Build], plain: list[float], fetched: int,
            network: bool, args: argparse.Namespace) -> None:
    report_builds(rep, warm, fetched)
    rep.fact("plain REAPI reads of the same bytes to disk", ms(plain))
    report_target(rep, name, warm, plain, "plain reads", fetched, network, args)
