"""The SoC table: hexagon architecture and VTCM size of each SoC udo-build knows.

The table is package data (`socs.json`). Some SoCs have no public VTCM size: their entry has
`vtcm_mb: null` and a recipe that targets them must state it under `socs:`. A recipe can also add
SoCs the table lacks or override an entry.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import NamedTuple

ARCHS: tuple[str, ...] = ("v65", "v66", "v68", "v69", "v73", "v75", "v79", "v81")


class Soc(NamedTuple):
    name: str
    arch: str
    vtcm_mb: float | None  # None: not public, must be stated by the recipe
    source: str = "table"  # "table" or "recipe"

    @property
    def arch_number(self) -> int:
        return int(self.arch[1:])

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "arch": self.arch, "vtcm_mb": self.vtcm_mb,
                "source": self.source}


@lru_cache(maxsize=1)
def builtin_socs() -> dict[str, Soc]:
    text = Path(__file__).with_name("socs.json").read_text(encoding="utf-8")
    table = json.loads(text)["socs"]
    return {name: Soc(name, row["arch"], row["vtcm_mb"]) for name, row in table.items()}


def soc_table(overrides: dict[str, dict[str, object]] | None = None) -> dict[str, Soc]:
    """The built-in table with a recipe's `socs:` entries merged over it."""
    table = dict(builtin_socs())
    for name, row in (overrides or {}).items():
        base = table.get(name)
        arch = row.get("arch", base.arch if base else None)
        vtcm = row.get("vtcm_mb", base.vtcm_mb if base else None)
        if arch is None:
            raise ValueError(f"SoC {name} needs an arch")  # the loader checks this first
        table[name] = Soc(name, str(arch), None if vtcm is None else mb(vtcm), "recipe")
    return table


def mb(value: object) -> float | int:
    """A VTCM size in MB, as an int when whole (8, not 8.0)."""
    number = float(value)  # type: ignore[arg-type]
    return int(number) if number.is_integer() else number
