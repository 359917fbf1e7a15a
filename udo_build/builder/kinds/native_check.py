"""`native-check`: the custom ops' compiled C++ against their numpy kernels, on the inputs each op
sees over the calibration list -> the comparison (JSON), or a failed step naming the op, the node,
the input and the worst element (udo_build.package.native_check).

Inputs: `bundle` (the float bundle), `input_list` and its files `input_list.files[i]`, the numpy
kernels `kernels[i]`, and the C++: either `library` (the recipe's `package.cpu_library`, keyed by
its bytes) or `package` (the CPU op package tree) with `sources[i]`, the user's files that this
step lays over its src/ folder (their paths below src/ are the parameter `sources`) and compiles
with g++ (udo_build.package.cpu_build: ops whose body is not written are left out and named).
Parameters: the tolerance (`atol`, `rtol`), `sources`; `field`, where the recipe states the
sources, for messages only. Output `comparison`, published at native/check.json. So a change of
the C++, the kernels, the calibration data or the tolerance reruns this step alone.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ..actions import ActionContext, action_kind
from .inputs import input_list, kernel_files, numbered

if TYPE_CHECKING:
    from ..action_io import Produced

# Tolerance.KEY_PARAMS (udo_build.package.native_check imports numpy: a no-op build must not)
NATIVE_CHECK_KEY_PARAMS = ("atol", "rtol", "sources")


@action_kind("native-check", version=1, params=NATIVE_CHECK_KEY_PARAMS)
def native_check(ctx: ActionContext) -> Produced:
    import json

    from ...errors import StepFailed
    from ...ir.bundle import read_bundle
    from ...kernels.load import packages_for
    from ...kernels.native import with_native
    from ...model.input_list import feeds
    from ...package.native_check import Tolerance, compare, inference_places
    from ..action_io import Produced

    tolerance = Tolerance.from_params(ctx.params)
    bundle = read_bundle(ctx.input_reader("bundle"), "float bundle")
    numpy_packages = packages_for(bundle, kernel_files(ctx))
    library, unwritten = _library(ctx)
    native = {name: with_native(pkg, library, bundle.opdefs)
              for name, pkg in numpy_packages.items()}
    listing = input_list(ctx)
    inferences = zip(inference_places(listing),
                     feeds(listing, list(bundle.model.graph.inputs)), strict=True)
    found = compare(bundle.model, numpy_packages, native, inferences, tolerance, unwritten)
    failure = found.failure()
    if failure is not None:
        raise StepFailed("native-check", failure)
    data = (json.dumps(found.to_json(), indent=1, sort_keys=True) + "\n").encode()
    checked = ", ".join(sorted(found.ops)) or "no op"
    return Produced({"comparison": data}, {"native/check.json": "comparison"},
                    f"C++ agrees with numpy within {tolerance} over {found.inferences} inputs "
                    f"({checked}): {found.summary()}")


def _library(ctx: ActionContext) -> tuple[Path, tuple[str, ...]]:
    """The compiled library and the ops it leaves to numpy (their body is not written)."""
    if "library" in ctx.input_names():
        return ctx.input_path("library"), ()
    from ...package.cpu_build import build_with_sources

    folder = ctx.input_tree("package")  # the package folder: package.json at its top
    names = [str(s) for s in ctx.params.get("sources", ())]
    files = dict(zip(names, (ctx.input_path(n) for n in numbered(ctx, "sources")), strict=True))
    shown = {f"src/{name}": str(ctx.source_path(n) or name)
             for name, n in zip(names, numbered(ctx, "sources"), strict=True)}
    shown["."] = str(ctx.params.get("field") or "the CPU package")
    built = build_with_sources(folder, files, shown)
    return built.path, built.unwritten
