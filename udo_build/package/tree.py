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

from ..atomic import write_atomic
from ..errors import Problem, UserError
from ..store.manifest import read_manifest

MANIFEST = ".udo-build-package.json"


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


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return None


def conflicts(folder: Path, files: Mapping[str, bytes]) -> list[Problem]:
    """The files of `folder` that writing `files` would overwrite although a user changed them
    (they differ from both what udo-build wrote last and the new content)."""
    old = read_manifest(folder / MANIFEST)
    found = []
    for rel, data in sorted(files.items()):
        current = _digest(folder / rel)
        if current is not None and current not in (old.get(rel), _sha256(data)):
            found.append(Problem(
                "this file differs from what udo-build generated last; regenerating would "
                "overwrite your changes", file=str(folder / rel),
                hint="keep your kernels under version control and pass --force, or use another "
                     "--out folder"))
    return found


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def update_folder(folder: Path, files: Mapping[str, bytes], *, force: bool = False) -> Update:
    """Make `folder` hold `files`, refusing (UserError, nothing written) to overwrite a file a
    user changed unless `force`."""
    problems = [] if force else conflicts(folder, files)
    if problems:
        raise UserError(problems=problems)
    old = read_manifest(folder / MANIFEST)
    new = {rel: _sha256(data) for rel, data in files.items()}
    update = Update()
    for rel, data in sorted(files.items()):
        if _digest(folder / rel) == new[rel]:
            update.unchanged.append(rel)
            continue
        write_atomic(folder / rel, data, readonly=False, durable=False)
        update.written.append(rel)
    for rel in sorted(set(old) - set(new)):
        path = folder / rel
        if _digest(path) == old[rel]:
            path.unlink()
            _remove_empty_parents(path, folder)
            update.removed.append(rel)
        elif path.exists():
            update.kept.append(rel)
    write_atomic(folder / MANIFEST, (json.dumps(new, indent=1, sort_keys=True) + "\n").encode(),
                 readonly=False, durable=False)
    return update


def _remove_empty_parents(path: Path, top: Path) -> None:
    parent = path.parent
    while parent != top and top in parent.parents:
        try:
            parent.rmdir()
        except OSError:
            return
        parent = parent.parent
