"""Benchmark: a billion-parameter decoder through convert, info and a float run, in bounded memory.

    python bench/llm.py [--size 1b|tiny] [--dir DIR] [--skip-run] [--peer]

The model is examples/llama/make_model.py's (`1b`: TinyLlama-1.1B's shape, 22 layers, hidden
2048, 32 heads / 4 KV heads, FFN 5632, vocabulary 32000: 4.4 GB of float32 weights in one
external data file; AR-1 at context 256). Each step runs in a subprocess of its own, so its peak
memory is its own VmHWM (/proc/self/status, the high-water mark of resident memory: anonymous
and mapped file pages together):

  generate  write the model and its external data file (one tensor at a time)
  convert   what the convert action does with external data: load_onnx (references validated,
            nothing read), import_onnx (weights mapped when looked at), the bundle stored as a
            file of parts (ir.bundle.bundle_segments -> store.parts.layout_of into a fresh
            store: each weight a blob of its own, read once to hash and once to store), and
            the output file written from the store (store.parts.write_file, streamed)
  info      `udo-build info` on the bundle: load_bundle (memory-mapped, every digest checked)
            and describe
  today     (--peer) the peer: what the convert action does today on the same model (the
            bundle's bytes whole, Bundle.to_bytes, then stored as one blob)
  run       one AR-1 step of the float model (runtime.float_session.Session) on the bundle

Target (issue 28, item 1): the peak of convert <= 2 x the largest tensor + 600 MB. info and run
are reported against the bundle's size (they map the bundle once: their peak counts its pages
as resident file pages; a second copy would show as twice the bundle). Exit 1 when the target
is missed. Prints the wall time and peak of each step, the largest tensor, the bundle and store
bytes.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MB = 1 << 20
SLACK = 600 * MB
KERNELS = [ROOT / "examples" / "decoder" / "ops" / "kernels.py",
           ROOT / "examples" / "encoder" / "ops" / "kernels.py"]
CONFIGS = [ROOT / "examples" / "decoder" / "ops" / "rope.xml",
           ROOT / "examples" / "encoder" / "ops" / "rmsnorm.xml"]


def peak_bytes() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


def step_generate(folder: Path, size: str) -> dict:
    sys.path.insert(0, str(ROOT / "examples" / "llama"))
    import make_model

    path = make_model.write_model(size, folder, 1, 256)
    return {"model": str(path), "parameters": make_model.SIZES[size].parameters()}


def _opdefs():  # noqa: ANN202 - an OpPackageDef
    from udo_build.errors import Diagnostics
    from udo_build.opdef import recipe_package

    return recipe_package(None, None, None, CONFIGS, Diagnostics())


def step_convert(folder: Path, size: str) -> dict:
    from udo_build.builder.kinds.convert import CONVERTER
    from udo_build.ir.bundle import Bundle, bundle_segments
    from udo_build.model.onnx_import import import_onnx, load_onnx
    from udo_build.store.cas import Cas
    from udo_build.store.parts import layout_of, write_file

    opdefs = _opdefs()
    path = folder / f"llama_{size}.onnx"
    model = import_onnx(load_onnx(path), file=str(path), opdefs=opdefs)
    bundle = Bundle(model, opdefs.to_json(), {"producer": CONVERTER})
    segments, total = bundle_segments(bundle)
    cas = Cas(folder / "store")
    layout = layout_of(segments, total, cas)
    out = folder / "bundle.udb"
    if not write_file(cas, layout, out):
        raise RuntimeError("the bundle's parts did not make its file")
    largest = max(int(model.weights[n].nbytes) for n in model.weights)
    return {"bundle_bytes": total, "parts": len(layout.parts), "largest_tensor": largest,
            "store_bytes": sum(p.stat().st_size for p in (folder / "store").rglob("*")
                               if p.is_file())}


def step_today(folder: Path, size: str) -> dict:
    """The peer: what the convert action does today (the bundle's bytes whole, then one blob),
    on the same model."""
    from udo_build.builder.kinds.convert import CONVERTER
    from udo_build.ir.bundle import Bundle
    from udo_build.model.onnx_import import import_onnx, load_onnx
    from udo_build.store.cas import Cas

    opdefs = _opdefs()
    path = folder / f"llama_{size}.onnx"
    model = import_onnx(load_onnx(path), file=str(path), opdefs=opdefs)
    data = Bundle(model, opdefs.to_json(), {"producer": CONVERTER}).to_bytes()
    Cas(folder / "store_today").put(data)
    shutil.rmtree(folder / "store_today")
    return {"bundle_bytes": len(data)}


def step_info(folder: Path, size: str) -> dict:
    from udo_build.ir.bundle import load_bundle
    from udo_build.model.info import describe

    info = describe(load_bundle(folder / "bundle.udb"))
    return {"layers": len(info["layers"]), "parameters": info["total_parameters"]}


def step_run(folder: Path, size: str) -> dict:
    import numpy as np

    from udo_build.ir.bundle import load_bundle
    from udo_build.kernels.load import packages_for
    from udo_build.runtime.float_session import Session

    bundle = load_bundle(folder / "bundle.udb")
    feed = {}
    for t in bundle.model.graph.inputs:
        shape = t.static_shape
        feed[t.name] = np.zeros(shape, np.int64 if t.dtype == "int64" else np.float32)
    feed["attention_mask"][..., :-1] = -255.0
    logits = Session(bundle.model, packages_for(bundle, KERNELS)).run(feed, ["logits"])["logits"]
    return {"logits": list(logits.shape), "finite": bool(np.isfinite(logits).all())}


STEPS = {"generate": step_generate, "convert": step_convert, "today": step_today,
         "info": step_info, "run": step_run}


def child(step: str, folder: Path, size: str) -> int:
    start = time.perf_counter()
    result = STEPS[step](folder, size)
    result.update(wall_s=time.perf_counter() - start, peak=peak_bytes())
    print(json.dumps(result))
    return 0


def measure(step: str, folder: Path, size: str) -> dict:
    done = subprocess.run([sys.executable, __file__, "--child", step, "--dir", str(folder),
                           "--size", size], capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})
    if done.returncode != 0:
        sys.exit(f"step {step} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=("tiny", "1b"), default="1b")
    parser.add_argument("--dir", type=Path, help="work here (kept) instead of a temp folder")
    parser.add_argument("--skip-run", action="store_true", help="no float run step")
    parser.add_argument("--peer", action="store_true", help="also convert as the convert "
                        "action does today (the whole bundle in memory: 2x its size)")
    parser.add_argument("--child", choices=sorted(STEPS), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(args.child, args.dir, args.size)
    folder = args.dir or Path(tempfile.mkdtemp(prefix="udo-bench-llm-"))
    folder.mkdir(parents=True, exist_ok=True)
    try:
        return report(folder, args.size, args.skip_run, args.peer)
    finally:
        if args.dir is None:
            shutil.rmtree(folder, ignore_errors=True)


def report(folder: Path, size: str, skip_run: bool, peer: bool) -> int:
    results = {}
    kept = (folder / f"llama_{size}.onnx").exists()  # a --dir of an earlier run: reused
    for step in (*(() if kept else ("generate",)), "convert", *(("today",) if peer else ()),
                 "info", *(() if skip_run else ("run",))):
        got = results[step] = measure(step, folder, size)
        rest = {k: v for k, v in got.items() if k not in ("wall_s", "peak")}
        print(f"{step:9s} {got['wall_s']:8.1f} s   peak {got['peak'] / MB:8.0f} MB   "
              f"{json.dumps(rest)}", flush=True)
    convert = results["convert"]
    largest, bundle = convert["largest_tensor"], convert["bundle_bytes"]
    limit = 2 * largest + SLACK
    ok = convert["peak"] <= limit
    print(f"largest tensor {largest / MB:.0f} MB, bundle {bundle / MB:.0f} MB, store "
          f"{convert['store_bytes'] / MB:.0f} MB in {convert['parts']} parts")
    print(f"{'PASS' if ok else 'FAIL'}  convert peak {convert['peak'] / MB:.0f} MB <= 2 x largest "
          f"tensor + 600 MB = {limit / MB:.0f} MB")
    for step in ("today", "info", "run"):
        if step in results:
            print(f"      {step} peak {results[step]['peak'] / MB:.0f} MB = "
                  f"{results[step]['peak'] / bundle:.2f} x the bundle")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
