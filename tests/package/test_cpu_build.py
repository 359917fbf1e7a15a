"""`udo-build build-cpu`: a generated CPU package, with a C++ op body the test writes, compiles on
the host into a library the emulator runs in place of the numpy kernel; it matches the numpy
kernel; an op left unwritten keeps numpy; a compile error names the file, line and g++'s words."""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from udo_build.cli import main
from udo_build.errors import StepFailed, UserError
from udo_build.kernels.load import load_kernels, packages_for
from udo_build.kernels.native import load_library, with_native
from udo_build.package.cpu_build import build_cpu_library, shim_source

from ..conftest import EXAMPLES
from .helpers import SOFTPLUS, SWISH

KERNELS = EXAMPLES / "softplus/ops/kernels.py"
MARKER = "  // udo-build: write the Softplus kernel here\n"
BODY = """\
  uint32_t n = 1;
  for (uint32_t i = 0; i < x->rank; ++i) n *= x->currentDimensions[i];
  const float* in = static_cast<const float*>(x->data);
  float* out = static_cast<float*>(y->data);
  for (uint32_t i = 0; i < n; ++i) out[i] = softplusOf(in[i], params.beta);
  return QNN_SUCCESS;
"""
# a source the user adds: build-cpu compiles every source under src/, as the Makefiles do
HELPER = """\
#include <cmath>

float softplusOf(float x, float beta) {
  const float bx = beta * x;
  return (std::fmax(bx, 0.0f) + std::log1p(std::exp(-std::fabs(bx)))) / beta;
}
"""


