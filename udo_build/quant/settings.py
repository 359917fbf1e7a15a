"""The quantizer settings: the parameters of a `quantize` action.

    settings = QuantizeSettings.from_params(ctx.params)
    quantize_model(model, packages, feeds, settings.quantizer_params())

Bit widths of activations, weights and biases, per-channel weights, the quantizer that picks
activation ranges (tf: min/max, enhanced: a range search minimizing the error, symmetric), and
`float_fallback` (no calibration: only the override encodings are used, every other tensor stays
float). See udo_build.quant.pipeline. `report_inputs`: how many calibration inputs the per-layer
SQNR is measured over after quantizing (udo_build.quant.report; 0: not measured).
`weights_block_size` and `lpbq`: weights per block along their input axis, LPBQ or not
(udo_build.quant.blocks); written into the parameters only when set.

The settings of the quantize step's optional algorithms (AdaRound, the mixed precision search
and the widths it chooses) are in algorithm_settings.py, their key parameters here: every build
with a quantize step imports this module (its plan and its kinds), and one that runs neither
algorithm need not define their types.
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
    report_inputs: int = 1
    weights_block_size: int = 0  # > 0: weights per block along the input axis
    lpbq: bool = False  # the blocks' scales as LPBQ (per-channel float x per-block integer)

    KEY_PARAMS: ClassVar[tuple[str, ...]] = ("act_bitwidth", "weights_bitwidth",
                                             "bias_bitwidth", "per_channel", "quantizer",
                                             "float_fallback", "report_inputs",
                                             "weights_block_size", "lpbq")
    # parameters written only when set, so the settings of earlier builds read as they were
    UNSET_OMITTED: ClassVar[tuple[str, ...]] = ("weights_block_size", "lpbq")

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> QuantizeSettings:
        return cls(**{name: params[name] for name in cls.KEY_PARAMS
                      if name in params or name not in cls.UNSET_OMITTED})

    def to_params(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.KEY_PARAMS
                if getattr(self, name) or name not in self.UNSET_OMITTED}

    def quantizer_params(self) -> dict[str, Any]:
        """The parameters the quantization itself reads (and the quantized bundle records): all
        but `report_inputs`, which only decides what is measured afterwards."""
        return {k: v for k, v in self.to_params().items() if k != "report_inputs"}


# the key parameters of the `adaround` and `mixed-search` actions (algorithm_settings.py)
ADAROUND_PARAMS = ("iterations", "samples", "reg_weight", "seed")
TARGET_PARAMS = ("min_sqnr_db", "inputs")
