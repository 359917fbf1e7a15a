"""Op packages from op configs without a recipe, through the same `opdef` and `package` actions
(and store) as a recipe build; each package lands in OUT/<BACKEND>/<PackageName>/.

A package folder is updated in place: files a user changed since udo-build wrote them are never
overwritten unless forced.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import Diagnostics, Problem, UserError, display_path
from .session import Events, opened_store, run_plan

if TYPE_CHECKING:
    from ..opdef.model import OpPackageDef
    from ..package.tree import Update
    from ..store import Store
    from .engine import ActionState
    from .plan import Plan

LEGACY_ARCHS = ("v65", "v66")


@dataclass(frozen=True)
class PackageRequest:
    configs: tuple[str, ...]  # op config files
    backends: tuple[str, ...]
    archs: tuple[str, ...]  # dsp arches (DSP, HTP); empty: the configs' dsp_arch_types
    out: str  # the folder of the packages
    force: bool = False  # overwrite files a user changed
    store: str | None = None


@dataclass(frozen=True)
class GeneratedPackage:
    backend: str
    name: str
    folder: Path
    status: str  # built | cached
    key: str | None
    manifest: dict[str, Any]  # its package.json
    files: int
    update: Update  # what changed in its folder

    def to_json(self) -> dict[str, Any]:
        return {"backend": self.backend, "package": self.name,
                "folder": display_path(self.folder), "status": self.status, "key": self.key,
                "ops": [op["name"] for op in self.manifest["ops"]],
                "targets": [t["name"] for t in self.manifest["targets"]],
                "files": self.files, "written": self.update.written,
                "unchanged": len(self.update.unchanged), "removed": self.update.removed,
                "kept": self.update.kept}


@dataclass(frozen=True)
class PackageReport:
    packages: tuple[GeneratedPackage, ...]
    warnings: tuple[Problem, ...]


def generate_packages(request: PackageRequest, events: Events) -> PackageReport:
    """Generate the packages (or reuse them from the store) and update their folders."""
    from ..atomic import Confined
    from ..opdef import recipe_package, resolve_all
    from ..package.tree import conflicts, update_folder
    from .engine import Options

    paths = [Path(c) for c in request.configs]
    for path in paths:
        if not path.is_file():
            raise UserError("no such op config", file=path,
                            hint="give an XML OpDefCollection or a SNPE JSON UDO config file")
    backends = list(dict.fromkeys(request.backends))
    diag = Diagnostics()
    generic = recipe_package(None, None, None, paths, diag)
    resolve_all(generic, backends, diag)  # every problem of the configs now, with positions
    for warning in diag.warnings:
        events.warning(warning)
    archs = {b: _archs(b, list(request.archs), generic) for b in backends}
    with opened_store(request.store) as store, store.build_lock():
        states = run_plan(store, package_plan(paths, backends, archs), Options(jobs=1))
        failed = next((s.error for s in states.values() if s.error is not None), None)
        if failed is not None:
            raise failed  # a UserError (exit 2), StepFailed (1), or a bug of udo-build (3)
        packages = [(b, *found) for b in backends
                    for found in _fetch(store, states[f"package:{b}"])]
    out = Path(request.out)
    done = []
    with Confined(out) as folder:  # a link planted in it is refused, never followed
        problems = [] if request.force else [
            p for _, rel, files, _ in packages for p in conflicts(folder, rel, files)]
        if problems:
            raise UserError(problems=problems)
        for backend, rel, files, state in packages:
            update = update_folder(folder, rel, files, force=request.force)
            manifest = json.loads(files["package.json"])
            done.append(GeneratedPackage(backend, manifest["package"], out / rel, state.status,
                                         state.key, manifest, len(files), update))
    return PackageReport(tuple(done), tuple(diag.warnings))


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


def package_plan(paths: list[Path], backends: list[str], archs: dict[str, list[str]]) -> Plan:
    """An opdef action over the configs and a package action per backend."""
    from ..recipe import Recipe
    from .plan import Dep, Input, Plan, PlannedAction, Source

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


def _fetch(store: Store, state: ActionState) -> list[tuple[str, dict[str, bytes], ActionState]]:
    """(its folder below the output folder, files, state) of each package a built or cached
    package action generated (several when the configs define several packages)."""
    result = state.result
    assert result is not None
    found = []
    for rel, output in sorted(result.publish.items()):
        entries = store.cas.tree_entries(result.outputs[output].digest)
        files = {e["path"]: store.cas.get(e["digest"]) for e in entries or ()}
        if entries is None or any(data is None for data in files.values()):
            raise UserError("the generated package is missing from the store",
                            hint="run 'udo-build store verify --repair' and generate again")
        found.append((rel.split("/", 1)[-1], files, state))
    return found  # type: ignore[return-value]
