"""`run`: a recipe's run entry on the emulator, checked against the float model.

The runtime picks a record of the deployable bundle for the target SoC, the run's input
dimensions and outputs, by the compatibility rules (udo_build.soc.compat) in the run's mode;
when none fits it prepares online, as the vendor runtime does, and says so: which records it saw
and why each was rejected, and what the online prepare cost. Every inference of the run's input
list executes on the chosen record (int8 on the integer path, fp16 in float), and is compared
with the float model: `min_sqnr_db`, `max_abs_error` and `min_top1_agreement` checks fail the
step with the numbers. Output `results`: Result_<i>/<tensor>.raw (float32) and .npy per
inference, and report.json.
"""

from __future__ import annotations

import json
import math
import time
from typing import Any

from ..actions import ActionContext, Produced, Tree, action_kind

PARAMS = ("arch", "vtcm_mb", "optimization_level", "input_dimensions", "outputs", "precision",
          "mode", "check")


@action_kind("run", version=1, params=PARAMS)
def run(ctx: ActionContext) -> Produced:
    from pathlib import Path

    from ...errors import StepFailed
    from ...ir.bundle import read_bundle
    from ...kernels.load import packages_for
    from ...model.input_list import feeds, parse_input_list

    p = ctx.params
    name = "deployable" if "deployable" in ctx.input_names() else (
        "bundle" if "bundle" in ctx.input_names() else "float_bundle")
    bundle = read_bundle(ctx.input_bytes(name), name)
    float_bundle = read_bundle(ctx.input_bytes("float_bundle"), "float bundle")
    kernels = [ctx.input_path(n) for n in ctx.input_names() if n.startswith("kernels[")]
    packages = packages_for(bundle, kernels)
    record, selection = _select(bundle, p, packages)
    listing = parse_input_list(Path(ctx.input_path("input_list")))
    runner = record.runner(packages)
    reference = _reference(float_bundle, p, packages)
    results = ctx.workdir / "results"
    stats = _Stats()
    for i, feed in enumerate(feeds(listing, _inputs(float_bundle, p))):
        got = runner.run(feed)
        want = reference(feed, list(got))
        _write(results / f"Result_{i}", got)
        stats.add(got, want)
    report = {"run": p.get("name"), "soc": p.get("soc"), **selection,
              "inferences": len(listing.inferences), "metrics": stats.metrics()}
    failures = _checks(p.get("check") or {}, report["metrics"])
    report["checks"] = {"passed": not failures, "failures": failures}
    (results / "report.json").write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    if failures:
        raise StepFailed("run", f"{p.get('name')}: check failed: " + "; ".join(failures))
    return Produced({"results": Tree(results)}, description=_describe(report))


def _select(bundle: Any, p: dict[str, Any], packages: Any) -> tuple[Any, dict[str, Any]]:
    """The record to run, and what the choice was (or why it prepared online)."""
    from ...compiler import CompileTarget, compile_bundle
    from ...compiler.record import read_record
    from ...soc.compat import Device, Prepared, choose

    rows = bundle.meta.get("records") or []
    dims = p.get("input_dimensions") or _native(bundle)
    want = Prepared(p["arch"], p["vtcm_mb"], dims, p.get("outputs") or "default",
                    precision=p["precision"])
    records = [Prepared(r["arch"], r["vtcm_mb"], r.get("input_dimensions") or {},
                        r.get("output_request", "default"), r["part"], r.get("precision", ""))
               for r in rows]
    device = Device(str(p.get("soc")), p["arch"], p["vtcm_mb"])
    best, rejected = choose(records, device, p.get("mode", "permissive"), want)
    seen = [{"record": r.name, "rejected": why} for r, why in rejected]
    if best is not None:
        record = read_record(bundle.parts[best.name], best.name)
        return record, {"record": record.key.get("name"), "online_prepare": False, "seen": seen}
    started = time.perf_counter()
    target = CompileTarget(p["arch"], p["vtcm_mb"], int(p.get("optimization_level") or 2),
                    dict(p.get("input_dimensions") or {}), p.get("outputs") or "default",
                    p["precision"])
    compiled = compile_bundle(bundle, target, packages)
    record = read_record(compiled.record(), "online")
    seconds = time.perf_counter() - started
    return record, {"record": None, "online_prepare": True, "seen": seen,
                    "online_prepare_seconds": round(seconds, 3),
                    "warning": f"no record of the bundle fits (saw {len(rows)}): prepared "
                               f"online, which cost {seconds * 1000:.0f} ms at start-up"}


