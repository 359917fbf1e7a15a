"""The quantizer settings: the parameters of a `quantize` action.

    settings = QuantizeSettings.from_params(ctx.params)
    quantize_model(model, packages, feeds, settings.to_params())

Bit widths of activations, weights and biases, per-channel weights, the quantizer that picks
activation ranges (tf: min/max, enhanced: a range search minimizing the error, symmetric), and
`float_fallback` (no calibration: only the override encodings are used, every other tensor stays
float). See udo_build.quant.pipeline.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar


@dataclass(frozen=True)
class QuantizeSettings:
    act_bitwidth: int = 8
    weights_bitwidth: int = 8
    bias_bitwidth: int = 32
    per_channel: bool = False
    quantizer: str = "tf"
    float_fallback: bool = False

    KEY_PARAMS: ClassVar[tuple[str, ...]] = ("act_bitwidth", "weights_bitwidth",
                                             "bias_bitwidth", "per_channel", "quantizer",
                                             "float_fallback")

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> QuantizeSettings:
        return cls(**{name: params[name] for name in cls.KEY_PARAMS})

    def to_params(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.KEY_PARAMS}
