"""Manifests of folders udo-build writes (the output folder, a generated package): JSON
objects mapping relative paths to digests.

A manifest is udo-build's own note about a folder, so a damaged one is not an error: reading
it checks everything (size, JSON, types, paths, digests) and keeps only the sound entries;
a missing, oversized or unreadable manifest reads as empty, so the next write rewrites the
folder's files from the store and records them again.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from .cas import safe_relpath

MAX_MANIFEST_BYTES = 64 << 20
_DIGEST = re.compile(r"[0-9a-f]{64}\Z")


def read_manifest(path: Path) -> dict[str, str]:
    """relative path -> digest from a manifest file; {} when it is missing, oversized or
    unreadable, and without entries whose path would leave the folder or whose digest is not
    a sha256."""
    try:
        with open(path, "rb") as fh:
            if os.fstat(fh.fileno()).st_size > MAX_MANIFEST_BYTES:
                return {}
            data = fh.read(MAX_MANIFEST_BYTES + 1)  # allocates what the file holds
    except OSError:
        return {}
    return parse_manifest(data)


def parse_manifest(data: bytes | None) -> dict[str, str]:
    """The sound entries of a manifest's bytes (see `read_manifest`); {} for None."""
    try:
        doc = json.loads(data) if data is not None and len(data) <= MAX_MANIFEST_BYTES else None
    except (ValueError, RecursionError):
        return {}
    if not isinstance(doc, dict):
        return {}
    return {k: v for k, v in doc.items() if isinstance(v, str) and _DIGEST.match(v)
            and _sound_path(k)}


def _sound_path(rel: str) -> bool:
    return safe_relpath(rel) and "." not in rel.split("/") and "\\" not in rel \
        and "\0" not in rel
