"""onnx's per-op conformance cases through the emulator: the counts, and docs/ops.md.

    python bench/conformance.py                 # counts of every case and of the claimed ones
    python bench/conformance.py --list internal # the cases of one outcome, with the reason
    python bench/conformance.py --docs          # (re)write docs/ops.md

bench/_conformance.py runs a case and says what a pass is (float tolerance rtol 1e-3, atol
1e-5). A case is claimed when the default package has every op it uses. An op passes a case
when the case passes and uses it; "ops passing" counts the ops with at least one such case.

docs/ops.md is generated (a test regenerates it and compares): per op of the default package,
the ONNX versions the importer accepts (up to 17 through onnx's version converter; later ones
when every input and attribute they add is one the kernel takes, or marked with what must stay
at its default), whether a float kernel and an integer kernel exist (ops without an integer
kernel run through the float kernel between dequantize and quantize on the int8 path), and the
conformance cases that pass. Rerun `--docs` after adding a kernel.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
if str(ROOT) not in sys.path:
    sys.path.insert(1, str(ROOT))

import _conformance as conformance  # noqa: E402

DOCS = ROOT / "docs" / "ops.md"
TARGET_OPSET = 17


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", choices=conformance.OUTCOMES, help="print these cases")
    parser.add_argument("--docs", action="store_true", help=f"write {DOCS.relative_to(ROOT)}")
    args = parser.parse_args(argv)
    results = conformance.run_all(conformance.load_cases())
    ops = conformance.claimed_ops()
    claimed = [r for r in results if all(op in ops for op in r.ops)]
    print(f"all {len(results)} cases:     {_counts(results)}")
    print(f"claimed {len(claimed)} cases: {_counts(claimed)}")
    onnx_ops = standard_ops()
    passing = {op for op, n in pass_counts(results).items() if n and op in onnx_ops}
    print(f"ops claimed (ONNX ops of the default package): {len(onnx_ops)}")
    print(f"ops passing at least one case: {len(passing)}")
    if args.list:
        for r in results:
            if r.outcome == args.list:
                print(f"  {r.name}: {r.detail}")
    if args.docs:
        DOCS.parent.mkdir(exist_ok=True)
        DOCS.write_text(render_ops_doc(results), encoding="utf-8")
        print(f"wrote {DOCS.relative_to(ROOT)}")
    return 0


def _counts(results: Sequence[conformance.Result]) -> str:
    return ", ".join(f"{k} {v}" for k, v in conformance.counts(results).items())


def standard_ops() -> list[str]:
    """The default package's ops that are ONNX ops (FusedConv is the runtime's own)."""
    from onnx import defs

    return [op for op in sorted(conformance.claimed_ops() - conformance.IMPORTED)
            if defs.has(op, "")]


def pass_counts(results: Sequence[conformance.Result]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for r in results:
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
    passes = pass_counts(results)
    totals: dict[str, int] = {}
    for r in results:
        for op in r.ops:
            totals[op] = totals.get(op, 0) + 1
    rows = []
    for op in standard_ops():
        int_path = "integer kernel" if op in integer else "float fallback"
        runtime = "HTP" if DEFAULT.on_htp(op) else "CPU only"
        rows.append(f"| {op} | {accepted_versions(op)} | {runtime} | yes | {int_path} | "
                    f"{passes.get(op, 0)} of {totals.get(op, 0)} |")
    head = (_HEAD.format(onnx=onnx.__version__, ops=len(rows),
                         passing=sum(1 for op in standard_ops() if passes.get(op))))
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
- conformance: the onnx cases that use the op and pass (float32 within rtol 1e-3, atol 1e-5),
  of those that use it; the others are refused with a "not supported" error or listed as known
  differences in bench/_conformance.py.

{ops} ops; {passing} pass at least one case.

| op | ONNX versions | runtime | float kernel | int8 path | conformance |
| --- | --- | --- | --- | --- | --- |
"""


if __name__ == "__main__":
    raise SystemExit(main())