def cli(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    code = main(list(argv), stdout=out, stderr=err, env={})
    return code, out.getvalue(), err.getvalue()


def write_body(folder: Path, body: str) -> None:
    """Replace the Softplus skeleton's placeholder (marker to its failing return) with `body`."""
    source = folder / "src/ops/Softplus.cpp"
    text = source.read_text()
    start = text.index(MARKER)
    end = text.index("  return QNN_OP_PACKAGE_ERROR_GENERAL;\n", start)
    text = text[:start] + body + text[end + len("  return QNN_OP_PACKAGE_ERROR_GENERAL;\n"):]
    source.write_text(text.replace("namespace softplus_op {",
                                   "float softplusOf(float x, float beta);\n\n"
                                   "namespace softplus_op {"))


@pytest.fixture(scope="module")
def generated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The CPU package of the Softplus example, as `udo-build package` writes it."""
    root = tmp_path_factory.mktemp("cpu")
    code, _, err = cli("package", str(SOFTPLUS), str(SWISH), "--backend", "CPU",
                       "--out", str(root / "out"), "--store", str(root / "store"))
    assert code == 0, err
    (folder,) = [p.parent for p in (root / "out").glob("**/package.json")
                 if json.loads(p.read_text())["backend"] == "CPU"]
    return folder


@pytest.fixture(scope="module")
def library(generated: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("filled") / generated.name
    shutil.copytree(generated, folder)
    write_body(folder, BODY)
    (folder / "src/utils").mkdir()
    (folder / "src/utils/SoftplusMath.cpp").write_text(HELPER)
    code, out, err = cli("build-cpu", str(folder), "--json")
    assert code == 0, err
    doc = json.loads(out)
    assert "src/utils/SoftplusMath.cpp" in doc["command"]  # picked up by pattern
    assert (doc["ops"], doc["unwritten"]) == (["Softplus"], ["Swish"])
    assert "no C++ body written yet: Swish" in err
    return Path(doc["library"]).resolve()


def test_the_compiled_op_matches_its_numpy_kernel(library: Path) -> None:
    numpy_pkg = load_kernels(KERNELS)[0]
    native = with_native(numpy_pkg, library, None)
    impl = native.select("Softplus", ["float32"])
    assert impl.describe().startswith("udo_build_native_")  # the C++, not the numpy kernel
    assert impl.describe().endswith(".Softplus (generic, FAST)")
    reference = numpy_pkg.select("Softplus", ["float32"]).fn
    rng = np.random.default_rng(7)
    for shape, beta in (((1, 8, 32, 32), 1.0), ((3, 5), 2.5), ((7,), 0.5)):
        x = (rng.standard_normal(shape) * 8).astype(np.float32)
        got, want = impl.fn(x, beta=beta), reference(x, beta=beta)
        assert got.shape == want.shape and got.dtype == want.dtype == np.float32
        assert np.max(np.abs(got - want) / np.abs(want)) < 1e-6, (shape, beta)
    # the unwritten op keeps its numpy kernel; parameter orders and rules carry over
    assert native.select("Swish", ["float32"]).fn is numpy_pkg.select("Swish", ["float32"]).fn
    assert native.ops() == numpy_pkg.ops()


def test_a_run_through_the_library(library: Path, tmp_path: Path) -> None:
    """`run --kernels kernels.py --kernels LIB.so`: the float model runs with the C++ Softplus."""
    bundle = tmp_path / "net.udb"
    code, _, err = cli("convert", str(EXAMPLES / "softplus/model/net.onnx"), "--opdef",
                       str(SOFTPLUS), "--opdef", str(SWISH), "--out", str(bundle))
    assert code == 0, err
    listing = EXAMPLES / "softplus/data/test.txt"
    results = {}
    for name, extra in (("numpy", []), ("native", ["--kernels", str(library)])):
        code, _, err = cli("run", str(bundle), "--input-list", str(listing), "--output-dir",
                           str(tmp_path / name), "--kernels", str(KERNELS), *extra)
        assert code == 0, err
        results[name] = np.load(tmp_path / name / "Result_0/logits.npy")
    np.testing.assert_allclose(results["native"], results["numpy"], rtol=1e-5, atol=1e-6)


def test_packages_for_takes_a_library_among_the_kernels_files(library: Path) -> None:
    class Bundle:  # what packages_for reads of a bundle: its op package and the used ops
        opdefs = {"name": "SoftplusPackage", "ops": []}

        class model:  # noqa: N801
            class graph:  # noqa: N801
                nodes = [type("Node", (), {"op": "Softplus", "package": "SoftplusPackage"})]

    (package,) = packages_for(Bundle, [KERNELS, library]).values()
    assert package.select("Softplus", ["float32"]).fn.__module__.startswith("udo_build_native_")


def test_a_failing_op_is_a_failed_step_naming_it(generated: Path, tmp_path: Path) -> None:
    folder = tmp_path / "failing"
    shutil.copytree(generated, folder)
    write_body(folder, "  (void)x; (void)y; (void)params;\n  return 7;\n")
    lib = build_cpu_library(folder)
    native = with_native(load_kernels(KERNELS)[0], lib.path, None)
    with pytest.raises(StepFailed, match=r"::Softplus \(native, lib\w+\.so\) failed with error 7"):
        native.select("Softplus", ["float32"]).fn(np.ones(4, np.float32), beta=1.0)


def test_a_compile_error_names_the_file_line_and_gcc_message(generated: Path,
                                                             tmp_path: Path) -> None:
    folder = tmp_path / generated.name
    shutil.copytree(generated, folder)
    write_body(folder, "  return undeclared_thing;\n")
    code, _, err = cli("build-cpu", str(folder))
    assert code == 2
    assert "src/ops/Softplus.cpp:" in err
    assert "g++: 'undeclared_thing' was not declared in this scope" in err
    with pytest.raises(UserError) as caught:
        build_cpu_library(folder)
    problem = caught.value.problem
    assert Path(problem.file or "").name == "Softplus.cpp" and problem.line


def test_nothing_written_is_refused(generated: Path) -> None:
    code, _, err = cli("build-cpu", str(generated))
    assert code == 2
    assert "no op of" in err and "has its C++ body written yet" in err


def test_a_library_must_be_one(tmp_path: Path) -> None:
    fake = tmp_path / "libnot.so"
    fake.write_bytes(b"not an ELF file")
    with pytest.raises(UserError, match="not a native kernels library"):
        load_library(fake)


def test_the_shim_offers_the_written_ops_through_the_package_interface() -> None:
    text = shim_source("Pkg", ["A", "B"])
    assert 'extern "C" Qnn_ErrorHandle_t PkgInterfaceProvider(' in text
    assert '    "A",\n    "B",\n' in text  # the ops it offers, and only those
    assert "interface.v1_4.createOpImpl(" in text and "interface.v1_4.freeOpImpl(" in text
    assert 'return "A,B";' in text


def test_a_recipe_runs_with_the_library_keyed_by_its_bytes(library: Path, tmp_path: Path) -> None:
    (tmp_path / ".udo-build-root").touch()
    for part in ("ops", "model", "data"):
        shutil.copytree(EXAMPLES / "softplus" / part, tmp_path / part)
    shutil.copy(library, tmp_path / "ops/libSoftplus.so")
    recipe = tmp_path / "r.yaml"
    recipe.write_text(RECIPE)
    store = str(tmp_path / "store")
    where = ("--store", store, "--out", str(tmp_path / "out"), "--json")
    code, out, err = cli("build", str(recipe), *where)
    assert code == 0, err
    built = {a["id"] for a in json.loads(out)["actions"] if a["status"] == "built"}
    assert {"run:smoke", "check:smoke", "native-check"} <= built  # the library is checked
    with (tmp_path / "ops/libSoftplus.so").open("ab") as f:  # another library: the run reruns
        f.write(b"\0")
    code, out, err = cli("build", str(recipe), *where)
    assert code == 0, err
    built = {a["id"] for a in json.loads(out)["actions"] if a["status"] == "built"}
    assert {"run:smoke", "native-check"} <= built and "convert" not in built


RECIPE = """\
recipe: 1
name: cpu-demo
package:
  ops:
    - {config: ops/softplus.xml, kernels: ops/kernels.py}
    - {config: ops/swish.json, kernels: ops/kernels.py}
  backends: [CPU]
  cpu_library: ops/libSoftplus.so
model:
  onnx: model/net.onnx
run:
  - {name: smoke, soc: sm8550, input_list: data/test.txt, precision: fp16,
     outputs: {tensors: [logits]}, check: {min_sqnr_db: 25}}
"""


def test_a_wrong_library_fails_the_build_though_its_run_passes(generated: Path,
                                                               tmp_path: Path) -> None:
    """The issue's case: a body off by up to 3.35 passes build-cpu and a run whose reference is
    the same library; the build's native check compares it with the numpy kernel and fails."""
    folder = tmp_path / "wrong" / generated.name
    shutil.copytree(generated, folder)
    write_body(folder, BODY.replace("softplusOf(in[i], params.beta)",
                                    "softplusOf(in[i], params.beta) + (in[i] > 0 ? 3.35f : 0.0f)"))
    (folder / "src/utils").mkdir()
    (folder / "src/utils/SoftplusMath.cpp").write_text(HELPER)
    project = tmp_path / "project"
    (project / "ops").mkdir(parents=True)
    (project / ".udo-build-root").touch()
    for part in ("ops", "model", "data"):
        shutil.copytree(EXAMPLES / "softplus" / part, project / part, dirs_exist_ok=True)
    build_cpu_library(folder, project / "ops/libSoftplus.so")
    (project / "r.yaml").write_text(RECIPE)
    code, out, err = cli("build", str(project / "r.yaml"), "--store", str(tmp_path / "store"),
                         "--out", str(tmp_path / "out"), "--keep-going", "--json")
    assert code == 1, err
    status = {a["id"]: a["status"] for a in json.loads(out)["actions"]}
    assert status["run:smoke"] == status["check:smoke"] == "built"  # agrees with itself
    assert status["native-check"] == "failed"
    assert "Softplus: the C++ differs from the numpy kernel" in err and "difference 3.35" in err
