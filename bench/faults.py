"""Fault suite: does a build stay correct when the world around it misbehaves?

    python bench/faults.py [--only repro,kill,damage,concurrent,fs,remote,crafted]
                           [--quick | --smoke] [--seed N] [--keep DIR]

Works on copies of the repository's ready recipes (recipes/ and examples/) in a temporary
project, through whole `udo-build` processes (`python -m udo_build`, this checkout first on
PYTHONPATH). A reference build of recipes/softplus.yaml gives the expected output folder (the
sha256 of every file); "correct" below means: exit 0 and a folder holding exactly those bytes.

- repro: both ready recipes built from 3 project paths x 3 PYTHONHASHSEED values (softplus
  only and 2 x 2 with --quick): every output file byte-identical.
- kill: 30 builds killed with SIGKILL at random moments of a cold build (some while the output
  folder is written), each followed by a plain build: it must be correct.
- damage: 20 random damages (a flipped byte, a truncation, a deletion) to blobs, action entries
  and output files, each followed by a plain build: correct, with no manual command.
- concurrent: 8 builders at once on one store, with separate output folders, then with one
  shared output folder, while `store gc` runs: every builder exits 0, every folder correct.
- fs: a store on a full file system and on a read-only one (small tmpfs mounts; root only): a
  cold build on the full one fails as the user's error (exit 1 or 2, not 3) with a JSON object;
  a fully cached build on the read-only one succeeds.
- remote: a remote that hangs, one that trickles a byte a second, one that refuses connections
  and one that dies in the middle of a download, each trusted (--trusted-key: without a trusted
  key udo-build would never ask it): the build asks it (the server saw a connection, or the
  build says it was unreachable), succeeds, and costs at most 15 s more than the build without
  a remote.
- crafted: crafted files of every format udo-build reads (recipes, op configs, ONNX models,
  input lists, bundles, records, encodings): each refused with exit 2, never exit 3, with a peak
  memory under 300 MB.

`--smoke` runs one case of each section (CI runs it, .ci/run: at most 3 minutes on 2 cores):
repro one more path and seed against the reference, one kill, one damage to a copy of the
reference store, two concurrent builders, the full file system, the remote that dies, one
crafted file.

Prints one table (section, cases, result, figures) and PASS/FAIL per target; exits 1 if one is
missed.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import resource
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # this checkout's udo_build
from udo_build.store.remote.trust import generate  # noqa: E402

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent
SECTIONS = ("repro", "kill", "damage", "concurrent", "fs", "remote", "crafted")
MANIFEST = ".udo-build-manifest.json"
MB = 1 << 20


@dataclass
class Row:
    section: str
    cases: int = 0
    passed: int = 0
    figures: list[str] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)

    def check(self, ok: bool, what: str) -> bool:
        self.cases += 1
        if ok:
            self.passed += 1
        else:
            self.failures.append(what)
        return ok


@dataclass(frozen=True)
class Result:
    code: int
    seconds: float
    stdout: str
    stderr: str
    peak_mb: float

    def json(self) -> dict[str, Any] | None:
        try:
            value = json.loads(self.stdout)
        except ValueError:
            return None
        return value if isinstance(value, dict) else None


# -- running udo-build -------------------------------------------------------------------------


def environment(seed: str = "0", **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("UDO_BUILD_")}
    env.update(PYTHONPATH=str(REPO), PYTHONHASHSEED=seed, NO_COLOR="1", **extra)
    return env


def udo(args: Sequence[str], cwd: Path, env: dict[str, str] | None = None,
        timeout: float = 600) -> Result:
    """One udo-build process; its peak RSS from wait4."""
    started = time.perf_counter()
    proc = subprocess.Popen([sys.executable, "-m", "udo_build", *args], cwd=cwd,
                            env=env or environment(), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        out, err = proc.communicate()
        err += f"\n(faults.py: killed after {timeout} s)"
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return Result(proc.returncode, time.perf_counter() - started, out, err,
                  usage.ru_maxrss / 1024)


def peak_rss_mb(args: Sequence[str], cwd: Path, timeout: float = 120) -> tuple[int, float, str]:
    """(exit code, peak RSS in MB, stderr) of one udo-build process, measured alone."""
    code = (
        "import resource, subprocess, sys\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024\n"
        "sys.stdout.write(f'{p.returncode} {rss}\\n'); sys.stderr.write(p.stderr[-2000:])\n")
    proc = subprocess.run([sys.executable, "-c", code, sys.executable, "-m", "udo_build",
                           *args], cwd=cwd, env=environment(), capture_output=True, text=True,
                          timeout=timeout)
    first = (proc.stdout.split() or ["-1", "0"])
    return int(first[0]), float(first[1]), proc.stderr


def project(root: Path) -> Path:
    """A copy of the ready recipes and their example projects; returns the project folder."""
    root.mkdir(parents=True, exist_ok=True)
    for name in ("recipes", "examples"):
        shutil.copytree(REPO / name, root / name, dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__"))
    (root / ".udo-build-root").write_text("")
    return root


def folder_digests(folder: Path) -> dict[str, str]:
    out = {}
    for path in sorted(folder.rglob("*")):
        if path.is_file() and not path.name.startswith(".udo-build-lock"):
            out[path.relative_to(folder).as_posix()] = hashlib.sha256(
                path.read_bytes()).hexdigest()
    return out


def build(proj: Path, recipe: str, store: Path, out: Path, *extra: str,
          env: dict[str, str] | None = None, timeout: float = 600) -> Result:
    return udo([str(proj / "recipes" / recipe), "--store", str(store), "--out", str(out),
                "--json", *extra], proj, env, timeout)


# -- sections ----------------------------------------------------------------------------------


class Suite:
    def __init__(self, work: Path, rng: random.Random, quick: bool, smoke: bool = False) -> None:
        self.work = work
        self.rng = rng
        self.quick = quick or smoke
        self.smoke = smoke
        self.proj = project(work / "project")
        self.reference: dict[str, str] = {}
        self.cold_seconds = 0.0

    def prepare_reference(self) -> None:
        result = build(self.proj, "softplus.yaml", self.work / "ref-store", self.work / "ref-out")
        if result.code != 0:
            raise SystemExit(f"the reference build failed (exit {result.code}):\n"
                             f"{result.stderr[-3000:]}")
        self.reference = folder_digests(self.work / "ref-out")
        self.cold_seconds = result.seconds

    def correct(self, out: Path, result: Result) -> bool:
        return result.code == 0 and folder_digests(out) == self.reference

    # repro ----------------------------------------------------------------------------------

    def repro(self) -> Row:
        row = Row("repro")
        recipes = ["softplus.yaml"] if self.quick else ["softplus.yaml", "squeezenet.yaml"]
        paths = 2 if self.quick else 3
        seeds = ["0", "1", "4242"][: 2 if self.quick else 3]
        for recipe in recipes:
            seen: dict[str, str] | None = self.reference if self.smoke else None
            files, before = 0, row.cases
            for p in range(1 if self.smoke else 0, paths):
                proj = project(self.work / f"repro-{p}" / ("x" * (p * 7 + 1)) / "proj")
                for seed in seeds[-1:] if self.smoke else seeds:
                    tag = f"{recipe}-{p}-{seed}"
                    out = self.work / f"repro-out-{tag}"
                    result = build(proj, recipe, self.work / f"repro-store-{tag}", out,
                                   env=environment(seed))
                    digests = folder_digests(out)
                    files = len(digests)
                    if seen is None:
                        seen = digests
                    differing = sorted(k for k in set(seen) | set(digests)
                                       if seen.get(k) != digests.get(k))
                    row.check(result.code == 0 and not differing,
                              f"{tag}: exit {result.code}, differing {differing[:4]}")
            row.figures.append(f"{recipe}: {files} files x {row.cases - before} builds")
        return row

    # kill -----------------------------------------------------------------------------------

    def kill(self) -> Row:
        row = Row("kill")
        count = 1 if self.smoke else 8 if self.quick else 30
        store, out = self.work / "kill-store", self.work / "kill-out"
        for i in range(count):
            delay = self.rng.uniform(0.05, self.cold_seconds)
            if i % 3 == 0 and store.exists():  # later kills hit cached builds writing outputs
                shutil.rmtree(out, ignore_errors=True)
            elif i % 3 == 1:
                shutil.rmtree(store, ignore_errors=True)
            proc = subprocess.Popen(
                [sys.executable, "-m", "udo_build", str(self.proj / "recipes/softplus.yaml"),
                 "--store", str(store), "--out", str(out), "--json"], cwd=self.proj,
                env=environment(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                start_new_session=True)
            time.sleep(delay)
            try:
                os.killpg(proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            proc.wait()
            after = build(self.proj, "softplus.yaml", store, out)
            row.check(self.correct(out, after),
                      f"kill at {delay:.2f} s: then exit {after.code}; {after.stderr[-300:]}")
        row.figures.append(f"kills at random moments of a {self.cold_seconds:.1f} s cold build")
        return row

    # damage ---------------------------------------------------------------------------------

    def damage(self) -> Row:
        row = Row("damage")
        count = 1 if self.smoke else 8 if self.quick else 20
        store, out = self.work / "damage-store", self.work / "damage-out"
        if self.smoke:  # a copy of the reference build: no first build of its own
            shutil.copytree(self.work / "ref-store", store, symlinks=True)
            shutil.copytree(self.work / "ref-out", out, symlinks=True)
        else:
            first = build(self.proj, "softplus.yaml", store, out)
            if not row.check(self.correct(out, first), f"first build: exit {first.code}"):
                return row
        kinds: dict[str, int] = {}
        for _ in range(count):
            what = self._damage_one(store, out)
            kinds[what.split(":")[0]] = kinds.get(what.split(":")[0], 0) + 1
            after = build(self.proj, "softplus.yaml", store, out)
            row.check(self.correct(out, after),
                      f"{what}: then exit {after.code}; {after.stderr[-300:]}")
        row.figures.append(", ".join(f"{k} {v}" for k, v in sorted(kinds.items())))
        return row

    def _damage_one(self, store: Path, out: Path) -> str:
        places = {
            "blob": [p for p in (store / "cas").rglob("*") if p.is_file()],
            "entry": [p for p in (store / "ac").rglob("*.json") if p.is_file()],
            "output": [p for p in out.rglob("*") if p.is_file() and p.name != MANIFEST],
        }
        kind = self.rng.choice(sorted(k for k, v in places.items() if v))
        path = self.rng.choice(sorted(places[kind]))
        how = self.rng.choice(("flip", "truncate", "delete"))
        os.chmod(path, 0o644)
        if how == "delete":
            path.unlink()
        elif how == "truncate":
            data = path.read_bytes()
            path.write_bytes(data[: len(data) // 2])
        else:
            data = bytearray(path.read_bytes())
            if data:
                data[self.rng.randrange(len(data))] ^= 0x5A
            path.write_bytes(bytes(data))
        return f"{kind}: {how} {path.name}"

    # concurrent -----------------------------------------------------------------------------

    def concurrent(self) -> Row:
        row = Row("concurrent")
        builders = 2 if self.smoke else 4 if self.quick else 8
        for shared in (False,) if self.smoke else (False, True):
            store = self.work / f"conc-store-{shared}"
            outs = [self.work / f"conc-out-{shared}-{0 if shared else i}" for i in range(builders)]
            procs = [subprocess.Popen(
                [sys.executable, "-m", "udo_build", str(self.proj / "recipes/softplus.yaml"),
                 "--store", str(store), "--out", str(o), "--json"], cwd=self.proj,
                env=environment(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for o in outs]
            time.sleep(0.5)
            gc = udo(["store", "gc", "--store", str(store), "--json"], self.proj)
            codes = [p.wait() for p in procs]
            label = "one shared output folder" if shared else "separate output folders"
            row.check(all(c == 0 for c in codes), f"{label}: exit codes {codes}")
            row.check(gc.code == 0, f"{label}: concurrent gc exit {gc.code}: {gc.stderr[-300:]}")
            for o in sorted(set(outs)):
                row.check(folder_digests(o) == self.reference, f"{label}: {o.name} differs")
            row.figures.append(f"{builders} builders, {label}")
        return row

    # fs ---------------------------------------------------------------------------------------

    def fs(self) -> Row:
        row = Row("fs")
        if os.geteuid() != 0:
            row.check(False, "needs root to mount a small tmpfs (run as root)")
            return row
        full = self.work / "fs-full"
        full.mkdir()
        if subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(full)],
                          capture_output=True).returncode != 0:
            row.check(False, "mount -t tmpfs failed")
            return row
        try:
            result = build(self.proj, "softplus.yaml", full / "store", self.work / "fs-out-1")
            row.check(result.code in (1, 2) and result.json() is not None,
                      f"full store: exit {result.code}, json {result.json() is not None}; "
                      f"{result.stderr.strip().splitlines()[-1:] if result.stderr else ''}")
            row.figures.append(f"256 KB tmpfs store: exit {result.code}")
        finally:
            subprocess.run(["umount", str(full)], capture_output=True)
        if self.smoke:
            return row
        ro = self.work / "fs-ro"
        shutil.copytree(self.work / "ref-store", ro / "store", symlinks=True)
        mounted = subprocess.run(["mount", "--bind", "-o", "ro", str(ro), str(ro)],
                                 capture_output=True).returncode == 0
        if mounted:
            mounted = subprocess.run(["mount", "-o", "remount,bind,ro", str(ro)],
                                     capture_output=True).returncode == 0
        if not mounted:
            row.check(False, "a read-only bind mount failed")
            return row
        try:
            out = self.work / "fs-out-2"
            result = build(self.proj, "softplus.yaml", ro / "store", out)
            row.check(self.correct(out, result),
                      f"read-only store, all cached: exit {result.code}; "
                      f"{result.stderr.strip().splitlines()[-1:] if result.stderr else ''}")
            row.figures.append(f"read-only store: exit {result.code}")
        finally:
            subprocess.run(["umount", str(ro)], capture_output=True)
        return row

    # remote -----------------------------------------------------------------------------------

    def remote(self) -> Row:
        row = Row("remote")
        if self.smoke:  # the reference build is the build without a remote
            base_seconds = self.cold_seconds
        else:
            baseline = build(self.proj, "softplus.yaml", self.work / "remote-base-store",
                             self.work / "remote-base-out", "--no-remote")
            row.check(self.correct(self.work / "remote-base-out", baseline),
                      "build without remote")
            base_seconds = baseline.seconds
        trusted = generate("faults").public().line  # so that udo-build asks the remote
        for behaviour in ("die",) if self.smoke else ("hang", "trickle", "refuse", "die"):
            server = BadServer(behaviour)
            try:
                out = self.work / f"remote-out-{behaviour}"
                result = build(self.proj, "softplus.yaml", self.work / f"remote-store-{behaviour}",
                               out, "--remote", server.url, "--trusted-key", trusted,
                               timeout=300)
            finally:
                server.close()
            extra = result.seconds - base_seconds
            asked = server.contacted(result)
            row.check(self.correct(out, result) and extra <= 15 and asked,
                      f"{behaviour}: exit {result.code}, {extra:+.1f} s over no remote, "
                      f"{'asked' if asked else 'never asked'}")
            row.figures.append(f"{behaviour} {extra:+.1f} s ({server.connections} connections)")
        return row

    # crafted ----------------------------------------------------------------------------------

    def crafted(self) -> Row:
        row = Row("crafted")
        folder = self.work / "crafted"
        folder.mkdir(exist_ok=True)
        worst = 0.0
        cases = crafted_cases(folder, self.work / "ref-out")
        for name, args in cases[1:2] if self.smoke else cases:
            code, rss, err = peak_rss_mb(args, folder)
            worst = max(worst, rss)
            last = err.strip().splitlines()[-1:] if err.strip() else []
            row.check(code == 2 and rss < 300,
                      f"{name}: exit {code}, {rss:.0f} MB; {last}")
        row.figures.append(f"peak RSS at most {worst:.0f} MB")
        return row


# -- a remote that misbehaves ------------------------------------------------------------------


class BadServer:
    """An HTTP server on loopback that hangs, trickles, refuses or dies mid-download."""

    def __init__(self, behaviour: str) -> None:
        self.behaviour = behaviour
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/cache"
        self.stop = threading.Event()
        self.connections = 0
        if behaviour == "refuse":
            self.sock.close()  # nothing listens: connections are refused
            return
        self.sock.listen(64)
        self.sock.settimeout(0.2)
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        try:
            conn.recv(65536)
            if self.behaviour == "hang":
                self.stop.wait(120)
            elif self.behaviour == "trickle":
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n")
                while not self.stop.wait(1.0):
                    conn.sendall(b"x")
            elif self.behaviour == "die":
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n" + b"y" * 5000)
        except OSError:
            pass
        finally:
            conn.close()

    def contacted(self, result: Result) -> bool:
        """Whether the build asked this server: it accepted a connection, or (nothing
        listens) the build found it unreachable."""
        if self.behaviour != "refuse":
            return self.connections > 0
        remote = (result.json() or {}).get("remote") or {}
        return any("unreachable" in w for w in remote.get("warnings", []))

    def close(self) -> None:
        self.stop.set()
        try:
            self.sock.close()
        except OSError:
            pass


# -- crafted files -----------------------------------------------------------------------------


def crafted_cases(folder: Path, ref_out: Path) -> list[tuple[str, list[str]]]:
    """(name, udo-build arguments) for crafted files of every format, written into `folder`."""
    (folder / ".udo-build-root").write_text("")
    cases: list[tuple[str, list[str]]] = []

    def write(name: str, data: bytes | str) -> str:
        path = folder / name
        path.write_bytes(data.encode() if isinstance(data, str) else data)
        return str(path)

    recipe = "recipe: 1\nname: crafted\n"
    cases += [
        ("recipe: merge cycle", ["validate", write("merge.yaml",
                                                   recipe + "package: &p {<<: *p}\n")]),
        ("recipe: alias bomb", ["validate", write("bomb.yaml", recipe + _alias_bomb())]),
        ("recipe: not a mapping", ["validate", write("list.yaml", "- 1\n- 2\n")]),
        ("recipe: binary", ["validate", write("binary.yaml", os.urandom(4096))]),
        ("recipe: absurd dims", ["validate", write("dims.yaml", recipe + _absurd_dims(folder))]),
        ("op config: entity", ["opdef", "show", write("entity.xml", _entity_xml())]),
        ("op config: truncated", ["opdef", "show", write("cut.xml", _entity_xml()[:40])]),
        ("op config: json types", ["opdef", "show",
                                   write("types.json", '{"UdoPackage_0": {"Operators": 7}}')]),
        ("onnx: garbage", ["convert", write("garbage.onnx", os.urandom(2048)), "--out",
                           str(folder / "g.udb")]),
        ("onnx: ConstantOfShape 4 TiB", ["convert", write("huge.onnx", _huge_onnx()), "--out",
                                         str(folder / "h.udb")]),
    ]
    bundle = ref_out / "model" / "net.udb"
    if bundle.exists():
        cases += [
            ("bundle: bad graph JSON", ["info", write("json.udb", _bundle_with(b"{not json"))]),
            ("bundle: graph of wrong types", ["info", write("types.udb",
                                                            _bundle_with(b'{"nodes": 5}'))]),
            ("bundle: truncated", ["info", write("cut.udb", bundle.read_bytes()[:300])]),
            ("bundle: huge header", ["info", write("header.udb", _huge_header())]),
            ("input list: missing file", ["run", str(bundle), "--input-list",
                                          write("list.txt", "input:=nothere.raw\n"),
                                          "--output-dir", str(folder / "res")]),
        ]
    cases += [
        ("record: zstd bomb", ["info", write("bomb.udr", _record_bomb())]),
        ("record: bad payload JSON", ["info", write("json.udr", _record(b"[1, 2"))]),
        ("record: payload of wrong types", ["info", write("types.udr",
                                                          _record(b'{"values": 3}'))]),
    ]
    return cases


def _alias_bomb() -> str:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 12):
        refs = ", ".join([f"*a{i - 1}"] * 10)
        lines.append(f"a{i}: &a{i} [{refs}]")
    return "description: 1\nx-bomb:\n" + "\n".join("  " + line for line in lines) + "\n"


def _absurd_dims(folder: Path) -> str:
    (folder / "m.onnx").write_bytes(_tiny_onnx())
    return ("model: {onnx: m.onnx}\nprepare:\n  matrix:\n    soc: [sm8550]\n"
            "    input_dimensions: [{x: [100000, 100000, 100000, 100000]}]\n")


def _entity_xml() -> str:
    return ('<?xml version="1.0"?>\n<!DOCTYPE d [<!ENTITY e "x">]>\n'
            '<OpDefCollection PackageName="P" Domain="d" Version="1.0"><OpDefList>&e;'
            '</OpDefList></OpDefCollection>\n')


def _tiny_onnx() -> bytes:
    from onnx import TensorProto, helper

    node = helper.make_node("Relu", ["x"], ["y"])
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 4])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, [1, 4])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _huge_onnx() -> bytes:
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    shape = numpy_helper.from_array(np.array([1 << 20, 1 << 20], np.int64), "shape")
    nodes = [helper.make_node("ConstantOfShape", ["shape"], ["big"]),
             helper.make_node("Add", ["x", "big"], ["y"])]
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info(
        "x", TensorProto.FLOAT, [1, 1])], [helper.make_tensor_value_info(
            "y", TensorProto.FLOAT, None)], initializer=[shape])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


def _bundle_with(graph_json: bytes) -> bytes:
    """A well-formed bundle file (as write_bundle lays it out) whose one part is the graph."""
    from udo_build.ir import bundle

    header, entries, offsets = bundle._layout([({"name": "graph.json"}, graph_json)], {})
    out = bytearray(header)
    for (_, data), offset in zip(entries, offsets, strict=True):
        out += bytes(offset - len(out)) + bytes(data)  # type: ignore[arg-type]
    return bytes(out)


def _huge_header() -> bytes:
    from udo_build.ir import bundle

    return struct.pack("<8sIQ", bundle.MAGIC, bundle.VERSION, 1 << 40) + b"{}"


def _record(payload_json: bytes) -> bytes:
    import zstandard

    from udo_build.canonical import canonical_json
    from udo_build.compiler import record

    body = struct.pack("<Q", len(payload_json)) + payload_json
    compressed = zstandard.ZstdCompressor(level=3).compress(body)
    header = canonical_json({
        "format": record.FORMAT, "version": record.VERSION,
        "key": {"name": "crafted", "identifier": "crafted", "arch": "v73", "vtcm_mb": 8,
                "optimization_level": 2, "precision": "fp16"},
        "sizes": {"payload": len(body), "compressed": len(compressed)},
        "payload": {"sha256": hashlib.sha256(body).hexdigest(), "codec": "zstd"}})
    return struct.pack("<8sII", record.MAGIC, record.VERSION, len(header)) + header + compressed


def _record_bomb() -> bytes:
    """A record whose 2 GiB payload (zeros) compresses to a few hundred KB."""
    import zstandard

    from udo_build.canonical import canonical_json
    from udo_build.compiler import record

    size = 2 << 30
    chunk = bytes(64 * MB)
    digest = hashlib.sha256()
    compressor = zstandard.ZstdCompressor(level=3, write_content_size=True).compressobj(size=size)
    parts = []
    for _ in range(size // len(chunk)):
        digest.update(chunk)
        parts.append(compressor.compress(chunk))
    parts.append(compressor.flush())
    compressed = b"".join(parts)
    header = canonical_json({
        "format": record.FORMAT, "version": record.VERSION,
        "key": {"name": "bomb", "identifier": "bomb", "arch": "v73", "vtcm_mb": 8,
                "optimization_level": 2, "precision": "fp16"},
        "sizes": {"payload": size, "compressed": len(compressed)},
        "payload": {"sha256": digest.hexdigest(), "codec": "zstd"}})
    return struct.pack("<8sII", record.MAGIC, record.VERSION, len(header)) + header + compressed


# -- main --------------------------------------------------------------------------------------


def print_table(rows: list[Row], seconds: float) -> bool:
    print(f"{'section':12s} {'cases':>5s} {'passed':>6s}  figures")
    for row in rows:
        print(f"{row.section:12s} {row.cases:5d} {row.passed:6d}  {'; '.join(row.figures)}")
    print()
    ok = True
    for row in rows:
        good = row.cases > 0 and row.passed == row.cases
        ok &= good
        print(f"  {'PASS' if good else 'FAIL'}  {row.section}: {row.passed}/{row.cases}")
        for failure in row.failures[:6]:
            print(f"        {failure}")
        if len(row.failures) > 6:
            print(f"        (+{len(row.failures) - 6} more)")
    print(f"\n{seconds:.0f} s in all")
    return ok


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", default=",".join(SECTIONS),
                        help=f"comma-separated sections (default: all of {', '.join(SECTIONS)})")
    parser.add_argument("--quick", action="store_true", help="fewer cases per section")
    parser.add_argument("--smoke", action="store_true",
                        help="one case per section (CI: at most 3 minutes)")
    parser.add_argument("--seed", type=int, default=1, help="seed of the random choices")
    parser.add_argument("--keep", metavar="DIR", help="work in DIR (kept), not a temp folder")
    args = parser.parse_args(argv)
    only = [s for s in args.only.split(",") if s]
    unknown = sorted(set(only) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown sections {unknown}; known: {', '.join(SECTIONS)}")
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="udo-faults-") as tmp:
        work = Path(args.keep) if args.keep else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        suite = Suite(work, random.Random(args.seed), args.quick, args.smoke)
        suite.prepare_reference()
        rows = []
        for name in only:
            runner: Callable[[], Row] = getattr(suite, name)
            print(f"... {name}", file=sys.stderr, flush=True)
            rows.append(runner())
        ok = print_table(rows, time.perf_counter() - started)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
