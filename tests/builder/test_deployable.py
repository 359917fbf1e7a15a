"""The deployable bundle holds no second copy of a record: it is a file of parts sharing the
prepare steps' blobs, one ordinary bundle file in the output folder, read part by part by a run,
and mended like any other artifact."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from udo_build.builder.actions import ActionContext, ActionInput
from udo_build.ir.bundle import load_bundle, read_bundle
from udo_build.store import Store
from udo_build.store.parts import parse_layout

from .test_main_job import Ready


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Ready, dict[str, Any]]:
    ready = Ready(tmp_path_factory.mktemp("deployable"), "softplus.yaml")
    summary, _ = ready.build()
    return ready, summary


def _result(ready: Ready, summary: dict[str, Any], action: str) -> Any:
    key = next(a["key"] for a in summary["actions"] if a["id"] == action)
    result = Store(ready.root / "store").ac.get(key)
    assert result is not None
    return result


def test_records_are_stored_once_and_shared_by_the_deployable(built) -> None:  # type: ignore[no-untyped-def]
    ready, summary = built
    store = Store(ready.root / "store")
    records = {_result(ready, summary, a["id"]).outputs["record"].digest
               for a in summary["actions"] if a["kind"] == "prepare"}
    out = _result(ready, summary, "assemble").outputs["bundle"]
    layout = parse_layout(store.cas.get(out.digest) or b"")
    assert layout is not None and out.type == "tree"
    shared = {p.digest for p in layout.parts[1:]}
    assert shared == records  # every record is a part, as the prepare step stored it
    deploy = ready.root / "out/model/net_deploy.udb"
    assert deploy.stat().st_size == layout.size
    head = store.cas.get(layout.parts[0].digest) or b""
    assert len(head) < layout.size - sum(p.size for p in layout.parts[1:]) + 64 * len(shared)
    sizes = [path.stat().st_size for _, path in store.cas.iter_blobs()]
    assert max(sizes) < layout.size / 2  # no blob holds the records a second time
    bundle = load_bundle(deploy)  # an ordinary bundle file, every record inside
    for row in bundle.meta["records"]:
        data = bundle.parts[row["part"]]
        assert any(d.startswith(row["part"][8:24]) for d in records)
        assert len(data) == row["size"]


def test_a_run_reads_the_head_and_its_record_only(built) -> None:  # type: ignore[no-untyped-def]
    ready, summary = built
    store = Store(ready.root / "store")
    out = _result(ready, summary, "assemble").outputs["bundle"]
    read: list[str] = []
    get = store.cas.get
    store.cas.get = lambda d: read.append(d) or get(d)  # type: ignore[method-assign]
    ctx = ActionContext({}, {"deployable": ActionInput(out.digest, "tree")}, store.cas)
    try:
        bundle = read_bundle(ctx.input_reader("deployable"), "deployable")
        layout = parse_layout(get(out.digest) or b"")
        assert layout is not None
        assert read == [out.digest, layout.parts[0].digest]  # the manifest, the head
        row = bundle.meta["records"][3]
        bundle.parts[row["part"]]
        assert read[2:] == [p.digest for p in layout.parts if p.digest.startswith(
            row["part"][8:24])]
    finally:
        ctx.cleanup()


def test_a_lost_record_is_built_again_and_the_file_mended(tmp_path: Path) -> None:
    ready = Ready(tmp_path, "softplus.yaml")
    summary, _ = ready.build()
    store = Store(ready.root / "store")
    victim = next(a["id"] for a in summary["actions"] if a["kind"] == "prepare")
    digest = _result(ready, summary, victim).outputs["record"].digest
    path = store.cas.path_of(digest)
    assert path is not None
    path.unlink()
    deploy = ready.root / "out/model/net_deploy.udb"
    want = deploy.read_bytes()
    deploy.chmod(0o644)
    deploy.write_bytes(want[:-1] + bytes([want[-1] ^ 1]))
    again, _ = ready.build()
    built = [a["id"] for a in again["actions"] if a["status"] == "built"]
    assert victim in built and "assemble" not in built  # the same record, the same bundle
    assert deploy.read_bytes() == want
    manifest = json.loads((ready.root / "out/.udo-build-manifest.json").read_text())
    import hashlib

    assert manifest["model/net_deploy.udb"] == hashlib.sha256(want).hexdigest()
