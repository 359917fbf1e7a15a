"""The record: deterministic bytes (also across processes), a checked reader, the summary row of
`udo-build info`, and a record that runs as the compiled graph does."""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tracemalloc
from pathlib import Path

import numpy as np
import pytest

from udo_build.cli import main
from udo_build.compiler import Runner, read_header, read_record, summary
from udo_build.compiler.record import MAGIC
from udo_build.errors import UserError

from .helpers import REPO, G, check_int8, feeds, prepare, quantized, softplus_bundle, w

SCRIPT = """
import hashlib, sys
sys.path.insert(0, {repo!r})
from tests.compiler.helpers import prepare, softplus_bundle
bundle, _ = softplus_bundle()
print(hashlib.sha256(prepare(bundle, level=3, vtcm_mb=0.05).record()).hexdigest())
"""


def test_records_are_deterministic_across_processes() -> None:
    bundle, _ = softplus_bundle()
    here = hashlib.sha256(prepare(bundle, level=3, vtcm_mb=0.05).record()).hexdigest()
    assert hashlib.sha256(prepare(bundle, level=3, vtcm_mb=0.05).record()).hexdigest() == here
    for seed in ("1", "2"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        out = subprocess.run([sys.executable, "-c", SCRIPT.format(repo=str(REPO))], env=env,
                             capture_output=True, text=True, check=True, cwd=REPO)
        assert out.stdout.strip() == here


def test_a_record_runs_as_the_compiled_graph() -> None:
    bundle, packages = softplus_bundle()
    qbundle = quantized(bundle.model, packages, bundle.opdefs)
    compiled = prepare(qbundle, level=2, vtcm_mb=0.03, precision="int8",
                       outputs={"tensors": ["conv2_out", "logits"]})
    record = read_record(compiled.record())
    assert record.graph.text() == compiled.graph.text()
    x = feeds(qbundle.model)
    got = record.runner(packages).run(x, raw=True)
    want = Runner(compiled.graph, compiled.io, "int8", packages, compiled.settings).run(x, raw=True)
    assert all(np.array_equal(got[k], want[k]) for k in want)
    check_int8(qbundle, compiled, packages)
    assert record.body["memory"]["peak_vtcm_bytes"] == compiled.memory.peak <= 0.03 * 2 ** 20
    impls = {op["impl"] for op in record.body["ops"]}
    assert any(i.startswith("integer::") for i in impls)


def corrupt(data: bytes, where: int) -> bytes:
    return data[:where] + bytes([data[where] ^ 0xFF]) + data[where + 1:]


def test_the_reader_refuses_bad_records() -> None:
    bundle, _ = softplus_bundle()
    data = prepare(bundle).record()
    header, end = read_header(data)
    bad = {
        "wrong magic": b"NOTAREC\0" + data[8:],
        "version 1": data[:8] + (1).to_bytes(4, "little") + data[12:],
        "truncated": data[:-10],
        "corrupt": corrupt(data, len(data) - 40),
        "header": corrupt(data, 20),
    }
    messages = {"wrong magic": "not a udo-build cache record",
                "version 1": "format version 1 is not supported",
                "truncated": "truncated", "corrupt": "corrupt", "header": "header"}
    for name, blob in bad.items():
        with pytest.raises(UserError, match=messages[name]):
            read_record(blob, "r.udr")
    assert read_record(data).key == header["key"]


def test_summary_and_info(tmp_path: Path) -> None:
    bundle, _ = softplus_bundle()
    data = prepare(bundle, level=3, outputs={"layers": ["head"]},
                   dims={"input": (4, 3, 32, 32)}, precision="fp16").record()
    assert data[:8] == MAGIC
    header, _ = read_header(data)
    row = summary(header, len(data))
    assert row == {"name": "softplus_net/v73/8MB/O3/input=4x3x32x32/logits/fp16",
                   "identifier": "softplus_net", "size": len(data), "level": 3, "arch": "v73",
                   "vtcm_mb": 8, "dims": "input=4x3x32x32", "outputs": "logits"}
    path = tmp_path / "r.udr"
    path.write_bytes(data)
    out, err = io.StringIO(), io.StringIO()
    assert main(["info", str(path), "--json"], stdout=out, stderr=err, env={}) == 0
    assert json.loads(out.getvalue())["record"] == row
    out = io.StringIO()
    assert main(["info", str(path)], stdout=out, stderr=err, env={"NO_COLOR": "1"}) == 0
    text = out.getvalue()
    assert "Cache Info" in text and "softplus_net" in text and "input=4x3x32x32" in text
    path.write_bytes(data[:100])
    assert main(["info", str(path)], stdout=io.StringIO(), stderr=err, env={}) == 2


def test_a_record_written_to_a_file_is_its_bytes_never_held(tmp_path: Path) -> None:
    """The prepare step writes its record to a file: record()'s bytes, without holding them
    (a large model's record held twice made the step's peak memory grow with its weights)."""
    g, y = G(), "x"
    for i in range(16):  # 16 MiB of float32 weights, 15 MiB compressed: 1 MiB a constant
        y = g.op("MatMul", y, g.const(f"w{i}", w(512, 512)), out=f"y{i}")
    compiled = prepare(g.model({"x": [1, 512]}, [y]))
    data = compiled.record()
    path = tmp_path / "r.udr"
    tracemalloc.start()
    try:
        size = compiled.write_record(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert size == len(data) > 12 << 20 and path.read_bytes() == data
    assert peak < len(data) // 4, f"writing the record held {peak:,} bytes"
