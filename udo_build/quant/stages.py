"""The per-layer SQNR before and after each quantization algorithm: `quant/layers.json` when a
recipe lists `quantize.algorithms`.

The document is quantize's (udo_build.quant.report.LayerFigures: `inputs`, `layers` with the
final figures, which the report page reads) plus `stages`: one entry per step in the order they
ran, {"step": "quantize" | "adaround" | "bias_correction", "sqnr_db": [one figure per layer of
`layers`, null when exact]}; the quantize stage says `"equalized": true` when CLE ran before
it (the figures without CLE would need a second calibration: they are not measured).

    document = with_stage(previous_layers_json, "adaround", figures, equalized)
"""

from __future__ import annotations

import json
from typing import Any

from .report import LayerFigures


def with_stage(previous: bytes, step: str, figures: LayerFigures,
               equalized: bool = False) -> bytes:
    """`figures` (after `step`) as the document, with the stages of `previous` (the layers
    document of the step before: quantize's, or another algorithm's) and this one."""
    before = json.loads(previous)
    first: dict[str, Any] = {"step": "quantize",
                             "sqnr_db": [layer["sqnr_db"] for layer in before["layers"]]}
    if equalized:
        first["equalized"] = True
    stages: list[dict[str, Any]] = before.get("stages") or [first]
    document = json.loads(figures.to_bytes())
    document["stages"] = [*stages, {"step": step, "sqnr_db": [layer["sqnr_db"]
                                                               for layer in document["layers"]]}]
    return (json.dumps(document, indent=1, sort_keys=True) + "\n").encode()

