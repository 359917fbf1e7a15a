"""`package`: the op definitions of one backend -> that backend's op package source tree.

Inputs: `opdef` (the package resolved for the backend, canonical JSON), `origins` ({op: index of
the config entry defining it}) and `config[i]` (the op config files, copied into the package).
Params: udo_build.package.params.PackageParams.
Output `package`, a tree published at `packages/<BACKEND>/<PackageName>/`: every backend's
package keeps the name (the one the converted model's custom nodes give), in its own folder. When
the configs define several packages (a SNPE JSON config's UdoPackage_0 and UdoPackage_1), each is
generated on its own, with its own library, interface provider and validateOpConfig: the first
is output `package`, each other `package:<PackageName>`, published beside it. When every config
is a SNPE JSON UDO config the libraries take the SNPE UDO names, else the QNN ones.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ...package import GENERATOR_VERSION
from ...package.params import PackageParams
from ..actions import ActionContext, action_kind
from .inputs import numbered

if TYPE_CHECKING:
    from ...opdef.model import OpDef, OpPackageDef
    from ..action_io import Produced, Tree


@action_kind("package", version=GENERATOR_VERSION, params=PackageParams.KEY_PARAMS)
def package(ctx: ActionContext) -> Produced:
    import json

    from ...opdef import config_format
    from ...opdef.model import OpPackageDef, split_packages
    from ...package.generate import config_file_names
    from ...package.names import QNN, SNPE, package_folder
    from ..action_io import Produced, Tree

    p = PackageParams.from_params(ctx.params)
    resolved = OpPackageDef.from_json(json.loads(ctx.input_bytes("opdef"))["value"])
    origins: dict[str, int] = json.loads(ctx.input_bytes("origins"))
    inputs = numbered(ctx, "config")
    given = list(p.config_names)
    formats = [config_format(ctx.input_path(n)) for n in inputs]
    names = config_file_names(given if len(given) == len(inputs) else [None] * len(inputs),
                              formats)
    flavor = SNPE if formats and all(f == "json" for f in formats) else QNN
    outputs: dict[str, Tree] = {}
    publish: dict[str, str] = {}
    for part in split_packages(resolved):  # each package of the configs on its own
        own = None if part is resolved else {origins[op.name] for op in part.ops
                                             if op.name in origins}
        folder = _generate(ctx, p, part, inputs, names, origins, own, flavor)
        output = "package" if not outputs else f"package:{part.name}"
        outputs[output] = Tree(folder)
        publish[f"packages/{package_folder(p.backend, part.name)}"] = output
    ops = ", ".join(op.name for op in resolved.ops)
    packages = ", ".join(part.name for part in split_packages(resolved))
    return Produced(dict(outputs), publish, f"{p.backend} op package {packages} ({ops})")


def _generate(ctx: ActionContext, p: PackageParams, part: OpPackageDef, inputs: list[str],
              names: list[str], origins: dict[str, int], own: set[int] | None,
              flavor: str) -> Path:
    """Generate one package into the work folder; `own`: the indexes of the configs it copies
    (None: every config)."""
    from ...package.generate import generate
    from ...package.tree import write_tree

    lacking = [op.name for op in part.ops if not p.has_kernels(origins.get(op.name))]
    stubs = _generic_ops(ctx, inputs, origins, lacking)
    configs = {n: ctx.input_bytes(i) for k, (n, i) in enumerate(zip(names, inputs, strict=True))
               if own is None or k in own}
    files = generate(
        part, list(p.archs), configs,
        {op: names[i] for op, i in origins.items() if 0 <= i < len(names)},
        [(op, names[origins[op.name]]) for op in stubs], flavor,
    )
    folder = ctx.workdir / part.name
    write_tree(files, folder)
    return folder


def _generic_ops(ctx: ActionContext, inputs: list[str], origins: dict[str, int],
                 names: list[str]) -> list[OpDef]:
    """The definitions of `names` before per-backend resolution, from their configs (the kernels
    stub documents every backend's datatypes, so each backend's package carries the same one)."""
    from ...errors import Diagnostics
    from ...opdef import load_config

    loaded: dict[int, dict[str, OpDef]] = {}
    found = []
    for name in names:
        index = origins.get(name)
        if index is None or not 0 <= index < len(inputs):
            continue
        if index not in loaded:
            packages = load_config(ctx.input_path(inputs[index]), Diagnostics())
            loaded[index] = {op.name: op for pkg in packages for op in pkg.ops}
        if name in loaded[index]:
            found.append(loaded[index][name])
    return found
