"""What an action is handed and what it returns: its inputs as they travel to a worker
(`ActionInput`) and its outputs (`Produced`: bytes, a file, a `Tree` or a `FileOfParts`).

Apart from actions.py (the kinds' registry, which every build imports: the kinds and the engine
key actions with it), and imported where an action runs: a build whose actions are all cached,
a full no-op, defines none of them. `from udo_build.builder.actions import Produced` still works
(actions.py imports them on first use).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass(frozen=True)
class Tree:
    """An output that is a folder (stored as a Merkle tree)."""

    path: Path


@dataclass(frozen=True)
class FileOfParts:
    """An output that is one file made of parts (udo_build.store.parts): literal bytes, or
    blobs already in the store (an input's digest and size, `ActionContext.input_part`), at
    offsets; zeros between. The store keeps the shared blobs once."""

    segments: tuple[tuple[int, Any], ...]  # (offset, bytes | store.parts.Part)
    size: int

    @classmethod
    def of_bundle(cls, bundle: Any) -> FileOfParts:
        """A bundle (udo_build.ir.bundle) as a file of parts: each large weight a blob of its
        own, read when stored, so that the bundle is never whole in memory."""
        from ..ir.bundle import bundle_segments

        segments, size = bundle_segments(bundle)
        return cls(segments, size)  # type: ignore[arg-type]


@dataclass
class Produced:
    """What an action returns: outputs by name (bytes, a file path, a Tree or a FileOfParts),
    where to publish them in the output folder (relative path -> output name), and a
    description."""

    outputs: dict[str, bytes | Path | Tree | FileOfParts]
    publish: dict[str, str] = field(default_factory=dict)
    description: str = ""


@dataclass(frozen=True)
class ActionInput:
    """One input of an action as it travels to a worker: a blob or tree of the store by its
    digest; a source file of the project also has its file name (it is materialized under it:
    some steps read a name's extension) and, for messages only, where it came from."""

    digest: str
    type: str = "blob"  # "blob" | "tree"
    file: str = ""  # a source's file name; "" for an output of another action
    label: str = ""  # a source's path as the user knows it (for messages, never read)
    size: int | None = None  # its bytes (of the manifest, for a tree), when known
