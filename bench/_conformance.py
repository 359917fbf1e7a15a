"""onnx's per-op conformance cases through every path users run, as they run it: the CLI.

    cases = load_cases()                       # onnx.backend.test.case.node, data generated
    results = run_case(case)                   # {path: Result(name, ops, path, outcome, detail)}
    results = run_all(cases, workers=2)        # the same, over processes

Each case of `onnx.backend.test.case.node.collect_testcases()` is a small ONNX model with input
and expected output arrays. The case's model and inputs are written to files, and each path runs
through `udo_build.cli.main` exactly as a user types it, every bundle written to disk and read
back through the checked loader:

- float: `udo-build convert m.onnx --out m.udb`, then `udo-build run m.udb` (the float session).
- fp16:  `udo-build run m.udb --soc sm8650 --precision fp16`: the compiler prepares an fp16
  record for the device and the emulator runs it (CPU subnets where an op is CPU-only).
- int8:  a recipe that quantizes the model on the case's own inputs (`tf` quantizer, 8-bit) and
  prepares an int8 record for sm8650, built with `udo-build build`; then `udo-build run` on the
  deployable bundle the build wrote. Its outputs are compared twice: bit for bit with the exact
  integer oracle (`QuantizedSession` on the quantized bundle the build wrote, same inputs), and
  with onnx's expected outputs within INT8_STEPS quantization steps of each output's encoding.

Every path asks for all of the model's outputs (`--outputs`) and runs every data set of the case
(one input-list line each). Each (case, path) ends in one outcome:

- pass: the outputs match (dtype, shape, values) within the path's tolerance: float32 within
  rtol 1e-3 and atol 1e-5 (onnx's own backend tolerance with the absolute floor raised for
  float32 values computed in another order; a case stating a looser one keeps its own); fp16
  within FP16_TOLERANCE (per op family, see `fp16_tolerance`); int8 exact with the oracle and within
  INT8_STEPS steps of the reference. Integer and bool outputs are equal on every path.
- refused: an exit 2 that honestly says the model or one of its ops is not supported.
- differs: it ran, and a value is outside the tolerance (int8: exact with the oracle, but the
  quantized result is farther from the reference than the bound: a tensor whose 8-bit grid is
  too coarse for it, such as an attention mask of -inf).
- inexact (int8): the record's outputs are not bit for bit the integer oracle's: a defect of
  the int8 record or of the oracle, kept apart from "internal" so that the baseline tracks each
  such case (its count may only fall) while it is mended.
- known: a listed difference (`KNOWN`, with the reason), whatever the run gave.
- internal: a bug of udo-build: exit 3, an exception, and the refusals that are bugs in
  disguise: "the bundle is damaged" on a bundle
  udo-build wrote itself, and "cannot run at these input dimensions" on a model at its own
  static dimensions (the compiler's shapes disagreeing with the float runtime's).

A case is claimed when the default package has every op its graph uses (`claimed`).
tests/conformance/baseline.json keeps each claimed case's outcome per path; the test fails when
a case does worse or better than its baseline (`python bench/conformance.py --baseline` writes
it again after an improvement, in the same change).
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import tempfile
import warnings
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

RTOL = 1e-3
ATOL = 1e-5
INT8_STEPS = 4  # int8: |got - expected| <= INT8_STEPS x the output encoding's scale (+ ATOL)
SOC = "sm8650"

FLOAT, FP16, INT8 = "float", "fp16", "int8"
PATHS = (FLOAT, FP16, INT8)

PASS, REFUSED, DIFFERS, INEXACT, KNOWN_DIFFERENCE, INTERNAL = (
    "pass", "refused", "differs", "inexact", "known", "internal")
OUTCOMES = (PASS, REFUSED, DIFFERS, INEXACT, KNOWN_DIFFERENCE, INTERNAL)
RANK = {PASS: 3, KNOWN_DIFFERENCE: 2, REFUSED: 2, DIFFERS: 1, INEXACT: 1, INTERNAL: 0}

# (case name, path) -> why the emulator's result differs from onnx's expected one, by design
KNOWN: dict[tuple[str, str], str] = {
    **{(name, path): "training-mode Dropout draws a random mask; onnx's expected output is one "
       "draw of numpy's generator" for name in ("test_training_dropout",
                                               "test_training_dropout_default",
                                               "test_training_dropout_zero_ratio")
       for path in PATHS},
}

# refusals that are bugs in disguise (see the module docstring)
DISGUISED = ("the bundle is damaged", "cannot run at these input dimensions")


@dataclass(frozen=True)
class Result:
    name: str
    ops: tuple[str, ...]
    path: str
    outcome: str
    detail: str = ""


def load_cases(names: Iterable[str] | None = None) -> list[Any]:
    """onnx's node conformance cases (their data generated now), sorted by name."""
    from onnx.backend.test.case.node import collect_testcases

    wanted = None if names is None else set(names)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        cases = collect_testcases()
    picked = [c for c in cases if wanted is None or c.name in wanted]
    return sorted(picked, key=lambda c: c.name)


