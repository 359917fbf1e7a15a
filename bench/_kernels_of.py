"""Another checkout's compiled kernels in this process, for `--kernels-of DIR` of
bench/emulator.py and bench/quant.py: the same session run on this checkout's library and on
DIR's, alternately, in one process.

A change to the C kernels (udo_build/kernels/c) is measured against the code before it: a
shared machine's speed drifts by up to 1.5x between two bench processes minutes apart, more than
most kernel changes move, so two processes compared are noise. Here both libraries run the same
session's plan on the same inputs, their turns rotated round by round (the first in a round
pays for what ran before it), and their results are checked to be the same bits first.

DIR's sources (its udo_build/kernels/c/*.c) are compiled with this checkout's compiler and
flags into a temporary file (the source files it has: an older checkout has fewer). An entry
point this checkout's loader expects and DIR's sources lack answers a call with an error, so a
bench of paths that use it fails instead of timing something else; the integer convolution
(c/qconv.c) answers that it has no VNNI, so the int8 path runs as that checkout ran it.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import statistics
import subprocess
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from udo_build.kernels import compiled

_STUB = """#include <stddef.h>
#define WEAK __attribute__((visibility("default"), weak))
WEAK int udo_conv_int(const void *x, int k, float zp, const ptrdiff_t *g, const float *p,
                      const float *b, int r, float *y) { return 2; }
WEAK int udo_conv_onto_addend(const ptrdiff_t *g) { return 0; }
WEAK void udo_pair_sum(const unsigned char *a, const unsigned char *b, ptrdiff_t n,
                       const double *s, int k, unsigned char *o) {}
WEAK int udo_qconv_isa(void) { return 0; }
WEAK ptrdiff_t udo_qconv_packed_size(ptrdiff_t m, ptrdiff_t c, ptrdiff_t t) { return 0; }
WEAK void udo_qconv_pack(const signed char *w, ptrdiff_t m, ptrdiff_t c, ptrdiff_t t,
                         signed char *o) {}
WEAK int udo_qconv(const void *x, int s, int zu, const ptrdiff_t *g, const signed char *p,
                   const int *c, const double *f, const double *n, const int *i,
                   const unsigned char *o, void *y) { return 2; }
"""


@functools.cache
def library_of(root: Path) -> compiled.Library:
    """DIR's kernels (root: a checkout of udo-build), compiled and loaded (once a process)."""
    sources = [root / "udo_build" / "kernels" / "c" / s.name for s in compiled.SOURCES]
    if not sources[0].is_file():
        raise SystemExit(f"--kernels-of {root}: no {sources[0]} (a checkout of udo-build?)")
    sources = [s for s in sources if s.is_file()]  # an older checkout has fewer
    cc = compiled.compiler()
    if cc is None:
        raise SystemExit("--kernels-of needs a C compiler (cc, gcc or $CC)")
    folder = Path(tempfile.mkdtemp(prefix="udo-kernels-of-"))
    atexit.register(shutil.rmtree, folder, True)  # the library stays loaded: a file unlinked
    stub = folder / "stub.c"
    stub.write_text(_STUB)
    out = folder / "kernels.so"
    done = subprocess.run([*cc, *compiled.FLAGS, *map(str, sources), str(stub), "-o", str(out),
                           "-lm"], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"--kernels-of {root}: the compiler failed:\n{done.stderr[-2000:]}")
    return compiled._open(out)


def using(lib: compiled.Library, fn: Callable[[], object]) -> Callable[[], object]:
    """fn, run with `lib` as the process's compiled library."""
    def run() -> object:
        previous = compiled._LOADED.get("library")
        compiled._LOADED["library"] = lib
        try:
            return fn()
        finally:
            compiled._LOADED["library"] = previous
    return run


def compare(runs: dict[str, Callable[[], object]], base: str, blas: Any, warmup: int,
            rounds: int) -> None:
    """Time `runs` (`rotated`, BLAS on 1 thread) and print each one's thread CPU median and
    10th percentile, and their ratios to run `base`'s."""
    threads = blas.threads() or 1
    blas.set_threads(1)
    times = rotated(runs, warmup, rounds)
    blas.set_threads(threads)
    median = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    low = {k: float(np.percentile(v, 10)) * 1e3 for k, v in times.items()}
    width = max(len(k) for k in runs)
    for key in runs:
        print(f"    {key:{width}} median {median[key]:7.2f} ms ({median[key] / median[base]:.3f}x "
              f"{base}), 10th percentile {low[key]:7.2f} ms ({low[key] / low[base]:.3f}x)")


def rotated(runs: dict[str, Callable[[], object]], warmup: int,
            rounds: int) -> dict[str, list[float]]:
    """Each run's thread CPU seconds over `rounds` rounds after `warmup`, the order of the
    runs rotated each round."""
    keys = list(runs)
    times: dict[str, list[float]] = {k: [] for k in keys}
    for r in range(warmup + rounds):
        shift = r % len(keys)
        for key in keys[shift:] + keys[:shift]:
            start = time.thread_time()
            runs[key]()
            if r >= warmup:
                times[key].append(time.thread_time() - start)
    return times
