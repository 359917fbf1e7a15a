"""`opdef`: the recipe's op configs -> the normalized op package, generic and per backend.

Outputs: `generic` (the package before per-backend resolution) and one output per backend the
recipe builds (`CPU`, `HTP`, ...), each the canonical JSON of the model. Published as
`opdef/<Package>.json` and `opdef/<Package><Suffix>.json`.
"""

from __future__ import annotations

from ..actions import ActionContext, Produced, action_kind


@action_kind("opdef", version=1, params=("package_name", "domain", "version", "backends"))
def opdef(ctx: ActionContext) -> Produced:
    from ...errors import Diagnostics
    from ...opdef import recipe_package, resolve_all

    p = ctx.params
    configs = sorted((n for n in ctx.input_names() if n.startswith("config[")),
                     key=lambda n: int(n[len("config["):-1]))
    diag = Diagnostics()
    package = recipe_package(p["package_name"], p["domain"], p["version"],
                             [ctx.input_path(n) for n in configs], diag)
    resolved = resolve_all(package, p["backends"])
    outputs: dict[str, bytes] = {"generic": package.canonical_bytes()}
    publish = {f"opdef/{package.name}.json": "generic"}
    for backend, pkg in resolved.items():
        outputs[backend] = pkg.canonical_bytes()
        publish[f"opdef/{pkg.name}.json"] = backend
    ops = ", ".join(op.name for op in package.ops)
    return Produced(dict(outputs), publish,
                    f"op definitions of {package.name} ({ops}) for {', '.join(resolved)}")
