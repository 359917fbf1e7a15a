"""History files of a store: the last build of each recipe, one JSON file per recipe.

This module owns the file format; `build/history.py` writes the files, `store verify` and
`store gc` read them (every output a last build references is a gc root).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..atomic import is_tmp

SCHEMA = "udo-build/history"
VERSION = 1


def read_history(path: Path) -> tuple[dict[str, Any] | None, str | None]:
    """(document, None) for a well-formed history file, else (None, what is wrong with it)."""
    try:
        doc = json.loads(path.read_bytes())
    except FileNotFoundError:
        return None, "missing"
    except OSError as exc:
        return None, f"cannot be read: {exc.strerror}"
    except (ValueError, UnicodeDecodeError):
        return None, "not JSON (truncated or overwritten)"
    if (not isinstance(doc, dict) or doc.get("schema") != SCHEMA
            or not isinstance(doc.get("actions"), dict)):
        return None, "not a build history (wrong schema or shape)"
    return doc, None


def history_files(root: Path) -> Iterator[Path]:
    folder = root / "history"
    if folder.is_dir():
        for path in sorted(folder.glob("*.json")):
            if not is_tmp(path):
                yield path