def _inputs(bundle: Any, p: dict[str, Any]) -> list[Any]:
    """The model inputs at the run's input dimensions (how its files are read)."""
    from dataclasses import replace

    dims = p.get("input_dimensions") or {}
    return [replace(t, shape=tuple(dims[t.name])) if t.name in dims else t
            for t in bundle.model.graph.inputs]


def _reference(float_bundle: Any, p: dict[str, Any], packages: Any) -> Any:
    """The float model at the run's input dimensions: the bundle itself at its own, else a
    float preparation at the run's (prepared float graphs equal the unprepared within 1e-5)."""
    dims = p.get("input_dimensions") or {}
    if not dims or dims == _native(float_bundle):
        from ...runtime.float_session import Session

        return Session(float_bundle.model, packages).run
    from ...compiler import CompileTarget, compile_bundle
    from ...compiler.record import read_record

    target = CompileTarget(p["arch"], p["vtcm_mb"], 1, dict(dims), p.get("outputs") or "default",
                    "fp16")
    runner = read_record(compile_bundle(float_bundle, target, packages).record()).runner(
        packages)
    return lambda feed, names: runner.run(feed)


def _native(bundle: Any) -> dict[str, list[int]]:
    return {t.name: list(t.static_shape) for t in bundle.model.graph.inputs
            if t.static_shape is not None}


def _write(folder: Any, outputs: dict[str, Any]) -> None:
    import numpy as np

    folder.mkdir(parents=True, exist_ok=True)
    for name, value in sorted(outputs.items()):
        safe = name.replace("/", "_").replace(":", "_")
        array = np.asarray(value)
        (folder / f"{safe}.raw").write_bytes(array.astype("<f4").tobytes())
        np.save(folder / f"{safe}.npy", array, allow_pickle=False)


class _Stats:
    """Signal, noise, worst absolute error and top-1 agreement over every inference."""

    def __init__(self) -> None:
        self.signal = self.noise = self.max_abs = 0.0
        self.agree = self.total = 0

    def add(self, got: dict[str, Any], want: dict[str, Any]) -> None:
        import numpy as np

        for name, value in got.items():
            a = np.asarray(value, np.float64).reshape(-1)
            b = np.asarray(want[name], np.float64).reshape(-1)
            self.signal += float(np.sum(b * b))
            self.noise += float(np.sum((a - b) ** 2))
            self.max_abs = max(self.max_abs, float(np.max(np.abs(a - b))) if a.size else 0.0)
            if a.size > 1:
                self.agree += int(np.argmax(a) == np.argmax(b))
                self.total += 1

    def metrics(self) -> dict[str, Any]:
        sqnr = math.inf if self.noise == 0 else 10 * math.log10(max(self.signal, 1e-30)
                                                                / self.noise)
        return {"sqnr_db": None if math.isinf(sqnr) else round(sqnr, 3),
                "max_abs_error": self.max_abs,
                "top1_agreement": self.agree / self.total if self.total else None}


def _checks(check: dict[str, Any], metrics: dict[str, Any]) -> list[str]:
    failures = []
    sqnr = metrics["sqnr_db"]
    if "min_sqnr_db" in check and sqnr is not None and sqnr < check["min_sqnr_db"]:
        failures.append(f"SQNR {sqnr:.2f} dB < min_sqnr_db {check['min_sqnr_db']}")
    if "max_abs_error" in check and metrics["max_abs_error"] > check["max_abs_error"]:
        failures.append(f"max abs error {metrics['max_abs_error']:.4g} > max_abs_error "
                        f"{check['max_abs_error']}")
    top1 = metrics["top1_agreement"]
    if "min_top1_agreement" in check and top1 is not None \
            and top1 < check["min_top1_agreement"]:
        failures.append(f"top-1 agreement {top1:.3f} < min_top1_agreement "
                        f"{check['min_top1_agreement']}")
    return failures


def _describe(report: dict[str, Any]) -> str:
    m = report["metrics"]
    where = (f"record {report['record']}" if not report["online_prepare"]
             else f"ONLINE PREPARE ({report['warning']})")
    sqnr = "exact" if m["sqnr_db"] is None else f"{m['sqnr_db']:.1f} dB"
    return (f"run {report['run']} on {report['soc']}: {where}; {report['inferences']} "
            f"inference(s), SQNR {sqnr} vs float, checks passed")
