"""The parameters of a `package` action: the backend, the dsp arches to build for, per op config
entry whether the recipe gives numpy kernels (ops without get a kernels stub), and the configs'
file names (the package copies the configs by these names, so a renamed config regenerates it).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar


@dataclass(frozen=True)
class PackageParams:
    backend: str
    archs: tuple[str, ...] = ()
    with_kernels: tuple[bool, ...] = ()
    config_names: tuple[str, ...] = ()

    KEY_PARAMS: ClassVar[tuple[str, ...]] = ("backend", "archs", "with_kernels", "config_names")

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> PackageParams:
        return cls(str(params["backend"]), tuple(params.get("archs") or ()),
                   tuple(bool(k) for k in params.get("with_kernels") or ()),
                   tuple(params.get("config_names") or ()))

    def to_params(self) -> dict[str, Any]:
        return {"backend": self.backend, "archs": list(self.archs),
                "with_kernels": list(self.with_kernels), "config_names": list(self.config_names)}

    def has_kernels(self, config: int | None) -> bool:
        """Whether the config entry at index `config` (None: no entry) gives numpy kernels."""
        return config is not None and 0 <= config < len(self.with_kernels) \
            and self.with_kernels[config]
