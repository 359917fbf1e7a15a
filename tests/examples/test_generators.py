"""The examples' committed models and data are exactly what their generators write."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from ..conftest import EXAMPLES


def digests(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file() and p.suffix in (".onnx", ".raw",
                                                                              ".txt")}



@pytest.mark.parametrize("example", ["softplus", "squeezenet"])
def test_generator_reproduces_the_committed_files(example: str, tmp_path: Path) -> None:
    source = EXAMPLES / example
    copy = tmp_path / example
    shutil.copytree(source, copy, ignore=shutil.ignore_patterns("model", "data"))
    subprocess.run([sys.executable, str(copy / "make_example.py")], check=True,
                   capture_output=True)
    expected = {k: v for k, v in digests(source).items() if k.startswith(("model", "data"))}
    assert expected and digests(copy) == expected
