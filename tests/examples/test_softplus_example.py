"""The Softplus example's committed model and data are exactly what its generator writes."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

from ..conftest import EXAMPLES


def digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.suffix in (".onnx", ".raw",
                                                                              ".txt")}


def test_generator_reproduces_the_committed_files(tmp_path: Path) -> None:
    source = EXAMPLES / "softplus"
    copy = tmp_path / "softplus"
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("model", "data"))
    subprocess.run([sys.executable, str(copy / "make_example.py")], check=True,
                   capture_output=True)
    expected = {k: v for k, v in digests(source).items() if k.startswith(("model", "data"))}
    assert expected and digests(copy) == expected