def case_ops(case: Any) -> tuple[str, ...]:
    """The ops a case's graph uses, sorted (subgraphs of If/Loop/Scan included)."""
    found: set[str] = set()
    _graph_ops(case.model.graph, found)
    return tuple(sorted(found))


def _graph_ops(graph: Any, found: set[str]) -> None:
    from onnx import AttributeProto

    for node in graph.node:
        found.add(node.op_type if node.domain in ("", "ai.onnx") else
                  f"{node.domain}.{node.op_type}")
        for attr in node.attribute:
            if attr.type == AttributeProto.GRAPH:
                _graph_ops(attr.g, found)
            for sub in attr.graphs:
                _graph_ops(sub, found)


def claimed_ops() -> frozenset[str]:
    from udo_build.kernels.default import DEFAULT

    return frozenset(DEFAULT.ops()) | IMPORTED


# ops the importer turns into weights (onnx_import._fold), whatever the package has
IMPORTED = frozenset({"Constant"})


def claimed(case: Any, ops: frozenset[str] | None = None) -> bool:
    """True when the default package has every op of the case."""
    have = claimed_ops() if ops is None else ops
    return all(op in have for op in case_ops(case))


# -- tolerances -----------------------------------------------------------------------------------

# fp16 records compute in float16 (10-bit mantissa, unit roundoff 2^-11 = 4.9e-4): each op
# rounds its result once more than float32 does. The tolerance grows with what an op family does
# to a rounding error: elementwise ops keep it (a few roundings), reductions and products sum n
# of them, exponentials and powers multiply the relative error by the exponent's size.
FP16_TOLERANCE: dict[str, tuple[float, float]] = {
    "default": (1e-2, 1e-2),  # (rtol, atol): ~20 float16 roundings
    "accumulating": (3e-2, 3e-2),  # matrix products, convolutions, reductions, normalizations
    "exponential": (5e-2, 5e-2),  # exp/pow/log chains, softmax, attention, recurrent cells
}
_ACCUMULATING = re.compile(r"^(Conv|ConvTranspose|ConvInteger|Gemm|MatMul|MatMulInteger|Einsum|"
                           r"Reduce\w+|\w*Pool|\w*Normalization|CumSum|CumProd|Det|DFT|STFT|"
                           r"Col2Im|Mean|Sum|Resize|GridSample|RoiAlign|Upsample|DeformConv)$")
_EXPONENTIAL = re.compile(r"^(Exp|Pow|Log|LogSoftmax|Softmax|Softplus|Softsign|Attention|"
                          r"Gelu|Elu|Selu|Celu|Mish|Erf|Tan|Tanh|Sinh|Cosh|Asinh|Acosh|Atanh|"
                          r"RNN|GRU|LSTM|HardSwish|Swish|\w*CrossEntropy\w*|NegativeLogLikelihood"
                          r"Loss|ReduceLogSumExp|ReduceLogSum|RotaryEmbedding|\w+Window)$")


