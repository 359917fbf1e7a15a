"""`opdef`: the recipe's op configs -> the normalized op package, generic and per backend.

Outputs: `generic` (the package before per-backend resolution), one output per backend the
recipe builds (`CPU`, `HTP`, ...), each the canonical JSON of the model, `semantics` (the generic
package without its documentation: descriptions, shape texts and references emptied, for the
steps that only compute with the ops, so that editing a description re-runs only the op
packages, whose sources carry it) and `origins` (which config entry defines each op, so that
packages know which ops have kernels). Published as `opdef/<Package>.json` and, per backend,
`opdef/<BACKEND>/<Package>.json` (every backend's package keeps the PackageName).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...opdef.params import OpdefParams
from ..actions import ActionContext, Produced, action_kind
from .inputs import numbered

if TYPE_CHECKING:
    from ...opdef.model import OpPackageDef


# version 3: the output `semantics`; 4: per-backend packages keep the name, published by backend;
# 5: configs defining several packages give a set of them (members), not one merged package;
# BACKEND_SPECIFIC with nothing for a backend is typed as the vendor's generators type it
@action_kind("opdef", version=5, params=OpdefParams.KEY_PARAMS)
def opdef(ctx: ActionContext) -> Produced:
    from ...canonical import canonical_json
    from ...errors import Diagnostics
    from ...opdef import load_config, recipe_package, resolve_all

    p = OpdefParams.from_params(ctx.params)
    configs = numbered(ctx, "config")
    diag = Diagnostics()
    package = recipe_package(p.package_name, p.domain, p.version,
                             [ctx.input_path(n) for n in configs], diag)
    resolved = resolve_all(package, p.backends)
    outputs: dict[str, bytes] = {"generic": package.canonical_bytes(),
                                 "semantics": semantics(package).canonical_bytes()}
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


def semantics(package: OpPackageDef) -> OpPackageDef:
    """The package without its documentation: what a model computing with its ops depends on."""
    from dataclasses import replace

    def bare(items: tuple[Any, ...]) -> tuple[Any, ...]:
        return tuple(replace(item, description="", shape_text="") for item in items)

    return replace(package, ops=tuple(
        replace(op, description="", references=(), inputs=bare(op.inputs),
                outputs=bare(op.outputs), params=bare(op.params))
        for op in package.ops))
