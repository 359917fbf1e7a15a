"""The output folder: the built artifacts as files, for people and for deployment.

Each action says where its outputs are published (`opdef/HTP/MyPkg.json`, a package tree under
`packages/HTP/MyPkg/`, ...): the plan does, when the place depends on names the key ignores (a
model's file name), else the action's result. Files are written atomically; a manifest
(`.udo-build-manifest.json`) records what the folder holds, so files that an earlier build put
there and the recipe no longer implies are removed (from the folder, never from the store).
Files the build did not write are never touched.

An output that is a file of parts (udo_build.store.parts: the deployable bundle) is one file
here, written part by part from the store and checked against the whole file's digest, which is
what the manifest records for it.

Every build checks that the folder holds what the manifest says, cheaply: through the store's
stat cache (`FileDigests`, like git's index), a file is hashed again only when its identity
(size, mtime, ctime, inode) changed; a file that does not hold its bytes is written again (and
reported). A raw blob is hard-linked into the folder, so a file written through the link damages
the blob too: the engine's check of the action's outputs quarantines it and the action runs
again before the folder is checked.

A folder is owned by one build at a time (`owned`, see owner.py: a lock file `.udo-build-lock` in
it; a second build waits, says so, then proceeds). The lock file also says whether its last owner
was writing: a build killed then may have left `.tmp-*` siblings, which the next owner removes.

Nothing escapes the folder: every write, replace and delete in it (the lock, the manifest, the
files, their folders, the leftovers) goes through the folder's own open descriptors
(`atomic.Confined`), never following a symbolic link. A link, named pipe or socket found at a
file's or folder's place, or named by the manifest, is removed and the place written again, with
one warning (the folder is the build's own: its manifest and lock say so); nothing outside is
read, written or deleted. The stat-cache check stats each file by its name in its open folder.
"""

from __future__ import annotations

import hashlib
import json
import os
import stat
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..atomic import TMP_PREFIX, Confined
from ..errors import UserError
from ..store import ActionResult, Output, Store
from ..store.cas import parse_tree, safe_relpath
from ..store.manifest import MAX_MANIFEST_BYTES, parse_manifest
from ..store.parts import parse_layout, whole_blob, write_file
from .owner import LOCK, Owner, owned, remove_leftovers  # noqa: F401  (the folder's owner)

MANIFEST = ".udo-build-manifest.json"
PARALLEL_BYTES = 8 << 20  # write files in WRITERS threads when there is more than this
WRITERS = 4


@dataclass
class Sync:
    """What an output-folder update did: files written, removed, unchanged, damaged."""

    written: int = 0
    removed: int = 0
    unchanged: int = 0
    damaged: list[str] = field(default_factory=list)  # files that did not hold their bytes
    remote: dict[str, int] = field(default_factory=dict)  # not written: their bytes stayed
    # in the remote (--download minimal): path -> bytes (a tree's: its manifest's)
    replaced: list[str] = field(default_factory=list)  # foreign entries (links...) replaced


class MissingContent(UserError):
    """Blobs the output folder needs are missing from the store (or were found corrupt and
    quarantined while being written): their actions must run again."""


FileSpec = tuple[str, int, bool, str]  # digest, size, executable, manifest of a file of parts


Published = tuple[ActionResult, dict[str, str]]  # a result and where its outputs go


def desired_files(store: Store, results: list[Published],
                  remote: dict[str, Output] | None = None) -> dict[str, FileSpec]:
    """Relative path -> (digest, size, executable) of every published file. With `remote`
    (a build that downloads no bytes), an output whose blobs the store lacks is no file: it
    goes to `remote` by its path."""
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
            if remote is not None and not _stored(store, out):
                remote[rel] = out
                continue
            if out.type == "blob":
                files[rel] = (out.digest, out.size, False, "")
                continue
            manifest = store.cas.get(out.digest)
            entries = None if manifest is None else parse_tree(manifest)
            if manifest is None or entries is None:
                raise MissingContent(f"the tree of {rel} is missing from the store",
                                     hint="build again: its action runs again")
            layout = parse_layout(manifest)
            if layout is not None and whole_blob(layout):  # one part: the blob is the file
                files[rel] = (layout.sha256, layout.size, False, "")
                continue
            if layout is not None:  # one file, made of parts
                files[rel] = (layout.sha256, layout.size, False, out.digest)
                continue
            for e in entries:
                files[f"{rel}/{e['path']}"] = (e["digest"], int(e.get("size", -1)),
                                               bool(e.get("executable")), "")
    return files


