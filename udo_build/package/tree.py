"""Writing a generated package to disk: into an action's work folder (then stored as a tree), and
into a user's folder, where the user fills in kernels and must never lose an edit.

`update_folder` keeps a manifest of what it wrote (`.udo-build-package.json`: relative path ->
sha256). A file is overwritten or removed only when it still holds what udo-build wrote, or when
it already holds the new content; a user's change is refused unless forced, so a regeneration
after a change of the op config never clobbers a kernel someone wrote.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from ..atomic import Confined
from ..errors import Problem, UserError
from ..store.manifest import MAX_MANIFEST_BYTES, parse_manifest

MANIFEST = ".udo-build-package.json"
MAX_FILE_BYTES = 256 << 20  # a generated source file is far smaller; larger is a user's own


def write_tree(files: Mapping[str, bytes], folder: Path) -> None:
    """Write `files` (relative path -> bytes) below `folder`, mode 0644."""
    for rel, data in sorted(files.items()):
        path = folder / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        path.chmod(0o644)


@dataclass
class Update:
    written: list[str] = field(default_factory=list)
    unchanged: list[str] = field(default_factory=list)
    removed: list[str] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)  # no longer generated, but changed: left alone


def _digest(out: Confined, rel: str) -> str | None:
    data = out.read(rel, MAX_FILE_BYTES)
    return None if data is None else _sha256(data)


def _old(out: Confined, base: str) -> dict[str, str]:
    return parse_manifest(out.read(f"{base}/{MANIFEST}", MAX_MANIFEST_BYTES))


def conflicts(out: Confined, base: str, files: Mapping[str, bytes]) -> list[Problem]:
    """The files of the subfolder `base` that writing `files` would overwrite although a user
    changed them (they differ from both what udo-build wrote last and the new content)."""
    old = _old(out, base)
    found = []
    for rel, data in sorted(files.items()):
        current = _digest(out, f"{base}/{rel}")
        if current is not None and current not in (old.get(rel), _sha256(data)):
            found.append(Problem(
                "this file differs from what udo-build generated last; regenerating would "
                "overwrite your changes", file=str(out.path / base / rel),
                hint="keep your kernels under version control and pass --force, or use another "
                     "--out folder"))
    return found


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def update_folder(out: Confined, base: str, files: Mapping[str, bytes], *,
                  force: bool = False) -> Update:
    """Make the subfolder `base` of `out` hold `files`, refusing (UserError, nothing written)
    to overwrite a file a user changed unless `force`. Everything goes through `out`: a link
    planted in it is refused, never followed."""
    problems = [] if force else conflicts(out, base, files)
    if problems:
        raise UserError(problems=problems)
    old = _old(out, base)
    new = {rel: _sha256(data) for rel, data in files.items()}
    update = Update()
    for rel, data in sorted(files.items()):
        if _digest(out, f"{base}/{rel}") == new[rel]:
            update.unchanged.append(rel)
            continue
        out.write(f"{base}/{rel}", data)
        update.written.append(rel)
    for rel in sorted(set(old) - set(new)):
        if _digest(out, f"{base}/{rel}") == old[rel]:
            out.unlink(f"{base}/{rel}")
            out.remove_empty_folders(f"{base}/{rel}", top=base)
            update.removed.append(rel)
        elif out.lstat(f"{base}/{rel}") is not None:
            update.kept.append(rel)
    out.write(f"{base}/{MANIFEST}",
              (json.dumps(new, indent=1, sort_keys=True) + "\n").encode())
    return update
