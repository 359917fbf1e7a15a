"""The output folder: the built artifacts as files, for people and for deployment.

Each action says where its outputs are published (`opdef/MyPkgHtp.json`, a package tree under
`packages/MyPkgHtp/`, ...): the plan does, when the place depends on names the key ignores (a
model's file name), else the action's result. Files are written atomically and only when their
content changed; a manifest (`.udo-build-manifest.json`) records what the folder holds, so files
that an earlier build put there and the recipe no longer implies are removed (from the folder,
never from the store). Files the build did not write are never touched.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path

from ..atomic import write_atomic
from ..errors import UserError
from ..store import ActionResult, Store
from ..store.cas import safe_relpath
from ..store.manifest import read_manifest

MANIFEST = ".udo-build-manifest.json"
PARALLEL_BYTES = 8 << 20  # write files in WRITERS threads when there is more than this
WRITERS = 4


@dataclass
class Sync:
    written: int = 0
    removed: int = 0
    unchanged: int = 0


FileSpec = tuple[str, int, bool]  # digest, size, executable


Published = tuple[ActionResult, dict[str, str]]  # a result and where its outputs go


def desired_files(store: Store, results: list[Published]) -> dict[str, FileSpec]:
    """Relative path -> (digest, size, executable) of every published file."""
    files: dict[str, FileSpec] = {}
    for result, publish in results:
        for rel, name in sorted(publish.items()):
            out = result.outputs.get(name)
            if out is None:
                raise UserError(f"the {result.kind} action has no output '{name}' to publish as "
                                f"{rel}; it produced: {', '.join(result.outputs) or 'nothing'}",
                                hint="an action kind must produce every output the plan "
                                     "publishes (check the plugin or kind version)")
            _check_rel(rel)
            if out.type == "blob":
                files[rel] = (out.digest, out.size, False)
                continue
            entries = store.cas.tree_entries(out.digest)
            if entries is None:
                raise UserError(f"the tree of {rel} is missing from the store",
                                hint="run 'udo-build store verify --repair' and build again")
            for e in entries:
                files[f"{rel}/{e['path']}"] = (e["digest"], int(e.get("size", -1)),
                                               bool(e.get("executable")))
    return files


def materialize(store: Store, folder: Path, results: list[Published], *,
                prune: bool = True) -> Sync:
    files = desired_files(store, results)
    manifest = folder / MANIFEST
    old = read_manifest(manifest)
    sync = Sync()
    todo = [(rel, spec) for rel, spec in files.items()
            if not (old.get(rel) == spec[0] and _size(folder / rel) == spec[1])]
    sync.unchanged = len(files) - len(todo)
    _write_files(store, folder, todo)
    sync.written = len(todo)
    keep = {rel: spec[0] for rel, spec in files.items()}
    if not prune:
        keep = {**old, **keep}
    if prune:
        for rel in sorted(set(old) - set(files)):
            _check_rel(rel)
            (folder / rel).unlink(missing_ok=True)
            _remove_empty_parents(folder / rel, folder)
            sync.removed += 1
    if sync.written or sync.removed or not manifest.exists():
        data = dict(sorted(keep.items()))
        write_atomic(manifest, json.dumps(data, indent=1).encode(), readonly=False,
                     durable=False)
    return sync


def _write_files(store: Store, folder: Path, todo: list[tuple[str, FileSpec]]) -> None:
    """Write files from the store; several at once when there is much to write (reading,
    decompressing, verifying and writing release the GIL: a fresh checkout fed by a remote
    cache writes its whole output folder)."""
    def write(item: tuple[str, FileSpec]) -> None:
        rel, (digest, _, executable) = item
        if not store.cas.materialize(digest, folder / rel, executable=executable):
            raise UserError(f"the content of {rel} is missing from the store",
                            hint="run 'udo-build store verify --repair' and build again")

    if len(todo) < 2 or sum(max(spec[1], 0) for _, spec in todo) < PARALLEL_BYTES:
        for item in todo:
            write(item)
        return
    import concurrent.futures as cf

    with cf.ThreadPoolExecutor(WRITERS, thread_name_prefix="udo-build-out") as pool:
        list(pool.map(write, todo))


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def _check_rel(rel: str) -> None:
    if not safe_relpath(rel):
        raise UserError(f"an action published to an unsafe path: {rel!r}",
                        hint="outputs stay inside the output folder")


def _remove_empty_parents(path: Path, top: Path) -> None:
    parent = path.parent
    while parent != top and top in parent.parents:
        try:
            os.rmdir(parent)
        except OSError:
            return
        parent = parent.parent
