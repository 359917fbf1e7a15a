"""Generating packages in tests: the real `opdef` and `package` action kinds, run directly on
source files (no engine, no store), and the syntax check with g++ over the stand-in headers."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from udo_build.builder.actions import ActionContext, FileOfParts, Tree, get_kind, load_kinds
from udo_build.store.parts import Part

from ..conftest import EXAMPLES

DATA = Path(__file__).parent / "data"
SOFTPLUS = EXAMPLES / "softplus/ops/softplus.xml"
SWISH = EXAMPLES / "softplus/ops/swish.json"
VENDOR = DATA / "vendor_ops.xml"
STANDIN = Path(__file__).resolve().parents[2] / "udo_build/package/standin"


def run_kind(kind: str, params: dict[str, object], sources: dict[str, Path]) -> dict[str, object]:
    load_kinds()
    found = get_kind(kind)
    assert found is not None, f"action kind {kind} is not registered"
    import tempfile

    from udo_build.store import Store

    folder = tempfile.TemporaryDirectory(prefix="udo-build-kind-")
    cas = Store(folder.name).cas
    ctx = ActionContext.of_files(params, sources, cas)
    try:
        produced = found.run(ctx)
        outputs: dict[str, object] = {}
        for name, value in produced.outputs.items():
            if isinstance(value, Tree):
                outputs[name] = {p.relative_to(value.path).as_posix(): p.read_bytes()
                                 for p in sorted(value.path.rglob("*")) if p.is_file()}
            elif isinstance(value, FileOfParts):  # the file its parts make
                whole = bytearray(value.size)
                for offset, segment in value.segments:
                    data = cas.get(segment.digest) if isinstance(segment, Part) \
                        else bytes(segment)
                    whole[offset:offset + len(data)] = data
                outputs[name] = bytes(whole)
            else:
                outputs[name] = value
        outputs["_publish"] = produced.publish
        return outputs
    finally:
        ctx.cleanup()
        folder.cleanup()


def package_files(tmp: Path, configs: Sequence[Path], backend: str, archs: Sequence[str] = (),
                  with_kernels: Sequence[bool] | None = None) -> dict[str, bytes]:
    """The files of the `backend` package of `configs`, as the package action makes them."""
    return package_outputs(tmp, configs, backend, archs, with_kernels)["package"]


def package_outputs(tmp: Path, configs: Sequence[Path], backend: str, archs: Sequence[str] = (),
                    with_kernels: Sequence[bool] | None = None) -> dict[str, dict[str, bytes]]:
    """Every package the package action makes of `configs` for `backend`, by output name
    (`package`, then `package:<Name>` for each further package the configs define)."""
    sources = {f"config[{i}]": Path(p) for i, p in enumerate(configs)}
    opdef = run_kind("opdef", {"package_name": None, "domain": None, "version": None,
                               "backends": [backend]}, sources)
    tmp.mkdir(parents=True, exist_ok=True)
    (tmp / "opdef.json").write_bytes(opdef[backend])  # type: ignore[arg-type]
    (tmp / "origins.json").write_bytes(opdef["origins"])  # type: ignore[arg-type]
    params = {"backend": backend, "archs": list(archs),
              "with_kernels": list(with_kernels or [False] * len(configs)),
              "config_names": [Path(p).name for p in configs]}
    out = run_kind("package", params, {**sources, "opdef": tmp / "opdef.json",
                                       "origins": tmp / "origins.json"})
    return out  # type: ignore[return-value]


def write(files: dict[str, bytes], folder: Path) -> Path:
    for rel, data in files.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_bytes(data)
    return folder


def need_gxx() -> str:
    """g++, or a skip (which UDO_BUILD_NO_SKIP=1, as in CI, turns into a failure)."""
    found = shutil.which("g++")
    if found is None:
        pytest.skip("g++ is not installed (.ci/run installs it)")
    return found


def syntax_check(folder: Path) -> subprocess.Popen[str]:
    """g++ -fsyntax-only over every C++ source below `folder` (one process, started)."""
    sources = sorted(str(p) for p in folder.rglob("*.cpp"))
    return subprocess.Popen(
        [need_gxx(), "-std=c++17", "-fsyntax-only", "-Wall", "-Wextra", "-Werror",
         f"-I{STANDIN / 'include'}", f"-I{folder / 'include'}", *sources],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "LC_ALL": "C"})


def opencl_check(folder: Path) -> subprocess.Popen[str] | None:
    """The OpenCL C kernels below `folder` checked as C11 with the stand-in built-ins."""
    kernels = sorted(str(p) for p in folder.rglob("*.cl"))
    if not kernels:
        return None
    return subprocess.Popen(
        [need_gxx(), "-x", "c", "-std=c11", "-fsyntax-only", "-Wall", "-Werror",
         "-include", str(STANDIN / "opencl/opencl_c.h"), *kernels],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env={**os.environ, "LC_ALL": "C"})
