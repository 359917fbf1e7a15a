"""Every benchmark of bench/ at a small size, so that none can rot unseen: CI runs this script
(.ci/run), and a bench that crashes, exits 1 or runs past its time limit fails it.

    python bench/smoke.py [--only NAME,...] [--list]

Each entry is the bench's own command line at a size that runs in seconds to a minute on CI's
2-core machine. Correctness checks (bit-exact paths, byte-identical outputs, keys built once,
the conformance baseline of the cases run) keep their verdicts at this size; speed and scaling
targets that only mean something at the real size are reported by the benches' `--smoke` modes
without failing (each bench's docstring says which). The figures that count are measured at
the real size and recorded in bench/RESULTS.md with their commands.

Prints one line per bench (verdict, seconds) and the tail of the output of each that failed;
exits 1 when one failed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

BENCH = Path(__file__).resolve().parent


@dataclass(frozen=True)
class Smoke:
    name: str
    argv: tuple[str, ...]
    limit_s: int  # a generous bound on CI's machine: hitting it is a failure


SMOKES = (
    Smoke("calibration", ("calibration.py", "--model", "squeezenet", "--calibration", "2",
                          "--repeats", "1"), 180),
    Smoke("conformance", ("conformance.py", "--cases", "test_conv_with_strides_padding",
                          "test_maxpool_2d_pads", "test_softmax_axis_1",
                          "test_reduce_mean_default_axes_keepdims_example",
                          "test_gemm_default_single_elem_vector_bias", "--workers", "2"), 300),
    # a real check at this size: t(32k) / t(8k) <= 8 (linear gives about 4, quadratic 16)
    Smoke("cores", ("cores.py", "--smoke"), 180),
    Smoke("conv_layers", ("conv_layers.py", "--smoke"), 120),
    Smoke("conv_chain", ("conv_layers.py", "--smoke", "--chain"), 120),
    Smoke("convert", ("convert.py", "--sizes", "8000,32000", "--repeats", "3",
                      "--max-ratio", "8"), 300),
    Smoke("deploy", ("deploy.py", "--socs", "sm8550", "--levels", "2", "--calibration", "1"),
          300),
    Smoke("distributed", ("distributed_builds.py", "--smoke"), 300),
    # --kernels-of this checkout: the in-process A/B of two kernel libraries runs (its own)
    Smoke("emulator", ("emulator.py", "--smoke", "--kernels-of", str(BENCH.parent)), 180),
    Smoke("faults", ("faults.py", "--smoke"), 300),
    Smoke("llm", ("llm.py", "--size", "tiny"), 300),
    Smoke("noop", ("noop.py", "--smoke", "--no-profile"), 120),
    Smoke("prepare", ("prepare.py", "--sizes", "300,900", "--repeats", "1", "--models",
                      "squeezenet", "--int8", "squeezenet", "--levels", "2"), 180),
    Smoke("quant", ("quant.py", "--smoke", "--kernels-of", str(BENCH.parent)), 240),
    Smoke("quant_algorithms", ("quant_algorithms.py", "--smoke"), 300),
    Smoke("quant_mixed", ("quant_algorithms.py", "--mixed", "--smoke"), 300),
    Smoke("record_size", ("record_size.py", "--model", "squeezenet"), 120),
    Smoke("remote_grpc", ("remote.py", "--backend", "grpc", "--smoke"), 300),
    Smoke("remote_http", ("remote.py", "--backend", "http", "--smoke"), 300),
    Smoke("remote_s3", ("remote.py", "--backend", "s3", "--smoke"), 300),
    Smoke("stress", ("stress.py", "--targets", "5", "--processes", "2", "--kills", "2"), 180),
)


def run(smoke: Smoke) -> tuple[bool, float, str]:
    started = time.perf_counter()
    script, *rest = smoke.argv
    try:  # in a folder of its own: what a bench leaves in its working folder goes with it
        with tempfile.TemporaryDirectory(prefix=f"udo-smoke-{smoke.name}-") as cwd:
            proc = subprocess.run([sys.executable, str(BENCH / script), *rest], cwd=cwd,
                                  capture_output=True, text=True, timeout=smoke.limit_s,
                                  env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"").decode(errors="replace") if isinstance(exc.stdout, bytes) \
            else exc.stdout or ""
        return False, time.perf_counter() - started, f"{out}\nran past {smoke.limit_s} s"
    return (proc.returncode == 0, time.perf_counter() - started,
            f"{proc.stdout}{proc.stderr}\nexit {proc.returncode}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated bench names")
    parser.add_argument("--list", action="store_true", help="print the commands and exit")
    args = parser.parse_args(argv)
    chosen = SMOKES
    if args.only:
        names = args.only.split(",")
        unknown = sorted(set(names) - {s.name for s in SMOKES})
        if unknown:
            parser.error(f"no smoke run named {', '.join(unknown)}; there are "
                         f"{', '.join(s.name for s in SMOKES)}")
        chosen = tuple(s for s in SMOKES if s.name in names)
    if args.list:
        for smoke in chosen:
            print(f"python bench/{' '.join(smoke.argv)}")
        return 0
    failed = []
    for smoke in chosen:
        ok, seconds, output = run(smoke)
        print(f"{'PASS' if ok else 'FAIL'}  {smoke.name:<12} {seconds:6.1f} s   "
              f"python bench/{' '.join(smoke.argv)}", flush=True)
        if not ok:
            failed.append((smoke, output))
    for smoke, output in failed:
        tail = "\n".join(output.splitlines()[-30:])
        print(f"\n--- {smoke.name}: the last lines of its output ---\n{tail}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
