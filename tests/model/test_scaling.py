"""Converting a model and describing its bundle (`convert`, `info`) cost work linear in the node
count. Work is counted as the Python lines the interpreter executes (a loop's every iteration
is one more), so the test does not depend on the machine's speed; onnx's checker and shape
inference (C++) are not counted."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

from udo_build.ir.bundle import Bundle, read_bundle
from udo_build.model.info import describe
from udo_build.model.onnx_import import import_onnx

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "bench"))
try:
    from convert import residual_chain  # the benchmark's generated models
finally:
    sys.path.pop(0)

SMALL, LARGE = 300, 1200


def _lines(work: Callable[[], object]) -> int:
    count = 0

    def tracer(frame, event, arg):  # type: ignore[no-untyped-def]
        nonlocal count
        count += event == "line"
        return tracer

    sys.settrace(tracer)
    try:
        work()
    finally:
        sys.settrace(None)
    return count


def _convert_and_describe(nodes: int) -> Callable[[], object]:
    proto = residual_chain(nodes)

    def work() -> object:
        bundle = read_bundle(Bundle(import_onnx(proto)).to_bytes())
        return describe(bundle)

    return work


def test_convert_and_info_work_grows_linearly_with_the_node_count() -> None:
    small = _convert_and_describe(SMALL)
    large = _convert_and_describe(LARGE)
    small(), large()  # imports and caches once
    assert len(large()["layers"]) >= LARGE
    ratio = _lines(large) / _lines(small)
    assert ratio < 1.15 * LARGE / SMALL, f"work grew {ratio:.1f}x for {LARGE / SMALL:g}x nodes"
