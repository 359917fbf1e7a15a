"""bench/faults.py's own pieces, so that they cannot rot between its runs (CI runs its --smoke
subset, .ci/run): every crafted file is made (a crafted bundle is well laid out, and refused
for its graph only), and a bad server knows whether a build asked it."""

from __future__ import annotations

import http.client
import importlib.util
import json
import sys
import urllib.error
import urllib.request
from pathlib import Path
from types import ModuleType

import pytest

from udo_build.errors import UserError
from udo_build.ir.bundle import read_bundle

BENCH = Path(__file__).resolve().parents[2] / "bench"


@pytest.fixture(scope="module")
def faults() -> ModuleType:
    spec = importlib.util.spec_from_file_location("bench_faults", BENCH / "faults.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_a_crafted_bundle_is_laid_out_well_and_refused_for_its_graph(faults: ModuleType) -> None:
    with pytest.raises(UserError) as refused:
        read_bundle(faults._bundle_with(b"{not json"))
    assert "graph" in str(refused.value) and "magic" not in str(refused.value)


def test_every_crafted_case_is_made(faults: ModuleType, tmp_path: Path) -> None:
    ref_out = tmp_path / "ref-out"
    (ref_out / "model").mkdir(parents=True)
    (ref_out / "model" / "net.udb").write_bytes(faults._bundle_with(b"{}"))
    (tmp_path / "crafted").mkdir()
    cases = faults.crafted_cases(tmp_path / "crafted", ref_out)
    names = [name for name, _ in cases]
    assert len(names) == len(set(names)) == 18
    assert {n.split(":")[0] for n in names} == {"recipe", "op config", "onnx", "bundle",
                                                "input list", "record"}
    for _, args in cases:
        files = [a for a in args if a.startswith(str(tmp_path / "crafted"))]
        assert all(Path(f).exists() or f.endswith((".udb", "res")) for f in files)


def test_a_bad_server_knows_whether_a_build_asked_it(faults: ModuleType) -> None:
    server = faults.BadServer("die")
    try:
        assert not server.contacted(faults.Result(0, 0.0, "{}", "", 0.0))
        with pytest.raises((urllib.error.URLError, http.client.IncompleteRead)):  # it dies
            urllib.request.urlopen(server.url + "/ac/" + "0" * 64, timeout=5).read()
        assert server.contacted(faults.Result(0, 0.0, "{}", "", 0.0))
    finally:
        server.close()
    refused = faults.BadServer("refuse")
    said = {"remote": {"warnings": ["remote cache unreachable (connection refused); building "
                                    "locally"]}}
    assert refused.contacted(faults.Result(0, 0.0, json.dumps(said), "", 0.0))
    assert not refused.contacted(faults.Result(0, 0.0, json.dumps({"remote": None}), "", 0.0))
