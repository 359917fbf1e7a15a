"""Kernels files enter keys by their normalized code (`Source(path, digest="python")`): comments
and docstrings do not count, code does; a file that does not parse keys by its bytes; the digest
is kept in the stat cache by its kind, so an unchanged file is not parsed again."""

from __future__ import annotations

import os
import time
from pathlib import Path

from udo_build.store import Store
from udo_build.store.cas import sha256_file
from udo_build.store.filecache import python_code_digest

KERNELS = '''"""Kernels."""
import numpy as np


class Helper:
    """A class."""

    def scale(self, x):
        """A method."""
        return 2 * x


def softplus(x, *, beta=1.0):
    """A function."""
    return np.log1p(np.exp(beta * x)) / beta
'''

SAME_CODE = '''# a header comment
"""Kernels, documented otherwise."""
import numpy as np  # arrays


class Helper:
    """Another class text."""
    def scale(self, x):
        return 2 * x  # twice


def softplus(x, *, beta=1.0):



    """Another function text, on another line."""
    # a comment
    return np.log1p(np.exp(beta * x)) / beta
'''


def digest(tmp_path: Path, text: str, name: str = "kernels.py") -> str:
    path = tmp_path / name
    path.write_text(text)
    return python_code_digest(path)[0]


def test_comments_docstrings_and_positions_do_not_count(tmp_path: Path) -> None:
    assert digest(tmp_path, KERNELS) == digest(tmp_path, SAME_CODE, "other.py")


def test_code_counts(tmp_path: Path) -> None:
    base = digest(tmp_path, KERNELS)
    for old, new in [("2 * x", "3 * x"), ("beta=1.0", "beta=2.0"), ("log1p", "log"),
                     ('    """A method."""\n', '    """A method."""\n    x = x\n'),
                     ('"""A function."""', '"""A function.""" + ""')]:
        assert old in KERNELS
        assert digest(tmp_path, KERNELS.replace(old, new)) != base, (old, new)


def test_not_a_content_digest_and_unparsable_files_key_by_their_bytes(tmp_path: Path) -> None:
    path = tmp_path / "kernels.py"
    path.write_text(KERNELS)
    assert python_code_digest(path) != sha256_file(path)
    path.write_text(KERNELS + "def broken(:\n")
    assert python_code_digest(path) == sha256_file(path)
    path.write_bytes(b"x = '\xff'\n")  # not UTF-8
    assert python_code_digest(path) == sha256_file(path)


def test_the_stat_cache_keeps_each_kind_and_does_not_parse_unchanged_files(
        tmp_path: Path) -> None:
    path = tmp_path / "kernels.py"
    path.write_text(KERNELS)
    old = time.time() - 60  # not racily recent: cacheable
    os.utime(path, (old, old))
    store = Store(tmp_path / "store")
    code = store.files.digest(path, kind="python")
    content = store.files.digest(path)
    assert code == python_code_digest(path) and content == sha256_file(path)
    assert store.files.hashed == 2
    assert store.files.digest(path, kind="python") == code
    assert store.files.digest(path) == content and store.files.hashed == 2
    again = Store(tmp_path / "store")
    assert again.files.digest(path, kind="python") == code and again.files.hashed == 0
    path.write_text(KERNELS.replace("2 * x", "3 * x"))
    os.utime(path, (old + 1, old + 1))
    assert again.files.digest(path, kind="python") != code and again.files.hashed == 1
