"""`udo-build opdef show CONFIG [--backend B]`: the normalized definition of an op config."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ..errors import Diagnostics, display_path
from ..opdef.vocab import BACKENDS
from .reporter import Reporter

if TYPE_CHECKING:
    from ..opdef.model import Default, OpDef, OpPackageDef, ParamDef, TensorDef


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    show = sub.add_parser(
        "show", parents=[common], help="print the normalized definition of an op config",
        description="Load an XML OpDefCollection or a SNPE JSON UDO config and print its "
                    "normalized op definitions, checked against the rules of every backend the "
                    "file declares; with --backend, as that backend builds them (supplements "
                    "applied, BACKEND_SPECIFIC resolved), package by package as "
                    "'udo-build package --backend' generates them.",
    )
    show.add_argument("config", metavar="CONFIG", help="the op config (.xml or .json)")
    show.add_argument("--backend", choices=BACKENDS, type=str.upper,
                      help="resolve for this backend")


def run(args: argparse.Namespace, rep: Reporter) -> int:
    from pathlib import Path

    from ..opdef import check_declared_backends, load_config, recipe_package, resolve_all
    from ..opdef.model import split_packages

    diag = Diagnostics()
    packages = load_config(args.config, diag)
    for warning in diag.warnings:  # before resolving: they may explain its errors
        rep.warning(warning)
    told = len(diag.warnings)
    if args.backend:  # what `udo-build package --backend` generates from this file, the same way
        found = recipe_package(None, None, None, [Path(args.config)], Diagnostics())
        packages = split_packages(resolve_all(found, [args.backend], diag)[args.backend])
    else:
        for package in packages:
            check_declared_backends(package, diag)
    for warning in diag.warnings[told:]:
        rep.warning(warning)
    if rep.mode == "json":
        rep.emit({"ok": True, "file": display_path(args.config), "backend": args.backend,
                  "packages": [p.to_json() for p in packages],
                  "warnings": [w.to_json() for w in diag.warnings]})
        return 0
    for package in packages:
        _show_package(rep, package)
    return 0


def _show_package(rep: Reporter, package: OpPackageDef) -> None:
    backend = f", backend {package.backend}" if package.backend else ""
    rep.heading(f"package {package.name} {package.version}"
                + (f" ({package.domain})" if package.domain else "") + backend)
    for op in package.ops:
        _show_op(rep, op, resolved=package.backend is not None)


def _show_op(rep: Reporter, op: OpDef, resolved: bool) -> None:
    rep.line()
    facts = [("backends", ", ".join(op.backends))]
    if op.description:
        facts.insert(0, ("description", op.description))
    if op.use_default_translation:
        facts.append(("translation", "overrides the native op of the same type"))
    if op.dsp_arch_types:
        facts.append(("dsp arch", ", ".join(op.dsp_arch_types)))
    rep.heading(f"op {op.name}")
    rep.facts(facts)
    columns = ["kind", "name", "datatypes", "rank", "layout", "mandatory", "default", "notes"]
    if not resolved:
        columns.append("per backend")
    rows = [_row("input", t, resolved) for t in op.inputs]
    rows += [_row("output", t, resolved) for t in op.outputs]
    rows += [_row("param", p, resolved) for p in op.params]
    rep.table(f"{op.name}: tensors and parameters", columns, rows)


def _row(kind: str, item: TensorDef | ParamDef, resolved: bool) -> list[Any]:
    from ..opdef.model import TensorDef

    notes = []
    if isinstance(item, TensorDef):
        notes += ["repeated"] * item.repeated + ["static"] * item.static
    elif item.enumeration:
        notes.append("enum: " + ", ".join(f"{v}={i}" for i, v in enumerate(item.enumeration)))
    row: list[Any] = [kind, item.name, item.datatypes, item.rank, item.layout, item.mandatory,
                      _default(item.default), ", ".join(notes) or None]
    if not resolved:
        row.append("; ".join(
            f"{o.backend}: {', '.join(o.datatypes)}" + (f" {o.layout}" if o.layout else "")
            for o in item.overrides) or None)
    return row


def _default(default: Default | None) -> str | None:
    if default is None:
        return None
    if default.kind == "string":
        return repr(default.value)
    if default.kind == "boolean":
        return "true" if default.value else "false"
    return str(default.to_json()["value"]).replace(" ", "")
