"""The action cache: action key -> the JSON result of running that action.

A result names each output's digest, size and type (blob or tree), where the output is published
in a build's output folder, the action's kind and a human description, how long it took, and the
tool version. The cache is an optimization: an entry that cannot be read, does not parse, has the
wrong shape, publishes to an unsafe path, or names a blob the store lacks is a miss, never a
failure.

A hit is checked: every output blob (a tree's manifest and files too) must hold the bytes its
name says. The check is cheap on a store that did not change, through the stat cache
(`FileDigests.blob_digest`: a blob is hashed again only when its file's identity changed);
a blob found corrupt is quarantined and the entry is a miss, so the action runs again (or is
fetched again) instead of handing out bad bytes. `damage` says, after such a miss, what was
wrong with the entry's outputs.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from .. import __version__
from ..atomic import is_tmp, write_atomic
from .cas import Cas, _valid_digest, safe_relpath

if TYPE_CHECKING:
    from .filecache import FileDigests

RESULT_SCHEMA = "udo-build/action-result"
RESULT_VERSION = 1
OUTPUT_TYPES = ("blob", "tree")
TOUCH_AFTER = 86400.0  # seconds: an entry's mtime is refreshed on use once it is this old
RESERVED_PREFIX = ".udo-build"  # the output folder's own files (manifest, lock)


def publish_problem(rel: Any) -> str:
    """Why `rel` cannot be a publish path (a path relative to the output folder that stays
    inside it and is not one of the folder's own files), or ''."""
    if not isinstance(rel, str):
        return f"a publish path is not text: {rel!r}"
    bad = not safe_relpath(rel) or "\\" in rel or any(p == "." for p in rel.split("/"))
    if bad or rel.startswith((RESERVED_PREFIX, ".tmp-")):
        return f"publishes to an unsafe path {rel[:80]!r} (it must stay inside the output folder)"
    return ""


class Output(NamedTuple):
    """An output of an action: its blob (a tree's manifest, for a tree). Output and
    ActionResult are NamedTuples: immutable like frozen dataclasses, and much cheaper to define
    (every build imports this module)."""

    digest: str
    size: int
    type: str = "blob"  # "blob" or "tree" (a manifest blob)

    def to_json(self) -> dict[str, Any]:
        return {"digest": self.digest, "size": self.size, "type": self.type}


class ActionResult(NamedTuple):
    key: str
    kind: str
    description: str
    outputs: dict[str, Output]
    publish: dict[str, str] = {}  # relative path -> output name (never changed in place)
    seconds: float = 0.0
    tool_version: str = __version__
    created: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "schema": RESULT_SCHEMA, "version": RESULT_VERSION, "key": self.key,
            "kind": self.kind, "description": self.description,
            "outputs": {k: v.to_json() for k, v in sorted(self.outputs.items())},
            "publish": dict(sorted(self.publish.items())), "seconds": round(self.seconds, 6),
            "tool_version": self.tool_version, "created": self.created,
        }

    @staticmethod
    def from_json(doc: Any) -> ActionResult | None:
        """The result a document holds, or None when it is not a well-formed result."""
        try:
            if doc["schema"] != RESULT_SCHEMA or doc["version"] != RESULT_VERSION:
                return None
            outputs = {}
            for name, out in doc["outputs"].items():
                if not (isinstance(name, str) and _valid_digest(out["digest"])
                        and out["type"] in OUTPUT_TYPES and isinstance(out["size"], int)):
                    return None
                outputs[name] = Output(out["digest"], out["size"], out["type"])
            publish = {k: str(v) for k, v in doc.get("publish", {}).items()}
            if any(v not in outputs for v in publish.values()):
                return None
            if any(publish_problem(rel) for rel in publish):
                return None
            return ActionResult(
                key=str(doc["key"]), kind=str(doc["kind"]),
                description=str(doc["description"]), outputs=outputs, publish=publish,
                seconds=float(doc["seconds"]), tool_version=str(doc["tool_version"]),
                created=float(doc["created"]),
            )
        except (KeyError, TypeError, AttributeError, ValueError):
            return None


def unsafe_publish(doc: Any) -> str:
    """Why a result document's publish paths are refused, or '' (none is unsafe)."""
    publish = doc.get("publish") if isinstance(doc, dict) else None
    if not isinstance(publish, dict):
        return ""
    return next((why for why in map(publish_problem, publish) if why), "")


