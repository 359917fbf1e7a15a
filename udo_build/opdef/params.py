"""The parameters of an `opdef` action: the recipe's package name, domain and version (None:
the first op config's) and the backends to resolve the package for (see `recipe_package` and
`resolve_all`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar


@dataclass(frozen=True)
class OpdefParams:
    package_name: str | None
    domain: str | None
    version: str | None
    backends: tuple[str, ...]

    KEY_PARAMS: ClassVar[tuple[str, ...]] = ("package_name", "domain", "version", "backends")

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> OpdefParams:
        return cls(params["package_name"], params["domain"], params["version"],
                   tuple(params["backends"]))

    def to_params(self) -> dict[str, Any]:
        return {"package_name": self.package_name, "domain": self.domain,
                "version": self.version, "backends": list(self.backends)}