def materialize(store: Store, folder: Path, results: list[Published], *,
                prune: bool = True, owner: Owner | None = None, minimal: bool = False) -> Sync:
    """Make the folder hold the published files (through the owner's open folder, else one
    opened here); entries that are not udo-build's (symbolic links, pipes, ...) are replaced
    and listed in `Sync.replaced` (and told once through the owner). With `minimal` (a build
    that downloads no bytes), a file whose bytes the store lacks is not written: the folder
    keeps it when it holds those very bytes already (a file its manifest names, intact), else
    it is not there (an older file at its place is removed); `Sync.remote` lists them."""
    remote: dict[str, Output] | None = {} if minimal else None
    files = desired_files(store, results, remote)
    if owner is not None:
        sync = _sync(store, owner.folder, files, prune, owner, remote or {})
        owner.tell_replaced()
        return sync
    with Confined(folder, heal=True) as out:
        return _sync(store, out, files, prune, None, remote or {})


def _stored(store: Store, out: Output) -> bool:
    """Whether the store holds every blob of an output (a tree's files, a file's parts)."""
    if not store.cas.has(out.digest):
        return False
    entries = store.cas.tree_entries(out.digest) if out.type == "tree" else []
    return entries is not None and all(store.cas.has(e["digest"]) for e in entries)


def _sync(store: Store, out: Confined, files: dict[str, FileSpec], prune: bool,
          owner: Owner | None, remote: dict[str, Output]) -> Sync:
    old = parse_manifest(out.read(MANIFEST, MAX_MANIFEST_BYTES))
    sync = Sync()
    held = {rel: o for rel, o in remote.items() if o.type == "blob" and old.get(rel) == o.digest}
    files = {**files, **{rel: (o.digest, o.size, False, "") for rel, o in held.items()}}
    todo = _stale(store, out, files, old, sync)
    lost = {rel for rel, _ in todo if rel in held}  # changed since: not written (no bytes)
    todo = [item for item in todo if item[0] not in lost]
    files = {rel: spec for rel, spec in files.items() if rel not in lost}
    sync.damaged = [rel for rel in sync.damaged if rel not in lost]
    sync.remote = {rel: o.size for rel, o in remote.items() if rel not in held or rel in lost}
    gone = sorted(set(old) - set(files)) if prune else []
    if owner is not None and (todo or gone):
        owner.writing()
    missing = _write_files(store, out, todo)
    if missing:
        raise MissingContent(f"the content of {missing[0]} is missing from the store"
                             + (f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""),
                             hint="build again: its action runs again")
    sync.written = len(todo)
    keep = {rel: spec[0] for rel, spec in files.items()}
    if not prune:
        keep = {**old, **keep}
    for rel in gone:
        _check_rel(rel)
        out.unlink(rel)  # through the folder: a link on the way is never followed
        out.remove_empty_folders(rel)
        sync.removed += 1
    held = out.lstat(MANIFEST)
    if sync.written or sync.removed or held is None or not stat.S_ISREG(held.st_mode):
        data = dict(sorted(keep.items()))
        out.write(MANIFEST, json.dumps(data, indent=1).encode())
    sync.replaced = [rel for rel, _ in out.replaced]
    below = tuple(f"{rel}/" for rel in sync.replaced)  # their files are told with them
    sync.damaged = [rel for rel in sync.damaged if not rel.startswith(below)]
    return sync


def _stale(store: Store, out: Confined, files: dict[str, FileSpec], old: dict[str, str],
           sync: Sync) -> list[tuple[str, FileSpec]]:
    """The files to write: new or changed in the manifest, or not holding the bytes it names
    (checked through the stat cache: only files whose identity changed are hashed). A
    foreign entry at a file's place is written over (`Confined` says so), not "damaged"."""
    root = str(out.path.resolve())
    todo = []
    for rel, spec in files.items():
        if old.get(rel) != spec[0]:
            todo.append((rel, spec))
            continue
        try:
            found = _digest(store, out, rel, f"{root}/{rel}")
        except OSError:
            found = ""
        if found == spec[0]:
            sync.unchanged += 1
            continue
        todo.append((rel, spec))
        if found is not None:
            sync.damaged.append(rel)
    return todo