def fp16_tolerance(ops: Sequence[str]) -> tuple[float, float]:
    """The fp16 path's (rtol, atol) for a case using these ops: its loosest family's."""
    if any(_EXPONENTIAL.match(op) for op in ops):
        return FP16_TOLERANCE["exponential"]
    if any(_ACCUMULATING.match(op) for op in ops):
        return FP16_TOLERANCE["accumulating"]
    return FP16_TOLERANCE["default"]


# -- running a case -------------------------------------------------------------------------------


def run_case(case: Any, paths: Sequence[str] = PATHS, store: str | None = None
             ) -> dict[str, Result]:
    """The outcome of one case on each path (see the module docstring). `store`: the store the
    int8 build uses (a temporary one when None)."""
    ops = case_ops(case)
    with tempfile.TemporaryDirectory(prefix="udo-conf-") as tmp, \
            warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        work = _Work(case, Path(tmp), store or str(Path(tmp) / "store"))
        out = {}
        for path in paths:
            if (case.name, path) in KNOWN:
                out[path] = Result(case.name, ops, path, KNOWN_DIFFERENCE, KNOWN[case.name, path])
                continue
            try:
                outcome, detail = work.run(path)
            except Exception as error:  # the outcome is the point: every error is classified
                outcome, detail = INTERNAL, f"{type(error).__name__}: {error}"
            out[path] = Result(case.name, ops, path, outcome, _clean(detail, tmp))
        return out


def _clean(detail: str, tmp: str) -> str:
    """One line, without the temporary folder's name (the baseline must not depend on it)."""
    line = detail.strip().splitlines()[0] if detail.strip() else ""
    return line.replace(tmp + "/", "").replace(tmp, ".")[:300]


