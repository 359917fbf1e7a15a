"""`opdef`: the recipe's op configs -> the normalized op package, generic and per backend.

Outputs: `generic` (the package before per-backend resolution), one output per backend the
recipe builds (`CPU`, `HTP`, ...), each the canonical JSON of the model, `semantics` (the generic
package without its documentation: descriptions, shape texts and references emptied, for the
steps that only compute with the ops, so that editing a description re-runs only the op
packages, whose sources carry it) and `origins` (which config entry defines each op, so that
packages know which ops have kernels) and `warnings` (what resolving said: a BACKEND_SPECIFIC item
typed as the vendor's generators type it, each naming its config by index; every build tells
them, `opdef_problems`). Published as `opdef/<Package>.json` and, per backend,
`opdef/<BACKEND>/<Package>.json` (every backend's package keeps the PackageName).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ...canonical import canonical_json
from ...errors import Problem
from ...opdef.params import OpdefParams
from ..actions import ActionContext, action_kind
from .inputs import numbered

if TYPE_CHECKING:
    from ...opdef.model import OpPackageDef
    from ...recipe import Recipe
    from ...store import Store
    from ..action_io import Produced
    from ..engine import ActionState


# version 3: the output `semantics`; 4: per-backend packages keep the name, published by backend;
# 5: configs defining several packages give a set of them (members), not one merged package;
# BACKEND_SPECIFIC with nothing for a backend is typed as the vendor's generators type it, with
# a warning in the output `warnings` (told by every build: `opdef_problems`)
@action_kind("opdef", version=5, params=OpdefParams.KEY_PARAMS)
def opdef(ctx: ActionContext) -> Produced:
    from ...errors import Diagnostics
    from ...opdef import load_config, recipe_package, resolve_all
    from ..action_io import Produced

    p = OpdefParams.from_params(ctx.params)
    configs = numbered(ctx, "config")
    diag = Diagnostics()
    package = recipe_package(p.package_name, p.domain, p.version,
                             [ctx.input_path(n) for n in configs], diag)
    typed = Diagnostics()  # what the build tells (the loaders' warnings are validate's)
    resolved = resolve_all(package, p.backends, typed)
    where = {str(ctx.input_path(n)): i for i, n in enumerate(configs)}
    outputs: dict[str, bytes] = {"generic": package.canonical_bytes(),
                                 "semantics": semantics(package).canonical_bytes(),
                                 WARNINGS: canonical_json([_portable(w, where)
                                                           for w in typed.warnings])}
    publish = {f"opdef/{package.name}.json": "generic"}
    for backend, pkg in resolved.items():
        outputs[backend] = pkg.canonical_bytes()
        publish[f"opdef/{backend}/{pkg.name}.json"] = backend
    origins = {}  # op -> the index of the config that defines it (its kernels are that entry's)
    for i, name in enumerate(configs):
        for pkg in load_config(ctx.input_path(name), Diagnostics()):
            origins.update({op.name: i for op in pkg.ops})
    outputs["origins"] = canonical_json(origins)
    ops = ", ".join(op.name for op in package.ops)
    return Produced(dict(outputs), publish,
                    f"op definitions of {package.name} ({ops}) for {', '.join(resolved)}")


WARNINGS = "warnings"


def _portable(problem: Problem, where: dict[str, int]) -> dict[str, Any]:
    """A warning as the action's output holds it: its config by index (no path of the machine
    reaches an artifact), the rest as said."""
    doc = {k: v for k, v in problem.to_json().items() if k != "file"}
    return {**doc, "config": where.get(problem.file or "")}


def opdef_problems(store: Store, recipe: Recipe,
                   states: Mapping[str, ActionState]) -> list[Problem]:
    """The warnings of a build's opdef action (built or cached alike: its output `warnings`),
    at the recipe's config files: a BACKEND_SPECIFIC item typed as the vendor's generators do."""
    import json

    found = []
    for state in states.values():
        result = state.result
        output = result.outputs.get(WARNINGS) if result is not None else None
        data = store.cas.get(output.digest) if output is not None else None
        if state.action.kind != "opdef" or not data or recipe.package is None:
            continue
        for doc in json.loads(data):
            i = doc.get("config")
            file = str(recipe.package.ops[i].config) \
                if isinstance(i, int) and 0 <= i < len(recipe.package.ops) else None
            found.append(Problem(doc["message"], file, doc.get("line"), doc.get("column"),
                                 doc.get("field"), doc.get("hint")))
    return found


def semantics(package: OpPackageDef) -> OpPackageDef:
    """The package without its documentation: what a model computing with its ops depends on."""
    from dataclasses import replace

    def bare(items: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(replace(item, description="", shape_text="") for item in items)

    return replace(package, ops=tuple(
        replace(op, description="", references=(), inputs=bare(op.inputs),
                outputs=bare(op.outputs), params=bare(op.params))
        for op in package.ops))
