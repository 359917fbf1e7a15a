"""A kind for the Dask tests (loaded by the test cluster's workers through UDO_BUILD_PLUGINS):
it needs the worker resource SDK, as a step that calls a vendor SDK would, and says which
worker ran it."""

from __future__ import annotations

from udo_build.builder.actions import ActionContext, Produced, action_kind


@action_kind("sdk-probe", version=1, resources={"SDK": 1})
def sdk_probe(ctx: ActionContext) -> Produced:
    from distributed import get_worker

    return Produced({"worker": str(get_worker().name).encode()})
