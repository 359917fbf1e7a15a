"""Calibration: run the float model over the calibration inputs and gather, in one pass, the
statistics of the tensors asked for (running min/max, and a histogram each when the quantizer
needs one; no activation is kept beyond the inference that made it). Only those tensors are
requested from the session, so the others can be fused away (a Relu runs in place on its
convolution's output). Custom ops run through the user's numpy kernels, which is why the vendor
needs a CPU implementation of every UDO for this step.

The inputs spread over `cores` worker processes (udo_build.runtime.pool), with statistics the
same bits as one process makes: each input's min, max and count come back and are taken in
input order; a histogram's range follows from the ranges of the inputs before it, so the worker
running input k asks for it (the pool answers in input order, from the ranges alone) and counts
at that range, and its counts are added in input order, where one process would have added
them. Counts are integers: nothing of their sum depends on the order they arrive in.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Mapping, Sequence, Sized
from typing import Any

import numpy as np

from ..ir import Model
from ..runtime.pool import Job, labels, ordered, workers_for
from .stats import BINS, TensorStats, finite_span, histogram

FLOAT_KINDS = "f"
Span = tuple[float, float, int]  # the finite values' min, max and count
Observer = Callable[[Mapping[str, np.ndarray], Mapping[str, np.ndarray]], None]


def observed_tensors(model: Model) -> list[str]:
    """The graph inputs and node outputs that are (or may be) float tensors."""
    graph = model.graph
    infos = graph.infos()
    names = [t.name for t in graph.inputs]
    for node in graph.nodes:
        for out in node.outputs:
            info = infos.get(out)
            if out and (info is None or np.dtype(info.dtype).kind in FLOAT_KINDS):
                names.append(out)
    return list(dict.fromkeys(names))


def calibration_request(model: Model, tensors: Sequence[str] | None = None) -> list[str]:
    """The tensors calibration asks the session for: `tensors` (default: every observed one)
    but the graph inputs."""
    names = observed_tensors(model) if tensors is None else list(tensors)
    inputs = {t.name for t in model.graph.inputs}
    return [n for n in names if n not in inputs]


def calibrate(model: Model, packages: Mapping[str, Any], feeds: Iterable[Mapping[str, np.ndarray]],
              tensors: Sequence[str] | None = None,
              histograms: bool = True,
              progress: Callable[[int, int], None] | None = None,
              observe: Observer | None = None, cores: int = 1, count: int | None = None,
              label: Callable[[int], str] | None = None) -> tuple[dict[str, TensorStats], int]:
    """(statistics by tensor, number of inferences run), of `tensors` (default: every observed
    tensor); without `histograms`, the statistics are min, max and count only. `progress` is
    told (inferences done, their number when known, else 0) after each. `cores`: how many the
    inferences may spread over, `count` (else len(feeds)) their number; `label` names an input
    in errors. `observe`, if given, sees each inference's feed and the float tensors it made (to
    keep some) when the inferences run in this process; over several workers it is not called
    (the tensors stay in the worker that made them)."""
    names = observed_tensors(model) if tensors is None else list(tensors)
    total = count if count is not None else (len(feeds) if isinstance(feeds, Sized) else None)
    keep = observe is not None and workers_for(cores, total) == 1
    job = _Calibration(model, packages, names, histograms, keep)
    stats = {name: TensorStats(histogram=histograms) for name in names}
    done = 0
    named = label or labels("calibration input")
    for _, (spans, counts, kept) in ordered(job, feeds, cores, total, named):
        if observe is not None and kept is not None:
            observe(*kept)
        for name, (lo, hi, size) in spans.items():
            stats[name].observe(lo, hi, size)
            if histograms:
                stats[name].add_counts(counts[name])
        done += 1
        if progress is not None:
            progress(done, total or 0)
    return {k: v for k, v in stats.items() if not v.empty}, done


Found = tuple[dict[str, Span], dict[str, np.ndarray], tuple[Any, Any] | None]


class _Calibration(Job[Mapping[str, np.ndarray], Found]):
    """One inference: the spans of its tensors, and (asked at the range its turn gives) their
    histograms; its feed and tensors too when `keep` (in this process only)."""

    def __init__(self, model: Model, packages: Mapping[str, Any], names: Sequence[str],
                 histograms: bool, keep: bool) -> None:
        self.model, self.packages, self.keep = model, packages, keep
        self.names, self.histograms = set(names), histograms
        self.request = calibration_request(model, names)
        self.ranges = {name: TensorStats() for name in names}  # the ranges alone, in order
        self.session: Any = None

    def start(self) -> None:
        from ..runtime.float_session import Session

        if self.session is None:  # and its plan: forked workers inherit it, built once
            self.session = Session(self.model, self.packages)
            self.session.plan(tuple(self.request))

    def work(self, index: int, feed: Mapping[str, np.ndarray]) -> Generator[Any, Any, Found]:
        with np.errstate(all="ignore"):  # values outside a kernel's domain: NaN, as ONNX says
            outputs = self.session.run(feed, self.request)
        found = {}
        for name, value in [*feed.items(), *outputs.items()]:
            array = np.asarray(value)
            if name in self.names and array.dtype.kind in FLOAT_KINDS:
                span = finite_span(array)
                if span is not None:
                    found[name] = span
        spans = {name: (lo, hi, x.size) for name, (x, lo, hi) in found.items()}
        counts = {}
        if self.histograms:
            ranges = yield spans
            counts = {name: histogram(x, BINS, *ranges[name]) for name, (x, _, _) in found.items()}
        return spans, counts, (feed, outputs) if self.keep else None

    def scan(self, index: int, spans: dict[str, Span]) -> dict[str, tuple[float, float]]:
        """The histogram range of each tensor of input `index`, as one process has it then."""
        answer = {}
        for name, (lo, hi, size) in spans.items():
            ranges = self.ranges[name]
            ranges.observe(lo, hi, size)
            answer[name] = (ranges.lo, ranges.hi)
        return answer

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "session": None}  # a spawned worker starts its own