def _digest(store: Store, out: Confined, rel: str, key: str) -> str | None:
    """The digest of the file `rel` ("" when missing, None when the entry is not a regular
    file), from the stat cache while its identity is unchanged; read through the folder."""
    st = out.lstat(rel)
    if st is None:
        return ""
    if not stat.S_ISREG(st.st_mode):
        return None
    found = store.files.known(key, "content", st)
    if found is not None:
        return found
    fd = out.open_file(rel)
    if fd is None:
        return ""
    digest = hashlib.sha256()
    with os.fdopen(fd, "rb") as fh:
        st = os.fstat(fh.fileno())
        while chunk := fh.read(1 << 20):
            digest.update(chunk)
    store.files.hashed += 1
    store.files.remember(key, "content", st, digest.hexdigest())
    return digest.hexdigest()


def _write_files(store: Store, out: Confined, todo: list[tuple[str, FileSpec]]) -> list[str]:
    """Write files from the store, each by its name in its open folder; several at once when
    there is much to write (reading, decompressing, verifying and writing release the GIL: a
    fresh checkout fed by a remote cache writes its whole output folder). Returns the files
    whose blobs are missing."""
    def write(item: tuple[str, FileSpec]) -> str | None:
        rel, (digest, _, executable, parts) = item
        where, dest = out.place(rel), out.path / rel
        if parts:
            manifest = store.cas.get(parts)
            layout = None if manifest is None else parse_layout(manifest)
            done = layout is not None and write_file(store.cas, layout, dest, dir_fd=where)
        else:
            done = store.cas.materialize(digest, dest, executable=executable, dir_fd=where)
        return None if done else rel

    if len(todo) < 2 or sum(max(spec[1], 0) for _, spec in todo) < PARALLEL_BYTES:
        return [rel for rel in map(write, todo) if rel is not None]
    import concurrent.futures as cf

    with cf.ThreadPoolExecutor(WRITERS, thread_name_prefix="udo-build-out") as pool:
        return [rel for rel in pool.map(write, todo) if rel is not None]


def download_mode(given: str | None, dry_run: bool, sharded: bool) -> str:
    """What a build downloads from the remote (`--download`): as given, else "minimal" for a
    dry run (`--check`) and a shard of CI (neither writes an output folder), else "outputs"."""
    return given or ("minimal" if dry_run or sharded else "outputs")


def left_in_remote(store: Store, mode: str, states: Iterable[Any]) -> dict[str, Any] | None:
    """What a build with a remote tier left there only (None without one, or with "all"):
    the actions whose outputs the store lacks, those outputs' bytes (a tree's: its
    manifest's), and the published files among them (the output folder has none of them
    unless it held those bytes already)."""
    if store.remote is None or mode == "all":
        return None
    actions, size, files = 0, 0, []
    for state in states:
        result = state.result
        if result is None:
            continue
        lacking = {name for name, out in result.outputs.items() if not _stored(store, out)}
        if lacking:
            actions += 1
            size += sum(result.outputs[name].size for name in lacking)
            files += [rel for rel, name in state.action.published(result).items()
                      if name in lacking]
    return {"mode": mode, "remote_only_actions": actions, "remote_only_bytes": size,
            "files_not_written": sorted(files)}


def _check_rel(rel: str) -> None:
    if not safe_relpath(rel) or rel.startswith((".udo-build", TMP_PREFIX)):
        raise UserError(f"an action published to an unsafe path: {rel!r}",
                        hint="outputs stay inside the output folder")


def check_outside_store(folder: Path, store: Path) -> None:
    """Refuse an output folder in the store (gc would take its files for the store's own)."""
    out, root = folder.resolve(), store.resolve()
    if out == root or root in out.parents:
        raise UserError("the output folder is inside the store", file=folder,
                        hint=f"choose an output folder outside {store} (--out DIR)")
