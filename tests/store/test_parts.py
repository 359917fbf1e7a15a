"""Files made of stored blobs: the layout's manifest, materializing, range reads, and refusal of
missing or corrupt parts."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

import pytest

from udo_build.store import Store
from udo_build.store.cas import parse_tree
from udo_build.store.parts import (
    MissingPart,
    Part,
    PartsReader,
    layout_of,
    parse_layout,
    write_file,
)


def _file(store: Store) -> tuple[bytes, object]:
    """A 3-segment file: literal head, a shared blob at 4096, another at 10000; zeros between
    and after."""
    shared = os.urandom(3000)
    other = b"x" * 500
    a, b = store.cas.put(shared), store.cas.put(other)
    layout = layout_of([(0, b"HEAD" * 10), (4096, Part(0, a.digest, a.size)),
                        (10000, Part(0, b.digest, b.size))], 10600, store.cas)
    want = bytearray(10600)
    want[0:40] = b"HEAD" * 10
    want[4096:7096] = shared
    want[10000:10500] = other
    return bytes(want), layout


def test_layout_round_trips_and_materializes_the_bytes(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    want, layout = _file(store)
    manifest = layout.manifest()  # type: ignore[attr-defined]
    assert parse_layout(manifest) == layout
    assert parse_tree(manifest) is not None  # a tree to the store's checks, gc and remotes
    assert layout.sha256 == hashlib.sha256(want).hexdigest()  # type: ignore[attr-defined]
    dest = tmp_path / "out" / "file.udb"
    dest.parent.mkdir()
    assert write_file(store.cas, layout, dest)  # type: ignore[arg-type]
    assert dest.read_bytes() == want and dest.stat().st_mode & 0o222 == 0  # read-only


def test_range_reads_touch_only_the_parts_they_cover(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    want, layout = _file(store)
    reader = PartsReader(store.cas, layout)  # type: ignore[arg-type]
    for offset, size in [(0, 40), (4096, 3000), (4100, 10), (30, 5000), (9000, 1600),
                         (10550, 100)]:
        assert reader.read(offset, size) == want[offset:offset + size]
    read: list[str] = []
    get = store.cas.get
    store.cas.get = lambda d: read.append(d) or get(d)  # type: ignore[method-assign]
    fresh = PartsReader(store.cas, layout)  # type: ignore[arg-type]
    fresh.read(10000, 500)
    assert read == [layout.parts[2].digest]  # type: ignore[attr-defined]


def test_a_missing_or_corrupt_part_writes_nothing(tmp_path: Path) -> None:
    store = Store(tmp_path / "store")
    _, layout = _file(store)
    part = layout.parts[1]  # type: ignore[attr-defined]
    path = store.cas.path_of(part.digest)
    assert path is not None
    path.chmod(0o644)
    data = bytearray(path.read_bytes())
    data[7] ^= 1
    path.write_bytes(bytes(data))
    dest = tmp_path / "file.udb"
    assert not write_file(store.cas, layout, dest)  # type: ignore[arg-type]
    assert not dest.exists() and not list(tmp_path.glob(".tmp-*"))
    assert store.cas.path_of(part.digest) is None  # quarantined: its producer runs again
    with pytest.raises(MissingPart):
        PartsReader(store.cas, layout).read(4096, 10)  # type: ignore[arg-type]


@pytest.mark.parametrize("damage", [
    lambda doc: doc["entries"][1].update(offset=10),  # overlaps the head
    lambda doc: doc["file"].update(size=100),  # parts past the end
    lambda doc: doc["file"].update(sha256="zz"),
    lambda doc: doc["entries"][0].update(offset=-1),
    lambda doc: doc.pop("file"),  # a plain tree
])
def test_inconsistent_layouts_are_not_files(tmp_path: Path, damage) -> None:  # type: ignore[no-untyped-def]
    store = Store(tmp_path / "store")
    _, layout = _file(store)
    doc = json.loads(layout.manifest())  # type: ignore[attr-defined]
    damage(doc)
    assert parse_layout(json.dumps(doc).encode()) is None
