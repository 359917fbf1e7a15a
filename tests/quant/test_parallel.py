"""Calibration and the per-layer SQNR over several workers: the same statistics, encodings and
figures as in one process, bit for bit (udo_build.runtime.pool, udo_build.quant.calibrate)."""

from __future__ import annotations

import numpy as np
import pytest

from udo_build.errors import Diagnostics, UserError
from udo_build.kernels.blas import blas_threads
from udo_build.kernels.load import load_kernels
from udo_build.model.onnx_import import import_onnx, load_onnx
from udo_build.opdef import recipe_package
from udo_build.quant.calibrate import calibrate, calibration_request
from udo_build.quant.fold import fold_for_quantization
from udo_build.quant.pipeline import _calibrated_tensors, quantize_and_measure
from udo_build.quant.settings import QuantizeSettings
from udo_build.quant.stats import TensorStats
from udo_build.runtime.float_session import Session

from .test_pipeline import EXAMPLES, OPS


@pytest.fixture(scope="module")
def example():  # type: ignore[no-untyped-def]
    """The softplus example's model, its kernels, and six inputs (as tests/quant/test_pipeline)."""
    defs = recipe_package(None, None, None, [OPS / "softplus.xml", OPS / "swish.json"],
                          Diagnostics())
    model = import_onnx(load_onnx(EXAMPLES / "softplus/model/net.onnx"), opdefs=defs)
    (package,) = load_kernels(OPS / "kernels.py")
    rng = np.random.default_rng(3)
    feeds = [{"input": rng.standard_normal((1, 3, 32, 32)).astype(np.float32)}
             for _ in range(6)]
    return model, {"SoftplusPackage": package}, feeds


def growing(feeds: list[dict[str, np.ndarray]]) -> list[dict[str, np.ndarray]]:
    """Inputs whose ranges grow, up then down, so that the histograms grow both ways."""
    return [{"input": f["input"] * (1 + i) + (-2.0) ** i} for i, f in enumerate(feeds)]


def _stats(stats: dict[str, TensorStats]) -> dict[str, tuple]:
    return {n: (s.min, s.max, s.count, s.lo, s.hi, s.hist.tobytes()) for n, s in stats.items()}


def test_statistics_are_the_bits_of_one_process_adding_input_after_input(example) -> None:  # type: ignore[no-untyped-def]
    model, packages, feeds = example
    feeds = growing(feeds)
    prepared = fold_for_quantization(model)
    names = _calibrated_tensors(prepared)
    by_cores = [_stats(calibrate(prepared, packages, feeds, names, cores=cores)[0])
                for cores in (1, 2, 3)]
    assert by_cores[0] == by_cores[1] == by_cores[2]
    # the definition: TensorStats.add of each tensor, input after input
    oracle = {name: TensorStats() for name in names}
    first = {name: TensorStats() for name in names}
    session = Session(prepared, packages)
    with blas_threads(1), np.errstate(all="ignore"):
        for i, feed in enumerate(feeds):
            outputs = session.run(feed, calibration_request(prepared, names))
            for name, value in [*feed.items(), *outputs.items()]:
                oracle[name].add(value)
                if i == 0:
                    first[name].add(value)
    assert by_cores[0] == _stats({n: s for n, s in oracle.items() if not s.empty})
    # the ranges grew with the inputs, up and down (else this test would show little)
    assert all(s.hi - s.lo >= 4 * (first[n].hi - first[n].lo) for n, s in oracle.items())
    assert any(s.lo < first[n].lo for n, s in oracle.items())


@pytest.mark.parametrize("quantizer", ["tf", "enhanced"])
def test_encodings_and_layer_figures_do_not_depend_on_the_workers(example, quantizer: str) -> None:  # type: ignore[no-untyped-def]
    """Calibration over 1, 2 or 3 processes (the quantize step's count reaches it: its
    progress is told that many), and the measure asking the float model for calibration's
    tensors again: the same encodings and layers.json bytes."""
    model, packages, feeds = example
    feeds = growing(feeds)
    settings = QuantizeSettings(quantizer=quantizer, report_inputs=4)
    found = set()
    told: list[int] = []
    for cores in (1, 2, 3):
        told.clear()
        qmodel, figures = quantize_and_measure(model, packages, lambda: iter(feeds), settings,
                                               progress=lambda done, total: told.append(total),
                                               cores=cores, count=len(feeds))
        assert figures is not None and figures.inputs == 4
        assert told == [len(feeds)] * len(feeds)  # calibration knew the count (0: no workers)
        found.add((qmodel.encodings_json(), figures.to_bytes()))
    assert len(found) == 1


@pytest.mark.parametrize("cores", [1, 3])
def test_an_input_that_fails_is_named(example, cores: int) -> None:  # type: ignore[no-untyped-def]
    model, packages, feeds = example
    feeds = [*feeds[:4], {"input": np.zeros((1, 3, 16, 16), np.float32)}, *feeds[4:]]
    with pytest.raises(UserError, match="calibration input 4: .*input"):
        calibrate(fold_for_quantization(model), packages, feeds, cores=cores)
