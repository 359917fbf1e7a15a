"""The settings of the quantize step's optional algorithms: AdaRound (the `adaround` action,
udo_build.quant.adaround), the mixed precision search's target (`quantize.target`, the
`mixed-search` action) and the per-tensor widths it chooses (udo_build.quant.mixed_precision).

Apart from settings.py (which holds their key parameters): a build that runs neither algorithm,
a no-op build among them, never defines these types.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any, ClassVar

from .settings import ADAROUND_PARAMS, TARGET_PARAMS


# The settings of the `adaround` action (udo_build.quant.adaround), apart from the modules that
# run it: the plan and the kind read them, and a no-op build imports no numpy.
@dataclass(frozen=True)
class AdaroundSettings:
    iterations: int = 200
    samples: int = 512  # input patches per layer
    reg_weight: float = 0.01
    seed: int = 0

    KEY_PARAMS: ClassVar[tuple[str, ...]] = ADAROUND_PARAMS

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

    KEY_PARAMS: ClassVar[tuple[str, ...]] = TARGET_PARAMS

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
