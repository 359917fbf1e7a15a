"""`udo-build validate RECIPE`: check the recipe, every op config it names and the recipe against
its model (udo_build.recipe.against: inputs, output names, every run served); print the targets.
Nothing is built and nothing is written."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ..errors import Diagnostics, UserError, display_path
from .reporter import Reporter

if TYPE_CHECKING:
    from ..opdef import OpPackageDef
    from ..recipe import Recipe


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("recipe", metavar="RECIPE", help="the recipe file (YAML)")


def run(args: argparse.Namespace, rep: Reporter) -> int:
    from ..opdef import recipe_package, resolve_all
    from ..recipe import load_recipe
    from ..recipe.against import check_against_model

    diag = Diagnostics()
    recipe = load_recipe(args.recipe, diag)
    package = resolved = None
    if recipe.package is not None:
        spec = recipe.package
        package = recipe_package(spec.name, spec.domain, spec.version,
                                 [op.config for op in spec.ops], diag)
        resolved = resolve_all(package, spec.backends, diag)
    problems = check_against_model(recipe, package)
    errors = {(p.file, p.field) for p in problems}
    for warning in diag.warnings:  # an unserved run the model check found is said once, there
        if (warning.file, warning.field) not in errors:
            rep.warning(warning)
    if problems:
        raise UserError(problems=problems)
    if rep.mode == "json":
        rep.emit(_json(recipe, package, resolved, diag))
    else:
        _show(rep, recipe, package, resolved)
    return 0


def _show(rep: Reporter, recipe: Recipe, package: OpPackageDef | None,
          resolved: dict[str, OpPackageDef] | None) -> None:
    rep.heading(f"recipe {recipe.name} ({display_path(recipe.path)}): valid")
    facts: list[tuple[str, str]] = []
    if package is not None and resolved is not None and recipe.package is not None:
        facts.append(("package", f"{package.name} {package.version}"
                      + (f" ({package.domain})" if package.domain else "")))
        facts.append(("ops", ", ".join(op.name for op in package.ops)))
        facts.append(("backends", ", ".join(f"{b} -> {p.name} ({len(p.ops)} ops)"
                                            for b, p in resolved.items())))
        if recipe.package.dsp_arch and "DSP" in recipe.package.backends:
            facts.append(("dsp arch", ", ".join(recipe.package.dsp_arch)))
    if recipe.model is not None:
        facts.append(("model", display_path(recipe.model.onnx)))
    if recipe.quantize is not None:
        q = recipe.quantize
        facts.append(("quantize", f"{q.quantizer}, activations {q.act_bitwidth} bit, weights "
                      f"{q.weights_bitwidth} bit{' per channel' if q.per_channel else ''}, "
                      f"bias {q.bias_bitwidth} bit; calibration {_calibration(q)}"))
    facts.append(("targets", str(len(recipe.targets))))
    facts.append(("runs", ", ".join(r.name for r in recipe.runs) or "none"))
    rep.facts(facts)
    if recipe.targets:
        rep.table(
            f"prepare targets ({len(recipe.targets)})",
            ["#", "soc", "arch", "vtcm MB", "level", "input dims", "outputs", "precision"],
            [[i + 1, t.soc.name, t.soc.arch, t.soc.vtcm_mb, t.optimization_level,
              t.input_dimensions.label, t.outputs.label, t.precision]
             for i, t in enumerate(recipe.targets)],
        )


def _json(recipe: Recipe, package: OpPackageDef | None,
          resolved: dict[str, OpPackageDef] | None, diag: Diagnostics) -> dict[str, Any]:
    out: dict[str, Any] = {
        "ok": True,
        "recipe": recipe.name,
        "file": display_path(recipe.path),
        "package": None,
        "model": display_path(recipe.model.onnx) if recipe.model else None,
        "quantize": None,
        "targets": [t.to_json() for t in recipe.targets],
        "runs": [{"name": r.name, "soc": r.soc.name, "precision": r.precision,
                  "optimization_level": r.optimization_level, "mode": r.mode,
                  "outputs": r.outputs.to_json(),
                  "input_dimensions": r.input_dimensions.to_json()} for r in recipe.runs],
        "warnings": [w.to_json() for w in diag.warnings],
    }
    if package is not None and resolved is not None and recipe.package is not None:
        out["package"] = {
            "name": package.name, "domain": package.domain, "version": package.version,
            "ops": [op.name for op in package.ops],
            "backends": {b: p.name for b, p in resolved.items()},
            "dsp_arch": list(recipe.package.dsp_arch),
            "digest": package.digest(),
        }
    if recipe.quantize is not None:
        q = recipe.quantize
        out["quantize"] = {"quantizer": q.quantizer, "act_bitwidth": q.act_bitwidth,
                           "weights_bitwidth": q.weights_bitwidth,
                           "bias_bitwidth": q.bias_bitwidth, "per_channel": q.per_channel,
                           **({"input_list": display_path(q.input_list)}
                              if q.input_list is not None else
                              {"sequences": display_path(q.sequences)})}
    return out


def _calibration(q: Any) -> str:
    """The calibration data in words: the input list, or the token sequences."""
    if q.input_list is not None:
        return display_path(q.input_list)
    return f"token sequences {display_path(q.sequences)}"
