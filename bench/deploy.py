"""Benchmark: what a real-size recipe leaves in the store and the output folder, and what
assembling and running its deployable bundle cost.

    python bench/deploy.py [--socs sm8350,sm8450,sm8550,sm8650,sm8750] [--levels 1,2,3]
                           [--calibration 2] [--keep DIR]

The recipe (written by the script in a temp folder): the onnx wheel's light ResNet-50 with random
weights by role (bench/_light_models.py), quantized int8 (enhanced, per channel) over
--calibration random inputs, prepared for every SoC x level x output set (5 x 3 x 2 = 30 targets
by default: the model's output, and the pooled features with it; the light ResNet-50 hard-codes
batch 1 and the 224 x 224 image in its final pooling and Reshape, so its input dimensions
cannot vary), one run on sm8550 checked against the float model. The build is the `udo-build`
console script of this interpreter, `--json`, a fresh store.

Figures:
- the int8 record of one target against the model's quantized parameter bytes (weights at their
  bit width, biases at theirs; target: record <= 1.3x);
- the store's blob bytes on disk against the bytes of the distinct artifacts the build produced
  (every distinct output blob once, a tree's files once, and for the deployable bundle, a file
  of parts, only the bytes that are not already other artifacts: its head), plus the project's
  files the store keeps as blobs (the ONNX model, the data: sources are stored so that other
  machines can run the actions that read them; at a small matrix they are a large share);
  target: <= 1.2x;
- the deployable bundle file's size in the output folder and the sum of its distinct records;
- `assemble` run again alone (its action-cache entry removed: `udo-build RECIPE assemble`),
  whole process wall time and the action's own seconds (target: under 5 s), and the run step's
  own seconds (it reads the bundle's head and one record).

Prints a table and PASS/FAIL per target; exits 1 if one is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import _light_models as light  # noqa: E402

RECORD_RATIO = 1.3
STORE_RATIO = 1.2
ASSEMBLE_SECONDS = 5.0
BUILD = [sys.executable, "-m", "udo_build"]


def write_project(root: Path, args: argparse.Namespace) -> tuple[Path, Any]:
    import onnx

    from udo_build.model.onnx_import import import_onnx

    (root / ".udo-build-root").write_text("")
    proto = light.randomized("resnet50", 0, import_onnx)
    (root / "model").mkdir()
    onnx.save(proto, root / "model/resnet50.onnx")
    name = proto.graph.input[0].name
    rng = np.random.default_rng(1)
    (root / "data").mkdir()
    lines = []
    for i in range(args.calibration + 1):
        path = root / f"data/x{i}.raw"
        rng.standard_normal((1, 3, 224, 224), dtype=np.float32).tofile(path)
        lines.append(f"{name}:=x{i}.raw")
    (root / "data/calib.txt").write_text("\n".join(lines[:-1]) + "\n")
    (root / "data/test.txt").write_text(lines[-1] + "\n")
    pooled = [n.output[0] for n in proto.graph.node if "Pool" in n.op_type][-1]
    outputs = f"[default, {{tensors: [{pooled}, {proto.graph.output[0].name}]}}]"
    (root / "resnet.yaml").write_text(f"""recipe: 1
name: resnet-deploy
model:
  onnx: model/resnet50.onnx
quantize:
  input_list: data/calib.txt
  quantizer: enhanced
  per_channel: true
prepare:
  matrix:
    soc: [{args.socs}]
    optimization_level: [{args.levels}]
    outputs: {outputs}
run:
  - name: smoke
    soc: sm8550
    input_list: data/test.txt
""")
    return root / "resnet.yaml", proto


def build(recipe: Path, root: Path, *extra: str) -> tuple[dict[str, Any], float]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    started = time.perf_counter()
    done = subprocess.run([*BUILD, str(recipe), "--store", str(root / "store"), "--out",
                           str(root / "out"), "--json", *extra], capture_output=True, env=env,
                          text=True, check=False)
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        sys.exit(f"build failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout), seconds


def quantized_parameter_bytes(store: Any, summary: dict[str, Any]) -> int:
    """Weights at their bit width and biases at theirs, from the quantize step's encodings."""
    from udo_build.ir.bundle import read_bundle
    from udo_build.store.parts import PartsReader, parse_layout

    key = next(a["key"] for a in summary["actions"] if a["id"] == "quantize")
    result = store.ac.get(key)
    stored = store.cas.get(result.outputs["bundle"].digest)
    layout = parse_layout(stored)  # the bundle is a file of parts: its manifest
    bundle = read_bundle(stored if layout is None else PartsReader(store.cas, layout),
                         "quantized")
    encodings = json.loads(bundle.parts["encodings.json"])
    params = {e["name"]: e for e in encodings.get("param_encodings", [])}
    total = 0
    for name, array in bundle.model.weights.items():
        if name in params:
            total += array.size * int(params[name]["bw"]) // 8
    return total


