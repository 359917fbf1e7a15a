"""onnx's per-op conformance cases through every path users run: counts, baseline, docs/ops.md.

    python bench/conformance.py                       # outcome counts per path, all and claimed
    python bench/conformance.py --list internal       # the cases of one outcome, with the reason
    python bench/conformance.py --list refused --path fp16
    python bench/conformance.py --cases test_relu test_abs   # only these cases
    python bench/conformance.py --baseline            # (re)write tests/conformance/baseline.json
    python bench/conformance.py --docs                # (re)write docs/ops.md

bench/_conformance.py runs a case on each path (float session, fp16 record, int8 record), through
the CLI as a user does, and says what a pass is on each. A case is claimed when the default
package has every op it uses. An op passes a case on a path when the case passes there and uses
it; "ops passing" counts the ops with at least one such case on the float path.

The baseline (tests/conformance/baseline.json) holds each case's outcome per path, and
the reason of each refusal or difference; tests/conformance/test_onnx_cases.py fails when a case
does worse, or better, than it (write it again after an improvement, in the same change).

docs/ops.md is generated (a test regenerates it and compares): per op of the default package,
the ONNX versions the importer accepts (up to 17 through onnx's version converter; later ones
when every input and attribute they add is one the kernel takes, or marked with what must stay
at its default), whether a float kernel and an integer kernel exist (ops without an integer
kernel run through the float kernel between dequantize and quantize on the int8 path), and the
conformance cases that pass on each path. Rerun `--docs` after adding a kernel.

Unless it writes the baseline, the run ends by comparing every result with it: exit 1 when a
case does worse than its baseline or ends internal (a case that does better is printed).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
if str(ROOT) not in sys.path:
    sys.path.insert(1, str(ROOT))

import _conformance as conformance  # noqa: E402

DOCS = ROOT / "docs" / "ops.md"
# versions onnx's version converter cannot bring up to TARGET_OPSET (it has no adapter from
# them): convert refuses such a model; tests/cli/test_accepted_versions.py holds this list true
NO_ADAPTER = frozenset({("Pad", 1), ("Split", 1)})
BASELINE = ROOT / "tests" / "conformance" / "baseline.json"
TARGET_OPSET = 17
FP16_TARGET = 0.97  # the fp16 path passes >= 97% of the claimed cases the float path passes


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", choices=conformance.OUTCOMES, help="print these cases")
    parser.add_argument("--path", choices=conformance.PATHS, action="append",
                        help="only this path (repeatable; default: every path)")
    parser.add_argument("--cases", nargs="+", metavar="NAME", help="only these cases")
    parser.add_argument("--workers", type=int, help="processes (default: the cores)")
    parser.add_argument("--docs", action="store_true", help=f"write {DOCS.relative_to(ROOT)}")
    parser.add_argument("--baseline", action="store_true",
                        help=f"write {BASELINE.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    paths = tuple(args.path or conformance.PATHS)
    if (args.docs or args.baseline) and (args.cases or paths != conformance.PATHS):
        parser.error("--docs and --baseline need every case on every path")
    started = time.perf_counter()
    results = conformance.run_all(conformance.load_cases(args.cases), paths, args.workers)
    seconds = time.perf_counter() - started
    print(render_table(results, paths))
    print(f"{len(results) // len(paths)} cases on {len(paths)} path(s) in {seconds:.0f} s")
    if args.list:
        for r in results:
            if r.outcome == args.list:
                print(f"  [{r.path}] {r.name}: {r.detail}")
    if args.docs:
        DOCS.parent.mkdir(exist_ok=True)
        DOCS.write_text(render_ops_doc(results), encoding="utf-8")
        print(f"wrote {DOCS.relative_to(ROOT)}")
    if args.baseline:
        BASELINE.write_text(render_baseline(results), encoding="utf-8")
        print(f"wrote {BASELINE.relative_to(ROOT)}")
        return 0
    return check_baseline(results)


def check_baseline(results: Sequence[conformance.Result]) -> int:
    """Each result against its case's baseline: 1 when one is worse or internal (a better one
    is printed: record it with --baseline)."""
    recorded = json.loads(BASELINE.read_text(encoding="utf-8")) if BASELINE.exists() else {}
    worse = 0
    for r in results:
        problem = baseline_problem(r, recorded.get(r.name, {}).get(r.path))
        bad = r.outcome == conformance.INTERNAL or (problem and "better" not in problem)
        worse += bool(bad)
        if problem or bad:
            print(f"{'FAIL' if bad else 'note'}  {r.name} {problem or r.detail}")
    print(f"{'FAIL' if worse else 'PASS'}  {len(results)} results against "
          f"{BASELINE.relative_to(ROOT)}: {worse} worse than their baseline or internal")
    return 1 if worse else 0


def render_table(results: Sequence[conformance.Result], paths: Sequence[str]) -> str:
    """Outcome counts per path, over all cases and over the claimed ones."""
    ops = conformance.claimed_ops()
    rows = [f"{'path':<6} {'cases':<8} " + " ".join(f"{o:>9}" for o in conformance.OUTCOMES)]
    for path in paths:
        mine = [r for r in results if r.path == path]
        for label, chosen in (("all", mine), ("claimed", [r for r in mine
                                                          if all(op in ops for op in r.ops)])):
            counted = conformance.counts(chosen)
            rows.append(f"{path:<6} {label:<8} "
                        + " ".join(f"{counted[o]:>9}" for o in conformance.OUTCOMES))
    ratio = fp16_ratio(results)
    if ratio is not None:
        rows.append(f"fp16 passes {ratio[0]} of the {ratio[1]} claimed cases the float path "
                    f"passes: {100 * ratio[0] / max(ratio[1], 1):.1f}% "
                    f"(target {100 * FP16_TARGET:.0f}%)")
    return "\n".join(rows)


def fp16_ratio(results: Sequence[conformance.Result]) -> tuple[int, int] | None:
    """(fp16 passes, float passes) over the claimed cases the float path passes."""
    ops = conformance.claimed_ops()
    by = {(r.name, r.path): r for r in results if all(op in ops for op in r.ops)}
    floats = [name for (name, path), r in by.items()
              if path == conformance.FLOAT and r.outcome == conformance.PASS]
    if not floats or not any(path == conformance.FP16 for _, path in by):
        return None
    return sum(by[n, conformance.FP16].outcome == conformance.PASS for n in floats), len(floats)


def baseline_problem(result: conformance.Result, baseline: str | None) -> str:
    """'' when a result's outcome is its baseline's, else what changed. `baseline`: the
    baseline's text for the case and path ("pass", or "refused: the reason"), None: none."""
    if baseline is None:
        return f"[{result.path}] no baseline: run `python bench/conformance.py --baseline`"
    was = baseline.split(":", 1)[0]
    if conformance.RANK[result.outcome] < conformance.RANK.get(was, 0) or (
            result.outcome == conformance.INEXACT and was != conformance.INEXACT):
        return f"[{result.path}] worse than its baseline: {result.outcome}: {result.detail} " \
            f"(was {baseline})"
    if conformance.RANK[result.outcome] > conformance.RANK.get(was, 0):
        return f"[{result.path}] better than its baseline ({baseline}): {result.outcome}; " \
            "record it: `python bench/conformance.py --baseline`"
    return ""


