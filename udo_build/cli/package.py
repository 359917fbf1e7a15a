"""`udo-build package CONFIG [CONFIG ...] --backend HTP [--arch v73 ...] --out DIR`: generate op
packages from op configs without a recipe, through the same `opdef` and `package` actions (and
store) as a recipe build; each package lands in DIR/<PackageName><Suffix>/.

A package folder is updated in place: files a user changed since udo-build wrote them are never
overwritten unless --force.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import Diagnostics, UserError, display_path
from ..opdef.vocab import BACKENDS, DSP_ARCHS
from .build import add_store_arguments
from .reporter import Reporter

if TYPE_CHECKING:
    from ..builder.plan import Plan
    from ..opdef.model import OpPackageDef

LEGACY_ARCHS = ("v65", "v66")


def add_arguments(parser: argparse.ArgumentParser, common: argparse.ArgumentParser) -> None:
    parser.add_argument("configs", metavar="CONFIG", nargs="+",
                        help="op configs (XML OpDefCollection or SNPE JSON UDO config)")
    parser.add_argument("--backend", action="append", required=True, type=str.upper,
                        choices=BACKENDS, help="generate for this backend (repeatable)")
    parser.add_argument("--arch", action="append", default=[], type=str.lower,
                        choices=DSP_ARCHS, help="a dsp arch to build for (repeatable; DSP and "
                        "HTP; default: the configs' dsp_arch_types)")
    parser.add_argument("--out", metavar="DIR", required=True,
                        help="the folder the packages are written to, one subfolder each")
    parser.add_argument("--force", action="store_true",
                        help="overwrite files changed since udo-build generated them")
    add_store_arguments(parser)


def run(args: argparse.Namespace, rep: Reporter) -> int:
    from ..builder.engine import Engine, Options
    from ..opdef import recipe_package, resolve_all
    from ..store import Store, default_store_path

    paths = [Path(c) for c in args.configs]
    for path in paths:
        if not path.is_file():
            raise UserError("no such op config", file=path,
                            hint="give an XML OpDefCollection or a SNPE JSON UDO config file")
    backends = list(dict.fromkeys(args.backend))
    diag = Diagnostics()
    generic = recipe_package(None, None, None, paths, diag)
    resolve_all(generic, backends)  # every problem of the configs now, with positions
    for warning in diag.warnings:
        rep.warning(warning)
    plan = _plan(paths, backends, {b: _archs(b, args.arch, generic) for b in backends})
    store = Store(default_store_path(args.store))
    with store.build_lock():
        states = Engine(store, plan, Options(jobs=1)).run()
        failed = next((s.error for s in states.values() if s.error is not None), None)
        if failed is not None:
            raise failed  # a UserError (exit 2), StepFailed (1), or a bug of udo-build (3)
        packages = [_fetch(store, states[f"package:{b}"]) for b in backends]
    out = Path(args.out)
    from ..package.tree import conflicts, update_folder

    problems = [] if args.force else [
        p for name, files, _ in packages for p in conflicts(out / name, files)]
    if problems:
        raise UserError(problems=problems)
    rows = []
    for (name, files, state), backend in zip(packages, backends, strict=True):
        update = update_folder(out / name, files, force=args.force)
        rows.append(_row(backend, name, out / name, files, state, update))
    _report(rep, rows, diag)
    return 0


def _archs(backend: str, given: list[str], package: OpPackageDef) -> list[str]:
    """The dsp arches of a backend: those given, else the configs' dsp_arch_types (the HTP has
    no v65/v66)."""
    from ..package.tables import arch_number

    found = given or sorted({a for op in package.ops for a in op.dsp_arch_types})
    if backend == "HTP":
        legacy = [a for a in given if a in LEGACY_ARCHS]
        if legacy:
            raise UserError(f"the HTP starts at v68; {', '.join(legacy)} is a DSP arch",
                            field="--arch", hint="use --backend DSP for v65 and v66")
        found = [a for a in found if a not in LEGACY_ARCHS]
    if backend == "DSP" and not found:
        raise UserError("the DSP package needs a dsp arch, and the configs name none",
                        field="--arch", hint="give --arch v66 (one library per op) or "
                                             "--arch v68 and later (the HTP layout)")
    if backend not in ("DSP", "HTP"):
        return []
    return sorted(set(found), key=arch_number)


def _plan(paths: list[Path], backends: list[str], archs: dict[str, list[str]]) -> Plan:
    from ..builder.plan import Dep, Input, Plan, PlannedAction, Source
    from ..recipe import Recipe

    first = paths[0].resolve()
    plan = Plan(Recipe(first, first.parent, "package"))
    configs: dict[str, Input] = {f"config[{i}]": Source(p) for i, p in enumerate(paths)}
    plan.add(PlannedAction("opdef", "opdef", {"package_name": None, "domain": None,
                                              "version": None, "backends": backends},
                           configs, "op definitions"))
    for backend in backends:
        plan.add(PlannedAction(
            f"package:{backend}", "package",
            {"backend": backend, "archs": archs[backend], "with_kernels": [False] * len(paths),
             "config_names": [p.name for p in paths]},
            {"opdef": Dep("opdef", backend), "origins": Dep("opdef", "origins"), **configs},
            f"{backend} op package"))
    return plan


def _fetch(store: Any, state: Any) -> tuple[str, dict[str, bytes], Any]:
    """(package name, files, state) of a built or cached package action."""
    result = state.result
    (rel, output), = result.publish.items()
    entries = store.cas.tree_entries(result.outputs[output].digest)
    files = {e["path"]: store.cas.get(e["digest"]) for e in entries or ()}
    if entries is None or any(data is None for data in files.values()):
        raise UserError("the generated package is missing from the store",
                        hint="run 'udo-build store verify --repair' and generate again")
    return rel.rsplit("/", 1)[-1], files, state


def _row(backend: str, name: str, folder: Path, files: dict[str, bytes], state: Any,
         update: Any) -> dict[str, Any]:
    manifest = json.loads(files["package.json"])
    return {"backend": backend, "package": name, "folder": display_path(folder),
            "status": state.status, "key": state.key,
            "ops": [op["name"] for op in manifest["ops"]],
            "targets": [t["name"] for t in manifest["targets"]],
            "files": len(files), "written": update.written, "unchanged": len(update.unchanged),
            "removed": update.removed, "kept": update.kept}


def _report(rep: Reporter, rows: list[dict[str, Any]], diag: Diagnostics) -> None:
    if rep.mode == "json":
        rep.emit({"ok": True, "packages": rows, "warnings": [w.to_json() for w in diag.warnings]})
        return
    for row in rows:
        rep.heading(f"{row['package']} ({row['backend']}, {row['status']}) -> {row['folder']}")
        facts = [("ops", ", ".join(row["ops"])), ("targets", ", ".join(row["targets"])),
                 ("files", f"{row['files']}: {len(row['written'])} written, "
                           f"{row['unchanged']} unchanged, {len(row['removed'])} removed")]
        if row["kept"]:
            facts.append(("kept", ", ".join(row["kept"]) + " (no longer generated, but changed)"))
        rep.facts(facts)
