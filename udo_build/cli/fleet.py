"""`udo-build fleet RECIPE --devices ...`: for each device and run configuration, the record of
the recipe it would load, or that it would fall back to preparing online, and why (every record
it saw, with the reason it was rejected). """

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from .common import device_arguments, devices
from .reporter import Reporter

if TYPE_CHECKING:
    from ..soc.target import CompileTarget


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("recipe", metavar="RECIPE", help="the recipe file (YAML)")
    device_arguments(parser)


def run(args: argparse.Namespace, rep: Reporter) -> int:
    from ..errors import Diagnostics
    from ..recipe import load_recipe
    from ..soc.compat import Prepared, choose

    recipe = load_recipe(args.recipe, Diagnostics())
    fleet = devices(args, recipe.socs)
    native = native_dims(recipe)
    records = [Prepared.of(t.compile_target(), native, t.id) for t in recipe.targets]
    rows, found = [], []
    for name, target, mode in _configs(recipe):
        want = Prepared.of(target, native)
        for device in fleet:
            best, rejected = choose(records, device, mode, want)
            found.append({"device": device.name, "run": name,
                          "record": best.name if best else None,
                          "online_prepare": best is None,
                          "rejected": [{"record": r.name, "reason": why}
                                       for r, why in rejected]})
            rows.append([device.name, device.arch, name,
                         best.name if best else "online prepare (slow init)",
                         "" if best else _why(rejected)])
    if rep.mode == "json":
        rep.emit({"ok": True, "recipe": recipe.name, "devices": found})
        return 0
    rep.table(f"{recipe.name}: records per device", ["device", "arch", "run", "loads", "why not"],
              rows)
    return 0


def _configs(recipe: Any) -> list[tuple[str, CompileTarget, str]]:
    """(name, what it asks of a record, mode) of each run configuration: the recipe's runs,
    else each (dims, outputs) it prepares."""
    if recipe.runs:
        return [(r.name, r.compile_target(), r.mode) for r in recipe.runs]
    seen: dict[str, tuple[str, CompileTarget, str]] = {}
    for t in recipe.targets:
        name = f"{t.input_dimensions.label}/{t.outputs.label}"
        seen.setdefault(name, (name, t.compile_target(), "permissive"))
    return list(seen.values())


def native_dims(recipe: Any) -> dict[str, list[int]]:
    """The model's own input dimensions (what a target without input_dimensions prepares)."""
    if recipe.model is None:
        return {}
    from ..model.onnx_import import load_onnx

    proto = load_onnx(recipe.model.onnx)
    constants = {i.name for i in proto.graph.initializer}
    out = {}
    for value in proto.graph.input:
        dims = value.type.tensor_type.shape.dim
        if value.name not in constants and all(d.HasField("dim_value") for d in dims):
            out[value.name] = [d.dim_value for d in dims]
    return out


def _why(rejected: list[Any]) -> str:
    if not rejected:
        return "the recipe prepares no record"
    reasons = sorted({why for _, why in rejected})
    return "; ".join(reasons[:3]) + (f"; +{len(reasons) - 3} more" if len(reasons) > 3 else "")