def render_baseline(results: Sequence[conformance.Result]) -> str:
    """Every case's outcome per path, one case a line (see the module docstring)."""
    cases: dict[str, dict[str, str]] = {}
    for r in results:
        text = r.outcome if r.outcome == conformance.PASS else f"{r.outcome}: {r.detail}"
        cases.setdefault(r.name, {})[r.path] = text[:160]
    lines = [f"  {json.dumps(name)}: {json.dumps(cases[name], sort_keys=True)}"
             for name in sorted(cases)]
    return "{\n" + ",\n".join(lines) + "\n}\n"


def standard_ops() -> list[str]:
    """The default package's ops that are ONNX ops (FusedConv is the runtime's own)."""
    from onnx import defs

    return [op for op in sorted(conformance.claimed_ops() - conformance.IMPORTED)
            if defs.has(op, "")]


def pass_counts(results: Sequence[conformance.Result], path: str = conformance.FLOAT
                ) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in results:
        if r.path == path:
            for op in r.ops:
                counts[op] = counts.get(op, 0) + (r.outcome == conformance.PASS)
    return counts


def accepted_versions(op: str) -> str:
    """The op's ONNX versions the importer accepts (see the module docstring)."""
    from onnx import defs, helper

    from udo_build.model.interface import kernel_interface

    interface = kernel_interface(op)
    history = sorted({s.since_version for s in defs.get_all_schemas_with_history()
                      if s.name == op and s.domain == ""})
    parts = []
    for version in history:
        if (op, version) in NO_ADAPTER:
            continue
        if version <= TARGET_OPSET:
            parts.append(str(version))
            continue
        schema = defs.get_schema(op, version, "")
        if interface is None:
            parts.append(str(version))
            continue
        missing = [i.name for k, i in enumerate(schema.inputs)
                   if not interface.takes_input(k) and i.name not in interface.attributes]
        if missing:
            continue  # an input the kernel cannot take: refused when given
        fixed = [name for name, a in sorted(schema.attributes.items())
                 if name not in interface.attributes and a.default_value.name]
        fixed = [f"{n}={helper.get_attribute_value(schema.attributes[n].default_value)!r}"
                 .replace("b'", "'") for n in fixed]
        parts.append(f"{version} ({', '.join(fixed)} only)" if fixed else str(version))
    return ", ".join(parts)


