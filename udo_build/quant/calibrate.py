"""Calibration: run the float model over the calibration inputs and gather, in one pass, the
statistics of the tensors asked for (running min/max, and a histogram each when the quantizer
needs one; no activation is kept beyond the inference that made it). Only those tensors are
requested from the session, so the others can be fused away (a Relu runs in place on its
convolution's output). Custom ops run through the user's numpy kernels, which is why the vendor
needs a CPU implementation of every UDO for this step."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence, Sized
from typing import Any

import numpy as np

from ..ir import Model
from .stats import TensorStats

FLOAT_KINDS = "f"


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


def calibrate(model: Model, packages: Mapping[str, Any], feeds: Iterable[Mapping[str, np.ndarray]],
              tensors: Sequence[str] | None = None,
              histograms: bool = True,
              progress: Callable[[int, int], None] | None = None,
              observe: Callable[[Mapping[str, np.ndarray], Mapping[str, np.ndarray]], None]
              | None = None) -> tuple[dict[str, TensorStats], int]:
    """(statistics by tensor, number of inferences run), of `tensors` (default: every observed
    tensor); without `histograms`, the statistics are min, max and count only. `progress` is
    told (inferences done, their number when `feeds` is sized, else 0) after each; `observe`,
    if given, sees each inference's feed and the float tensors it made (to keep some)."""
    from ..runtime.float_session import Session

    session = Session(model, packages)
    names = observed_tensors(model) if tensors is None else list(tensors)
    produced = [n for n in names if n not in {t.name for t in model.graph.inputs}]
    stats = {name: TensorStats(histogram=histograms) for name in names}
    count = 0
    total = len(feeds) if isinstance(feeds, Sized) else 0
    for feed in feeds:
        with np.errstate(all="ignore"):  # values outside a kernel's domain: NaN, as ONNX says
            outputs = session.run(feed, produced)
        if observe is not None:
            observe(feed, outputs)
        for name, value in [*feed.items(), *outputs.items()]:
            array = np.asarray(value)
            if name in stats and array.dtype.kind in FLOAT_KINDS:
                stats[name].add(array)
        count += 1
        if progress is not None:
            progress(count, total)
    return {k: v for k, v in stats.items() if not v.empty}, count
