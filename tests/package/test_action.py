"""The `package` action through the engine: packages of a recipe land in the output folder,
a rebuild is a cache hit, a changed default regenerates the packages and reverting it gives the
same trees again, a renamed config regenerates only the packages."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

from udo_build.cli import main
from udo_build.store import Store

from ..conftest import EXAMPLES

RECIPE = """\
recipe: 1
name: packages
package:
  ops:
    - {config: ops/softplus.xml}
    - {config: ops/swish.json, kernels: ops/kernels.py}
  backends: [CPU, DSP, HTP]
  dsp_arch: [v66, v73]
"""


def _project(tmp_path: Path) -> Path:
    shutil.copytree(EXAMPLES / "softplus/ops", tmp_path / "ops")
    (tmp_path / ".udo-build-root").write_text("")
    (tmp_path / "recipe.yaml").write_text(RECIPE)
    return tmp_path


def _build(root: Path) -> dict[str, Any]:
    out, err = io.StringIO(), io.StringIO()
    code = main(["build", str(root / "recipe.yaml"), "--store", str(root / "store"), "--out",
                 str(root / "out"), "-j", "1", "--json"], stdout=out, stderr=err, env={})
    assert code == 0, err.getvalue()
    return json.loads(out.getvalue())


def _built(summary: dict[str, Any]) -> list[str]:
    return [a["id"] for a in summary["actions"] if a["status"] == "built"]


def _trees(root: Path, summary: dict[str, Any]) -> dict[str, str]:
    store = Store(root / "store")
    found = {}
    for action in summary["actions"]:
        if action["kind"] == "package":
            result = store.ac.get(action["key"])
            assert result is not None
            found[action["id"]] = result.outputs["package"].digest
    store.close()
    return found


def test_recipe_packages_cache_and_regenerate(tmp_path: Path) -> None:
    root = _project(tmp_path)
    first = _build(root)
    assert _built(first) == ["opdef", "package:CPU", "package:DSP", "package:HTP"]
    out = root / "out/packages"
    assert sorted(p.relative_to(out).as_posix() for p in out.glob("*/*")) == [
        "CPU/SoftplusPackage", "DSP/SoftplusPackage", "HTP/SoftplusPackage"]
    stubs = {(out / b / "SoftplusPackage/emulator/SoftplusPackage_kernels.py").read_bytes()
             for b in ("CPU", "DSP", "HTP")}
    assert len(stubs) == 1 and b'@package.op("Swish"' not in next(iter(stubs))
    assert (out / "DSP/SoftplusPackage/src/dsp_v65_v66/ops/Swish.cpp").is_file()
    trees = _trees(root, first)

    again = _build(root)
    assert (again["executed"], again["hit_rate"]) == (0, 1.0)

    xml = root / "ops/softplus.xml"
    original = xml.read_text()
    xml.write_text(original.replace("<Default>1.0</Default>", "<Default>2.5</Default>"))
    changed = _build(root)
    assert _built(changed) == ["opdef", "package:CPU", "package:DSP", "package:HTP"]
    assert all(trees[a] != d for a, d in _trees(root, changed).items())
    assert "floatValue = 2.5f;" in (out / "HTP/SoftplusPackage/src/ops/Softplus.cpp").read_text()

    xml.write_text(original)
    reverted = _build(root)
    assert reverted["executed"] == 0 and _trees(root, reverted) == trees
    assert "floatValue = 1.0f;" in (out / "HTP/SoftplusPackage/src/ops/Softplus.cpp").read_text()


def test_a_renamed_config_regenerates_only_the_packages(tmp_path: Path) -> None:
    root = _project(tmp_path)
    _build(root)
    (root / "ops/swish.json").rename(root / "ops/swish_op.json")
    recipe = root / "recipe.yaml"
    recipe.write_text(recipe.read_text().replace("ops/swish.json", "ops/swish_op.json"))
    summary = _build(root)
    assert _built(summary) == ["package:CPU", "package:DSP", "package:HTP"]
    config = root / "out/packages/CPU/SoftplusPackage/config"
    assert sorted(p.name for p in config.iterdir()) == ["softplus.xml", "swish_op.json"]
