"""The kernels stub: valid Python in the emulator's op-package API, checked by its syntax tree
(the emulator need not be importable): names, inputs, keyword-only parameters and defaults."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from .helpers import SOFTPLUS, SWISH, VENDOR, package_files

STUB = "emulator/SoftplusPackage_kernels.py"


def _functions(source: bytes) -> dict[str, ast.FunctionDef]:
    tree = ast.parse(compile(source, "stub.py", "exec", ast.PyCF_ONLY_AST))
    return {node.name: node for node in tree.body if isinstance(node, ast.FunctionDef)}


def _defaults(fn: ast.FunctionDef) -> dict[str, object]:
    args = fn.args
    found = {a.arg: ast.literal_eval(d) for a, d in zip(args.kwonlyargs, args.kw_defaults,
                                                       strict=True) if d is not None}
    positional = args.args[len(args.args) - len(args.defaults):]
    found.update({a.arg: ast.literal_eval(d) for a, d in zip(positional, args.defaults,
                                                            strict=True)})
    return found


def test_example_stub_has_the_documented_shape(tmp_path: Path) -> None:
    files = package_files(tmp_path, [SOFTPLUS, SWISH], "HTP", ["v73"], [False, True])
    source = files[STUB]
    tree = ast.parse(source)
    imports = [ast.unparse(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    assert imports == ["import numpy as np", "from udo_build.kernels import Cost, OpPackage"]
    assert 'package = OpPackage("SoftplusPackage")' in source.decode()
    functions = _functions(source)
    assert list(functions) == ["softplus"]  # Swish has kernels
    fn = functions["softplus"]
    assert ast.unparse(fn.decorator_list[0]) == "package.op('Softplus', cost=Cost.GLACIAL)"
    assert [a.arg for a in fn.args.args] == ["x"]
    assert [a.arg for a in fn.args.kwonlyargs] == ["beta"] and _defaults(fn) == {"beta": 1.0}
    assert ast.unparse(fn.returns) == "np.ndarray"
    doc = ast.get_docstring(fn) or ""
    assert doc.startswith("Smooth approximation of ReLU")
    assert "HTP: UFIXED_POINT_8, UFIXED_POINT_16, FLOAT_16, FLOAT_32" in doc
    raised = fn.body[-1]
    assert isinstance(raised, ast.Raise)
    text = ast.Expression(raised.exc.args[0])  # type: ignore[union-attr]
    message = eval(compile(text, "stub.py", "eval"), {"__file__": "ops/k.py"})  # the file's
    assert message == ("kernel not written: Softplus in ops/k.py: write its numpy kernel "
                       "there (udo-build generated this stub from softplus.xml)")


def test_the_stub_is_the_same_in_every_backend(tmp_path: Path) -> None:
    stubs = {b: package_files(tmp_path / b, [SOFTPLUS, SWISH], b, ["v73"])[STUB]
             for b in ("CPU", "GPU", "DSP", "HTP")}
    assert len(set(stubs.values())) == 1
    assert list(_functions(stubs["CPU"])) == ["softplus", "swish"]


def test_vendor_stub_signatures(tmp_path: Path) -> None:
    files = package_files(tmp_path, [VENDOR], "CPU")
    functions = _functions(files["emulator/VendorOps_kernels.py"])
    assert list(functions) == ["scale_clamp", "sum_all"]
    scale = functions["scale_clamp"]
    assert [a.arg for a in scale.args.args] == ["in_0", "bias"]  # sanitized; optional last
    assert [a.arg for a in scale.args.kwonlyargs] == [
        "scale", "steps", "lambda_", "label", "rounding", "limits", "gain"]
    assert _defaults(scale) == {
        "bias": None, "scale": 0.25, "steps": -3, "lambda_": True, "label": "fast \\path",
        "rounding": 1, "limits": [[-1.5, 1.5], [0.0, 6.0]]}  # gain is mandatory: no default
    assert ast.unparse(scale.returns) == "tuple[np.ndarray, np.ndarray]"
    doc = ast.get_docstring(scale) or ""
    assert "lambda_ (named 'lambda' in the op config)" in doc
    assert "enumeration FLOOR=0, CEIL=1, NEAREST=2, default CEIL (1)" in doc
    sum_all = functions["sum_all"]
    assert sum_all.args.vararg is not None and sum_all.args.vararg.arg == "inputs"
    assert not sum_all.args.args and not sum_all.args.kwonlyargs


@pytest.mark.parametrize("backend", ["CPU", "HTP"])
def test_no_stub_when_every_op_has_kernels(tmp_path: Path, backend: str) -> None:
    files = package_files(tmp_path, [SOFTPLUS, SWISH], backend, ["v73"], [True, True])
    assert not any(f.startswith("emulator/") for f in files)
