"""Canonical, typed bytes for hashing: sorted compact JSON, tagged with schema and tool version."""

from __future__ import annotations

import hashlib
import json
from typing import Any


def canonical_json(value: Any) -> bytes:
    """The one byte form of a JSON value: sorted keys, no spaces, UTF-8, no NaN."""
    return json.dumps(
        value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False
    ).encode("utf-8")


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def typed_digest(schema: str, version: int, value: Any) -> str:
    """sha256 of {schema, version, value} in canonical form: equal content, equal digest."""
    return sha256_hex(canonical_json({"schema": schema, "version": version, "value": value}))