def distinct_artifact_bytes(store: Any, summary: dict[str, Any]) -> tuple[int, int]:
    """(bytes of the distinct artifacts, bytes of the deployable's records). A file of parts
    (the bundles: convert's and quantize's weights, the deployable's head, records and shared
    weights) counts each distinct part once."""
    from udo_build.store.parts import parse_layout

    seen: dict[str, int] = {}
    layouts: dict[str, Any] = {}
    made: dict[str, str] = {}  # an output's digest -> the kind of the action that made it
    for action in summary["actions"]:
        result = store.ac.get(action["key"])
        for out in result.outputs.values():
            made[out.digest] = action["kind"]
            if out.type == "blob":
                seen[out.digest] = out.size
                continue
            layout = parse_layout(store.cas.get(out.digest) or b"")
            if layout is not None:
                layouts[action["kind"]] = layout
                seen.update((part.digest, part.size) for part in layout.parts)
                continue
            for entry in store.cas.tree_entries(out.digest) or []:
                seen[entry["digest"]] = int(entry["size"])
    deployable = layouts.get("assemble")
    records = 0 if deployable is None else sum(
        part.size for part in deployable.parts if made.get(part.digest) == "prepare")
    return sum(seen.values()), records


def stored_source_bytes(store: Any, root: Path) -> int:
    """The bytes of the project's own files (the model, the data) that the store holds as
    blobs (sources are stored so that other machines can run the actions that read them)."""
    import hashlib

    total = 0
    for path in sorted((root / "model").rglob("*")) + sorted((root / "data").rglob("*")):
        if path.is_file():
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            if store.cas.has(digest):
                total += path.stat().st_size
    return total


def disk_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--socs", default="sm8350, sm8450, sm8550, sm8650, sm8750")
    parser.add_argument("--levels", default="1, 2, 3")
    parser.add_argument("--calibration", type=int, default=2)
    parser.add_argument("--keep", type=Path, help="build here and keep it (default: a temp dir)")
    args = parser.parse_args(argv)
    root = args.keep or Path(tempfile.mkdtemp(prefix="udo-bench-deploy-"))
    root.mkdir(parents=True, exist_ok=True)
    try:
        return run(root, args)
    finally:
        if args.keep is None:
            shutil.rmtree(root, ignore_errors=True)


def run(root: Path, args: argparse.Namespace) -> int:
    from udo_build.store import Store

    recipe, _ = write_project(root, args)
    first, first_wall = build(recipe, root)
    store = Store(root / "store")
    prepares = [a for a in first["actions"] if a["kind"] == "prepare"]
    record = store.ac.get(prepares[0]["key"]).outputs["record"]
    qbytes = quantized_parameter_bytes(store, first)
    distinct, records = distinct_artifact_bytes(store, first)
    sources = stored_source_bytes(store, root)
    distinct += sources
    on_disk = disk_bytes(root / "store/cas")
    deploy = next((root / "out/model").glob("*_deploy.udb"))
    assemble_key = next(a["key"] for a in first["actions"] if a["id"] == "assemble")
    store.ac.remove(assemble_key)
    again, wall = build(recipe, root, "assemble")
    assembled = next(a for a in again["actions"] if a["id"] == "assemble")
    ran = next(a for a in first["actions"] if a["id"] == "run:smoke")
    rows = [
        ("targets / actions", f"{len(prepares)} / {len(first['actions'])}", ""),
        ("first build wall", f"{first_wall:.1f} s", ""),
        ("int8 record (first target)", f"{record.size / 1e6:.2f} MB", ""),
        ("quantized parameter bytes", f"{qbytes / 1e6:.2f} MB", ""),
        ("record / quantized parameters", f"{record.size / qbytes:.2f}x",
         _verdict(record.size / qbytes <= RECORD_RATIO, f"<= {RECORD_RATIO}x")),
        ("store blobs on disk", f"{on_disk / 1e6:.1f} MB", ""),
        ("distinct artifacts and stored sources", f"{distinct / 1e6:.1f} MB", ""),
        ("  of which the model and data files", f"{sources / 1e6:.1f} MB", ""),
        ("store / distinct artifacts", f"{on_disk / distinct:.2f}x",
         _verdict(on_disk / distinct <= STORE_RATIO, f"<= {STORE_RATIO}x")),
        ("deployable file / its records", f"{deploy.stat().st_size / 1e6:.1f} MB / "
                                          f"{records / 1e6:.1f} MB", ""),
        ("assemble again: whole process", f"{wall:.2f} s",
         _verdict(wall < ASSEMBLE_SECONDS, f"< {ASSEMBLE_SECONDS:.0f} s")),
        ("assemble again: the action", f"{assembled['seconds']:.2f} s", ""),
        ("run:smoke: the action", f"{ran['seconds']:.2f} s", ""),
    ]
    width = max(len(r[0]) for r in rows)
    for label, value, verdict in rows:
        print(f"{label:<{width}}  {value:>24}  {verdict}")
    return 1 if any(r[2].startswith("FAIL") for r in rows) else 0


def _verdict(ok: bool, target: str) -> str:
    return f"{'PASS' if ok else 'FAIL'} ({target})"


if __name__ == "__main__":
    sys.exit(main())
