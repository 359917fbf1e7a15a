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
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
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


# The settings of the `adaround` action (udo_build.quant.adaround), here with the other quantizer
# settings: the plan and the kind read them, and a no-op build imports no numpy.
@dataclass(frozen=True)
class AdaroundSettings:
    iterations: int = 200
    samples: int = 512  # input patches per layer
    reg_weight: float = 0.01
    seed: int = 0

    KEY_PARAMS: ClassVar[tuple[str, ...]] = ("iterations", "samples", "reg_weight", "seed")

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> AdaroundSettings:
        return cls(**{name: params[name] for name in cls.KEY_PARAMS})

    def to_params(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.KEY_PARAMS}


# Mixed precision (udo_build.quant.mixed_precision): `quantize.target` chooses, per layer, the
# width of each activation (8 or 16 bits) and of each Conv/Gemm/MatMul weight (4 or 8 by
# default; 8 or 16 with quantize.target.weight_widths).
ACTIVATION_WIDTHS = (8, 16)
WEIGHT_WIDTHS = (4, 8)


@dataclass(frozen=True)
class TargetSettings:
    """`quantize.target`: the output SQNR (dB, of the model's outputs against the float model)
    to reach over the first `inputs` inferences of the held-out list."""

    min_sqnr_db: float
    inputs: int = 8

    KEY_PARAMS: ClassVar[tuple[str, ...]] = ("min_sqnr_db", "inputs")

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> TargetSettings:
        return cls(float(params["min_sqnr_db"]), int(params["inputs"]))

    def to_params(self) -> dict[str, Any]:
        return {"min_sqnr_db": self.min_sqnr_db, "inputs": self.inputs}


@dataclass(frozen=True)
class Widths:
    """Per-tensor bit widths the quantize step gives instead of its settings' (the mixed
    precision search's choice): activation tensor -> 8 | 16, weight -> 4 | 8. A tensor it does
    not name takes act_bitwidth / weights_bitwidth; override encodings still win.

    As bytes (the search's output `widths`, the quantize step's input `widths`): sorted JSON
    {"version": 1, "activations": {name: bits}, "weights": {name: bits}}."""

    activations: tuple[tuple[str, int], ...] = ()  # sorted by name
    weights: tuple[tuple[str, int], ...] = ()

    def activation(self, name: str, default: int) -> int:
        return self._by_name[0].get(name, default)

    def weight(self, name: str, default: int) -> int:
        return self._by_name[1].get(name, default)

    @cached_property
    def _by_name(self) -> tuple[dict[str, int], dict[str, int]]:
        return dict(self.activations), dict(self.weights)

    def to_bytes(self) -> bytes:
        import json

        doc = {"version": 1, "activations": dict(self.activations),
               "weights": dict(self.weights)}
        return (json.dumps(doc, indent=1, sort_keys=True) + "\n").encode()

    @classmethod
    def of(cls, activations: Mapping[str, int], weights: Mapping[str, int]) -> Widths:
        return cls(tuple(sorted(activations.items())), tuple(sorted(weights.items())))

    @classmethod
    def from_bytes(cls, data: bytes) -> Widths:
        import json

        doc = json.loads(data)
        return cls.of({k: int(v) for k, v in doc["activations"].items()},
                      {k: int(v) for k, v in doc["weights"].items()})