def render_ops_doc(results: Sequence[conformance.Result]) -> str:
    import onnx

    from udo_build.kernels.default import DEFAULT
    from udo_build.runtime.integer.registry import INTEGER
    from udo_build.runtime.integer.session import QuantizedSession  # noqa: F401 (registers)

    integer = set(INTEGER.ops())
    passes = {path: pass_counts(results, path) for path in conformance.PATHS}
    totals: dict[str, int] = {}
    for r in results:
        if r.path == conformance.FLOAT:
            for op in r.ops:
                totals[op] = totals.get(op, 0) + 1
    rows = []
    for op in standard_ops():
        int_path = "integer kernel" if op in integer else "float fallback"
        runtime = "HTP" if DEFAULT.on_htp(op) else "CPU only"
        per_path = " | ".join(str(passes[path].get(op, 0)) for path in conformance.PATHS)
        rows.append(f"| {op} | {accepted_versions(op)} | {runtime} | yes | {int_path} | "
                    f"{totals.get(op, 0)} | {per_path} |")
    head = (_HEAD.format(onnx=onnx.__version__, ops=len(rows),
                         passing=sum(1 for op in standard_ops() if passes["float"].get(op))))
    return head + "\n".join(rows) + "\n"


_HEAD = """# The emulator's default op package

Generated by `python bench/conformance.py --docs` from the package's kernels, the integer
registry and onnx {onnx}'s node conformance cases; do not edit by hand (a test regenerates it).

- ONNX versions: the op versions the importer accepts. Models below opset 17 are converted to
  it; a later version is accepted when the kernel takes every input and attribute it adds, or
  only with the named attributes at their default ("... only"); versions not listed are refused
  with a "not supported" error naming the input.
- runtime: HTP when the HTP op set has the op (udo_build/kernels/default/htp.py says where the
  list comes from); a CPU-only op runs on the CPU runtime, the graph split into HTP and CPU
  subnets around it, each HTP subnet prepared as a record of its own.
- int8 path: an integer kernel computes the op on quantized values; otherwise the node runs its
  float kernel between dequantize and quantize.
- cases: the onnx cases that use the op; then how many of them pass on each path users run,
  through the CLI (bench/_conformance.py): float (`udo-build run` on the converted bundle,
  float32 within rtol 1e-3, atol 1e-5), fp16 (`--soc sm8650 --precision fp16`: an fp16 record
  prepared by the compiler, within the tolerance of the op family) and int8 (a recipe that
  quantizes on the case's inputs and prepares an sm8650 int8 record: bit-exact with the integer
  oracle and within 4 quantization steps of onnx's expected outputs). The others are refused
  with a "not supported" error, differ (listed per case in tests/conformance/baseline.json), or
  are known differences listed in bench/_conformance.py.

{ops} ops; {passing} pass at least one case on the float path.

| op | ONNX versions | runtime | float kernel | int8 path | cases | float | fp16 | int8 |
| --- | --- | --- | --- | --- | --- | --- | --- | --- |
"""


if __name__ == "__main__":
    raise SystemExit(main())
