"""Loading kernels files (udo_build.kernels.load): the module a file runs as is named from what
the build's keys name (the op package, or the file's bytes), never from its path or hash(), so
records that name a kernel as `module.function` are the same bytes wherever the project lives;
a kernels file's own errors are the user's step failing, with the line."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from udo_build.errors import StepFailed, UserError
from udo_build.kernels.load import load_kernels, module_name, packages_for

from ..conftest import EXAMPLES, REPO

KERNELS = EXAMPLES / "softplus" / "ops" / "kernels.py"


def _bundle_using(package: str, op: str) -> SimpleNamespace:
    node = SimpleNamespace(op=op, package=package)
    return SimpleNamespace(opdefs={"name": package},
                           model=SimpleNamespace(graph=SimpleNamespace(nodes=[node])))


def _describe(packages: dict) -> str:  # type: ignore[type-arg]
    (package,) = packages.values()
    return package.select("Softplus", ["float32"]).describe()


def test_the_module_is_named_after_the_package_wherever_the_file_lives(tmp_path: Path) -> None:
    bundle = _bundle_using("SoftplusPackage", "Softplus")
    here = _describe(packages_for(bundle, [KERNELS]))
    elsewhere = tmp_path / "a" / "much" / "longer" / "path" / "kernels.py"
    elsewhere.parent.mkdir(parents=True)
    shutil.copy(KERNELS, elsewhere)
    assert _describe(packages_for(bundle, [elsewhere])) == here
    assert here.startswith("udo_build_kernels_SoftplusPackage.softplus (")
    elsewhere.write_text(elsewhere.read_text() + "\n# tuned\n")  # a comment: the same record
    assert _describe(packages_for(bundle, [elsewhere])) == here


def test_on_its_own_a_file_runs_as_a_module_named_after_its_bytes(tmp_path: Path) -> None:
    copy = tmp_path / "k.py"
    shutil.copy(KERNELS, copy)
    (package,) = load_kernels(copy)
    fn = package.select("Softplus", ["float32"]).fn
    assert fn.__module__ == module_name(KERNELS.read_bytes())
    digest = hashlib.sha256(b"x = 1\n").hexdigest()
    assert module_name(b"x = 1\n") == "udo_build_kernels_" + digest[:16]
    assert not (tmp_path / "__pycache__").exists()  # nothing written beside the user's file
    assert load_kernels(copy, "mine")[0].select("Softplus", ["float32"]).fn.__module__ == "mine"


def test_the_name_does_not_depend_on_the_hash_seed(tmp_path: Path) -> None:
    code = ("import sys; from pathlib import Path; from udo_build.kernels.load import "
            "load_kernels; p = load_kernels(Path(sys.argv[1]))[0]; "
            "print(p.select('Softplus', ['float32']).describe())")
    seen = set()
    for seed in ("1", "2"):
        done = subprocess.run([sys.executable, "-c", code, str(KERNELS)], capture_output=True,
                              text=True, check=True, cwd=tmp_path,
                              env={"PYTHONPATH": str(REPO), "PYTHONHASHSEED": seed})
        seen.add(done.stdout)
    assert len(seen) == 1


@pytest.mark.parametrize("body, message", [
    ("from udo_build.kernels import OpPackage\n\nx = (\n", r"k\.py:3: importing it raised "
                                                            "SyntaxError"),
    ("import numpy\n\nraise RuntimeError('no')\n", r"k\.py:3: importing it raised RuntimeError"),
])
def test_a_kernels_file_that_fails_is_the_users_step_failing(tmp_path: Path, body: str,
                                                            message: str) -> None:
    path = tmp_path / "k.py"
    path.write_text(body)
    with pytest.raises(StepFailed, match=message):
        load_kernels(path)


def test_a_missing_or_empty_kernels_file_is_a_user_error(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="kernels file not found"):
        load_kernels(tmp_path / "nowhere.py")
    (tmp_path / "empty.py").write_text("x = 1\n")
    with pytest.raises(UserError, match="defines no OpPackage"):
        load_kernels(tmp_path / "empty.py")
