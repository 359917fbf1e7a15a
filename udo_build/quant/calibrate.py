"""Calibration: run the float model over the calibration inputs and gather, in one pass, the
statistics of the tensors asked for (running min/max, and a histogram each when the quantizer
needs one; no activation is kept beyond the inference that made it). Only those tensors are
requested from the session, so the others can be fused away (a Relu runs in place on its
convolution's output). Custom ops run through the user's numpy kernels, which is why the vendor
needs a CPU implementation of every UDO for this step.

The inputs spread over `cores` worker processes (udo_build.runtime.pool), with statistics the
same bits as one process makes: each input's min, max and count come back and are taken in
input order; a histogram's range follows from the ranges of the inputs before it, so the worker
running input k asks for it (the pool answers in input order on each tensor, from the ranges
alone) and counts at that range, and its counts are added in input order, where one process
would have added them. Counts are integers: nothing of their sum depends on the order they
arrive in.

Memory: the session hands each tensor over as it is made (`Session.stream`); its span and
histogram are taken (asking for the range, tensor by tensor) before the next step runs, and the
session frees it after its last reader. An inference holds the widest cut of its graph, not
every tensor it observes (an LLM's AR-128 step: 1124 of them, most of a gigabyte).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence, Sized
from itertools import chain
from typing import Any

import numpy as np

from ..ir import Model
from ..runtime.pool import Job, labels, ordered
from .stats import BINS, TensorStats, finite_span, histogram

FLOAT_KINDS = "f"
Span = tuple[float, float, int]  # the finite values' min, max and count


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
              cores: int = 1, count: int | None = None,
              label: Callable[[int], str] | None = None) -> tuple[dict[str, TensorStats], int]:
    """(statistics by tensor, number of inferences run), of `tensors` (default: every observed
    tensor); without `histograms`, the statistics are min, max and count only. `progress` is
    told (inferences done, their number when known, else 0) after each. `cores`: how many the
    inferences may spread over, `count` (else len(feeds)) their number; `label` names an input
    in errors."""
    names = observed_tensors(model) if tensors is None else list(tensors)
    total = count if count is not None else (len(feeds) if isinstance(feeds, Sized) else None)
    job = _Calibration(model, packages, names, histograms)
    stats = {name: TensorStats(histogram=histograms) for name in names}
    done = 0
    named = label or labels("calibration input")
    for _, (spans, counts) in ordered(job, feeds, cores, total, named):
        for name, (lo, hi, size) in spans.items():
            stats[name].observe(lo, hi, size)
            if histograms:
                stats[name].add_counts(counts[name])
        done += 1
        if progress is not None:
            progress(done, total or 0)
    return {k: v for k, v in stats.items() if not v.empty}, done


Found = tuple[dict[str, Span], dict[str, np.ndarray]]


class _Calibration(Job[Mapping[str, np.ndarray], Found]):
    """One inference: the span of each of its tensors and (asked, tensor by tensor as the
    session makes them, at the range its turn gives) their histograms."""

    def __init__(self, model: Model, packages: Mapping[str, Any], names: Sequence[str],
                 histograms: bool) -> None:
        self.model, self.packages = model, packages
        self.names, self.histograms = set(names), histograms
        self.request = calibration_request(model, names)
        self.ranges = {name: TensorStats() for name in names}  # the ranges alone, in order
        self.session: Any = None

    def start(self) -> None:
        from ..runtime.float_session import Session

        if self.session is None:  # and its plan: forked workers inherit it, built once
            self.session = Session(self.model, self.packages)
            self.session.plan(tuple(self.request))

    def work(self, index: int, feed: Mapping[str, np.ndarray]
             ) -> Generator[tuple[str, Span], tuple[float, float], Found]:
        spans: dict[str, Span] = {}
        counts: dict[str, np.ndarray] = {}
        made = _quietly(self.session.stream(feed, self.request))
        for name, value in chain(feed.items(), made):
            array = np.asarray(value)
            if name not in self.names or array.dtype.kind not in FLOAT_KINDS:
                continue
            found = finite_span(array)
            array = value = None  # held no longer: the session frees it after its last reader
            if found is None:
                continue
            x, lo, hi = found
            found = None
            spans[name] = (lo, hi, x.size)
            if self.histograms:
                counts[name] = histogram(x, BINS, *(yield name, spans[name]))
            x = None
        return spans, counts

    def scan(self, index: int, name: str, span: Span) -> tuple[float, float]:
        """The histogram range of tensor `name` of input `index`, as one process has it
        then."""
        ranges = self.ranges[name]
        ranges.observe(*span)
        return ranges.lo, ranges.hi

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "session": None}  # a spawned worker starts its own


def _quietly(made: Iterator[tuple[str, np.ndarray]]) -> Iterator[tuple[str, np.ndarray]]:
    """The session's tensors, made with values outside a kernel's domain NaN, as ONNX says
    (no warning: the statistics leave them out)."""
    while True:
        with np.errstate(all="ignore"):
            item = next(made, None)
        if item is None:
            return
        yield item
        item = None  # the caller has it: not held here while the next is made
