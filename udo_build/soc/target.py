"""What one offline cache record is prepared for: the SoC facts (hexagon arch, VTCM size), the
optimization level, the input dimensions, the graph outputs and the precision.

`CompileTarget` is the parameters of a `prepare` action and what a run asks of a record: the
recipe turns its targets and runs into one (udo_build.recipe.model), the compiler prepares for
one (udo_build.compiler.driver), the runtime chooses a record for one
(udo_build.runtime.records). It lives here, below all of them, and imports nothing heavy.

    target = CompileTarget.from_params(ctx.params)
    target.to_params()  # the action parameters: exactly what enters a prepare's key
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

DEFAULT_LEVEL = 2
DEFAULT_PRECISION = "fp16"
PRECISIONS = ("int8", "fp16")  # what recipes and the command line offer
# internal: a float preparation that keeps float32 (constants and arithmetic), the reference a
# run compares with at input dimensions other than the model's, and what tests of the
# compiler's rewrites compare with the unprepared model; no device holds such a record
FLOAT_REFERENCE = "fp32"


@dataclass(frozen=True)
class CompileTarget:
    """`input_dimensions` by input name ({}: the model's own); `outputs` "default" (all outputs
    of the last layer), {"layers": [...]} and/or {"tensors": [...]}; precision int8 or fp16
    (or the internal FLOAT_REFERENCE, fp32)."""

    arch: str
    vtcm_mb: float
    optimization_level: int = DEFAULT_LEVEL
    input_dimensions: Mapping[str, Sequence[int]] = field(default_factory=dict)
    outputs: Any = "default"
    precision: str = DEFAULT_PRECISION

    KEY_PARAMS: ClassVar[tuple[str, ...]] = ("arch", "vtcm_mb", "optimization_level",
                                             "input_dimensions", "outputs", "precision")

    @property
    def vtcm_bytes(self) -> int:
        return int(float(self.vtcm_mb) * (1 << 20))

    @property
    def budget(self) -> int:
        return self.vtcm_bytes // 4 if self.optimization_level >= 3 else self.vtcm_bytes

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> CompileTarget:
        """The target of action parameters (absent or empty values take the defaults)."""
        return cls(str(params["arch"]), params["vtcm_mb"],
                   int(params.get("optimization_level") or DEFAULT_LEVEL),
                   dict(params.get("input_dimensions") or {}),
                   params.get("outputs") or "default",
                   str(params.get("precision") or DEFAULT_PRECISION))

    def to_params(self) -> dict[str, Any]:
        """Plain JSON values; the VTCM size keeps its type (8 and 8.0 key differently)."""
        return {"arch": self.arch, "vtcm_mb": self.vtcm_mb,
                "optimization_level": self.optimization_level,
                "input_dimensions": {k: [int(d) for d in v]
                                     for k, v in self.input_dimensions.items()},
                "outputs": _plain(self.outputs), "precision": self.precision}


def _plain(outputs: Any) -> Any:
    if isinstance(outputs, Mapping):
        return {k: list(v) for k, v in outputs.items()}
    return outputs