class _Work:
    """One case's files and the CLI calls of each path."""

    def __init__(self, case: Any, folder: Path, store: str) -> None:
        import onnx

        self.case, self.folder, self.store = case, folder, store
        self.model = folder / "m.onnx"
        onnx.save(case.model, self.model)
        initialized = {i.name for i in case.model.graph.initializer}
        self.inputs = [i.name for i in case.model.graph.input if i.name not in initialized]
        self.outputs = [o.name for o in case.model.graph.output]
        self.input_list = folder / "inputs.txt"
        self.expected: list[list[np.ndarray]] = []
        self._converted: tuple[int, str] | None = None

    def run(self, path: str) -> tuple[str, str]:
        rc, text = self._convert()  # the recipe's convert is the same: refused alike
        if rc:
            return _failed(rc, text)
        if not self.inputs:
            return REFUSED, "the model has no inputs: nothing to run an input list through"
        if not self.expected:
            self._write_inputs()
        if path == INT8:
            return self._int8()
        extra = ["--soc", SOC, "--precision", "fp16"] if path == FP16 else []
        got, problem = self._run(self.folder / "m.udb", path, extra)
        if problem:
            return problem
        tolerance = fp16_tolerance(case_ops(self.case)) if path == FP16 else (RTOL, ATOL)
        rtol, atol = max(self.case.rtol, tolerance[0]), max(self.case.atol, tolerance[1])
        for k, outputs in enumerate(got):
            for name, want in zip(self.outputs, self.expected[k], strict=True):
                problem_text = compare(outputs[name], want, rtol, atol)
                if problem_text:
                    return DIFFERS, f"output {name}: {problem_text}"
        return PASS, ""

    def _write_inputs(self) -> None:
        """The data sets as .npy files and one input-list line each; the expected outputs."""
        lines = []
        for k, (inputs, expected) in enumerate(self.case.data_sets):
            for i, value in enumerate(inputs[:len(self.inputs)]):
                np.save(self.folder / f"in{k}_{i}.npy", _array(value))
            lines.append(" ".join(f"{n}:=in{k}_{i}.npy" for i, n in enumerate(self.inputs)))
            self.expected.append([_array(v) for v in expected])
        self.input_list.write_text("\n".join(lines) + "\n", encoding="utf-8")

    def _convert(self) -> tuple[int, str]:
        if self._converted is None:
            self._converted = cli("convert", str(self.model), "--out",
                                  str(self.folder / "m.udb"))
        return self._converted

    def _run(self, bundle: Path, path: str, extra: list[str]
             ) -> tuple[list[dict[str, np.ndarray]], tuple[str, str] | None]:
        from udo_build.runtime.results import file_name

        out = self.folder / f"out-{path}"
        rc, text = cli("run", str(bundle), "--input-list", str(self.input_list), "--output-dir",
                       str(out), "--outputs", ",".join(self.outputs), *extra)
        if rc:
            return [], _failed(rc, text)
        results = []
        for k in range(len(self.expected)):
            folder = out / f"Result_{k}"
            missing = [n for n in self.outputs if not (folder / f"{file_name(n)}.npy").exists()]
            if missing:
                return [], (INTERNAL, f"run wrote no file for {', '.join(missing)}")
            results.append({n: np.load(folder / f"{file_name(n)}.npy") for n in self.outputs})
        return results, None

    def _int8(self) -> tuple[str, str]:
        recipe = self.folder / "recipe.yaml"
        recipe.write_text(f"recipe: 1\nname: case\nmodel: {{onnx: m.onnx}}\n"
                          "quantize: {input_list: inputs.txt, quantizer: tf}\n"
                          f"prepare:\n  matrix:\n    soc: [{SOC}]\n", encoding="utf-8")
        built = self.folder / "built"
        rc, text = cli("build", str(recipe), "--store", self.store, "--out", str(built),
                       "-j", "1")
        if rc:
            return _failed(rc, text)
        deploy = built / "model" / "m_deploy.udb"
        got, problem = self._run(deploy, INT8, ["--soc", SOC])
        if problem:
            return problem
        qmodel, packages = _quantized(built / "model" / "m_quantized.udb")
        for k, (outputs, exact) in enumerate(zip(got, self._oracle(qmodel, packages),
                                                 strict=True)):
            for name in self.outputs:
                problem_text = compare(outputs[name], np.asarray(exact[name]).astype(
                    outputs[name].dtype, copy=False), 0.0, 0.0)
                if problem_text:
                    return INEXACT, f"output {name} of data set {k} is not the integer " \
                        f"oracle's: {problem_text}"
        return self._int8_bound(got, qmodel.activations)

    def _oracle(self, qmodel: Any, packages: Any) -> list[dict[str, Any]]:
        from udo_build.model.input_list import feeds, parse_input_list
        from udo_build.runtime.integer.session import QuantizedSession

        session = QuantizedSession(qmodel, packages)
        listing = parse_input_list(self.input_list)
        return [session.run(feed, self.outputs) for feed in
                feeds(listing, list(qmodel.model.graph.inputs))]

    def _int8_bound(self, got: list[dict[str, np.ndarray]], activations: dict[str, Any]
                    ) -> tuple[str, str]:
        for k, outputs in enumerate(got):
            for name, want in zip(self.outputs, self.expected[k], strict=True):
                encoding = activations.get(name)
                if encoding is None or want.dtype.kind not in "fc":
                    rtol, atol = fp16_tolerance(case_ops(self.case))  # a float fallback
                else:
                    rtol, atol = 0.0, INT8_STEPS * float(encoding.scale) + ATOL
                problem_text = compare(outputs[name], want, rtol, atol)
                if problem_text:
                    return DIFFERS, f"output {name}: {problem_text}"
        return PASS, ""


def _quantized(bundle: Path) -> tuple[Any, Any]:
    """The quantized model a build wrote, read through the checked loader, and its packages."""
    from udo_build.ir.qmodel import from_bundle
    from udo_build.kernels.load import packages_for
    from udo_build.model.op_check import load_checked_bundle

    loaded = load_checked_bundle(bundle)
    return from_bundle(loaded, str(bundle)), packages_for(loaded, [])