class ActionCache:
    def __init__(self, root: Path, cas: Cas, files: FileDigests | None = None) -> None:
        self.dir = root / "ac"
        self.cas = cas
        self.files = files  # the stat cache that checks output blobs (None: presence only)

    def path_of(self, key: str) -> Path:
        return Path(self.file_of(key))

    def file_of(self, key: str) -> str:
        """The entry's path as a string (path_of without making a Path: a build reads the
        entry of every action, a no-op record names them all)."""
        if not _valid_digest(key):
            raise ValueError(f"not an action key: {key!r}")
        return os.path.join(self.dir, key[:2], f"{key}.json")

    def get(self, key: str, *, touch: bool = True) -> ActionResult | None:
        """The cached result for `key`, if it is well-formed and all its outputs are stored
        whole (a corrupt one is quarantined: then the key is a miss)."""
        result, mtime = self._read(key)
        if result is None:
            return None
        if not all([self._complete(o) for o in result.outputs.values()]):  # each checked
            return None
        if touch and time.time() - mtime > TOUCH_AFTER:  # mtime = last use (a day's precision)
            try:
                os.utime(self.path_of(key))
            except OSError:
                pass
        return result

    def _read(self, key: str) -> tuple[ActionResult | None, float]:
        path = self.file_of(key)
        try:
            with open(path, "rb") as fh:
                mtime = os.fstat(fh.fileno()).st_mtime
                result = ActionResult.from_json(json.loads(fh.read()))
        except (OSError, ValueError, RecursionError):
            return None, 0.0
        if result is None or result.key != key:
            return None, 0.0
        return result, mtime

    def _complete(self, output: Output) -> bool:
        """The output's blob is stored whole (for a tree: its manifest and every file blob)."""
        if not self._whole(output.digest):
            return False
        if output.type != "tree":
            return True
        entries = self.cas.tree_entries(output.digest)
        return entries is not None and all([self._whole(e["digest"]) for e in entries])

    def _whole(self, digest: str) -> bool:
        """The blob is stored and holds its bytes (checked through the stat cache); a corrupt
        one is quarantined."""
        path = self.cas.find(digest)
        if path is None or self.files is None:
            return path is not None
        if self.files.blob_digest(path) == digest:
            return True
        self.cas.quarantine(Path(path))
        return False

    def damage(self, key: str) -> str:
        """After a miss: what is wrong with the entry's outputs (a one-line note), or '' when
        there is no usable entry (a plain miss)."""
        result, _ = self._read(key)
        if result is None:
            return ""
        bad = []
        for name, out in sorted(result.outputs.items()):
            digests = [out.digest]
            if out.type == "tree":
                entries = self.cas.tree_entries(out.digest) or []
                digests += [e["digest"] for e in entries]
            lost = [d for d in digests if not self.cas.has(d)]
            if lost:
                how = ("was corrupt (quarantined)" if any(d in self.cas.quarantined for d in lost)
                       else "was missing")
                bad.append(f"{name!r} ({out.digest[:12]}) {how}")
        return f"the store's copy of its output {', '.join(bad)}" if bad else ""

    def put(self, result: ActionResult) -> None:
        """Keep `result` (its blobs are stored, durably, first). The entry itself is written
        atomically but not synced to disk: the cache is an optimization, and an entry a crash
        lost (or left empty) is a miss, so the action runs or is fetched again; the blobs are
        the truth. A fresh checkout writes one entry per action it fetches: no fsync each."""
        data = json.dumps(result.to_json(), sort_keys=True, indent=1).encode()
        write_atomic(self.path_of(result.key), data, readonly=False, durable=False)

    def remove(self, key: str) -> None:
        self.path_of(key).unlink(missing_ok=True)

    def iter_entries(self) -> Iterator[tuple[str, Path]]:
        if not self.dir.exists():
            return
        for fan in sorted(self.dir.iterdir()):
            if fan.is_dir():
                for path in sorted(fan.iterdir()):
                    if not is_tmp(path) and path.suffix == ".json":
                        yield path.stem, path


def now() -> float:
    return round(time.time(), 3)
