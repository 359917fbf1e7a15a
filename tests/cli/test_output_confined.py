"""The commands that write into a user's folder (`run --output-dir`, `package --out`, `export`,
`init`) write through it: a symbolic link or a named pipe planted in it is refused (exit 2, one
line naming it), never followed; nothing outside the folder is written."""

from __future__ import annotations

import io
import os
import shutil
from pathlib import Path

import numpy as np
import pytest

from udo_build.cli import main

from ..builder.test_confinement import snapshot
from .test_info_encodings import quantized_bundle

EXAMPLE = Path(__file__).parents[2] / "examples" / "softplus"


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err, env={})
    return code, out.getvalue(), err.getvalue()


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "victim.txt").write_text("not udo-build's")
    (folder / "y.raw").write_text("not udo-build's either")
    return folder


@pytest.fixture
def bundle(tmp_path: Path) -> tuple[Path, Path]:
    path = tmp_path / "q.udb"
    quantized_bundle(path)
    raw = tmp_path / "x.raw"
    raw.write_bytes(np.arange(48, dtype="<f4").tobytes())
    listing = tmp_path / "list.txt"
    listing.write_text(f"{raw}\n")
    return path, listing


def refused(code: int, err: str, names: str) -> None:
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    assert names in err and ("remove it" in err or "give a folder" in err), err


def run(bundle: tuple[Path, Path], out: Path) -> tuple[int, str, str]:
    return cli("run", str(bundle[0]), "--input-list", str(bundle[1]), "--output-dir", str(out))


def test_run_writes_its_results(bundle: tuple[Path, Path], tmp_path: Path) -> None:
    code, _, err = run(bundle, tmp_path / "res")
    assert code == 0, err
    assert sorted(p.name for p in (tmp_path / "res" / "Result_0").iterdir()) == ["y.npy", "y.raw"]


def test_run_output_dir_naming_a_file_is_a_user_error(bundle: tuple[Path, Path],
                                                      tmp_path: Path) -> None:
    (tmp_path / "file").write_text("mine")
    code, _, err = run(bundle, tmp_path / "file")
    refused(code, err, "file: this is a file, not a folder")
    assert (tmp_path / "file").read_text() == "mine"


@pytest.mark.parametrize("planted", ["Result_0", "Result_0/y.raw", "Result_0/y.npy"])
@pytest.mark.parametrize("kind", ["link", "pipe"])
def test_run_refuses_a_planted_entry(bundle: tuple[Path, Path], tmp_path: Path,
                                     outside: Path, planted: str, kind: str) -> None:
    out = tmp_path / "res"
    (out / "Result_0").mkdir(parents=True)
    place = out / planted
    if place.exists():
        place.rmdir()
    if kind == "link":
        place.symlink_to(outside if planted == "Result_0" else outside / "y.raw")
    else:
        os.mkfifo(place)
    before = snapshot(outside)
    code, _, err = run(bundle, out)
    what = "a symbolic link" if kind == "link" else "a named pipe"
    # the run writes each inference's results in its turn: the refusal names the inference
    refused(code, err, f"{planted}: inference 0 (line 1 of {bundle[1]}): {what} is where "
                       "udo-build writes a")
    assert snapshot(outside) == before


def test_export_refuses_a_link_at_its_file(bundle: tuple[Path, Path], tmp_path: Path,
                                           outside: Path) -> None:
    (tmp_path / "q.onnx").symlink_to(outside / "victim.txt")
    before = snapshot(outside)
    code, _, err = cli("export", str(bundle[0]), "--qdq", str(tmp_path / "q.onnx"))
    refused(code, err, "q.onnx: a symbolic link is where udo-build writes a file")
    assert snapshot(outside) == before
    code, _, err = cli("export", str(bundle[0]), "--qdq", str(tmp_path / "sub" / "q.onnx"))
    assert code == 0 and (tmp_path / "sub" / "q.onnx").stat().st_size > 0, err


def test_init_refuses_a_linked_folder(tmp_path: Path, outside: Path) -> None:
    (tmp_path / ".udo-build-root").touch()
    shutil.copy(EXAMPLE / "model" / "net.onnx", tmp_path / "net.onnx")
    (tmp_path / "ops").symlink_to(outside)
    before = snapshot(outside)
    code, _, err = cli("init", str(tmp_path / "net.onnx"), "--out", str(tmp_path))
    refused(code, err, "ops: a symbolic link is where udo-build writes a folder")
    assert snapshot(outside) == before and not (tmp_path / "net.yaml").exists()


@pytest.mark.parametrize("planted", ["HTP", "HTP/SoftplusPackage/src",
                                     "HTP/SoftplusPackage/.udo-build-package.json"])
def test_package_refuses_a_planted_link(tmp_path: Path, outside: Path, planted: str) -> None:
    argv = ["package", str(EXAMPLE / "ops" / "softplus.xml"), "--backend", "HTP", "--out",
            str(tmp_path / "pkgs"), "--store", str(tmp_path / "store")]
    code, _, err = cli(*argv)
    assert code == 0, err
    place = tmp_path / "pkgs" / planted
    shutil.rmtree(place) if place.is_dir() else place.unlink()
    place.symlink_to(outside if place.suffix != ".json" else outside / "victim.txt")
    before = snapshot(outside)
    code, _, err = cli(*argv)
    refused(code, err, f"{planted}: a symbolic link is where udo-build writes a")
    assert snapshot(outside) == before