def _failed(rc: int, text: str) -> tuple[str, str]:
    """The outcome of a CLI call that did not exit 0, from its exit code and message."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    at = next((i for i, line in enumerate(lines) if line.startswith("failed:")), None)
    if at is not None:  # a build step failed: its reason is on the next line
        reason = " ".join(lines[at:at + 2])
    else:
        reason = next((line for line in lines if line.startswith(("error:", "udo-build failed"))),
                      lines[-1] if lines else f"exit {rc}")
    if rc in (1, 2) and "a bug of udo-build" not in text \
            and not any(d in text for d in DISGUISED):
        return REFUSED, f"exit {rc}: {reason}"
    return INTERNAL, f"exit {rc}: {reason}"


def cli(*argv: str) -> tuple[int, str]:
    """`udo-build ARGV` in this process: (exit code, what it printed)."""
    from udo_build.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(list(argv))
    return code, out.getvalue()


def _array(value: Any) -> Any:
    """A data set's value as numpy (some cases give TensorProtos)."""
    from onnx import TensorProto, numpy_helper

    return numpy_helper.to_array(value) if isinstance(value, TensorProto) else np.asarray(value)


def compare(got: Any, want: Any, rtol: float = RTOL, atol: float = ATOL) -> str:
    """'' when `got` matches `want` (dtype, shape, values), else what differs."""
    want = np.asarray(want)
    got = np.asarray(got)
    if got.dtype != want.dtype:
        return f"dtype {got.dtype}, expected {want.dtype}"
    if got.shape != want.shape:
        return f"shape {list(got.shape)}, expected {list(want.shape)}"
    if want.dtype.kind in "fc":
        wide = np.complex128 if want.dtype.kind == "c" else np.float64
        g, w = got.astype(wide), want.astype(wide)
        close = np.isclose(g, w, rtol=rtol, atol=atol, equal_nan=True)
    else:
        close = got == want
    if bool(np.all(close)):
        return ""
    bad = int(np.size(close) - np.count_nonzero(close))
    if want.dtype.kind in "fc":
        err = float(np.nanmax(np.abs(got.astype(np.float64) - want.astype(np.float64))))
        return f"{bad} of {want.size} values differ (max abs error {err:.3g})"
    return f"{bad} of {want.size} values differ"


# -- many cases -----------------------------------------------------------------------------------

_POOL_CASES: dict[str, Any] = {}


def run_all(cases: Sequence[Any], paths: Sequence[str] = PATHS, workers: int | None = None
            ) -> list[Result]:
    """Every case on every path, over `workers` processes (default: the machine's cores),
    in the order of `cases`, paths in PATHS order."""
    workers = workers or os.cpu_count() or 1
    names = [c.name for c in cases]
    with tempfile.TemporaryDirectory(prefix="udo-conf-stores-") as stores:
        if workers == 1 or len(cases) < 2:
            by_name = {c.name: _one(c, paths, stores) for c in cases}
        else:
            import multiprocessing

            _POOL_CASES.clear()
            _POOL_CASES.update({c.name: c for c in cases})  # forked children inherit them
            jobs = [(n, tuple(paths), stores) for n in names]
            with multiprocessing.get_context("fork").Pool(workers) as pool:
                by_name = dict(pool.imap_unordered(_pooled, jobs, chunksize=4))
    return [by_name[n][p] for n in names for p in paths]


def _pooled(job: tuple[str, tuple[str, ...], str]) -> tuple[str, dict[str, Result]]:
    name, paths, stores = job
    return name, _one(_POOL_CASES[name], paths, stores)


def _one(case: Any, paths: Sequence[str], stores: str) -> dict[str, Result]:
    """run_case with one int8 store per process under `stores`."""
    return run_case(case, paths, os.path.join(stores, str(os.getpid())))


def counts(results: Iterable[Result]) -> dict[str, int]:
    out = dict.fromkeys(OUTCOMES, 0)
    for r in results:
        out[r.outcome] += 1
    return out
