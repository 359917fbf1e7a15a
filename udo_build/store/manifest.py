"""Manifests of folders udo-build writes (the output folder, a generated package): JSON
objects mapping relative paths to digests."""

from __future__ import annotations

import json
from pathlib import Path

from .cas import safe_relpath


def read_manifest(path: Path) -> dict[str, str]:
    """relative path -> digest from a manifest file; {} when it is missing or unreadable, and
    without entries whose path would leave the folder."""
    try:
        doc = json.loads(path.read_bytes())
    except (OSError, ValueError):
        return {}
    if not isinstance(doc, dict):
        return {}
    return {str(k): str(v) for k, v in doc.items() if safe_relpath(str(k))}
