"""`outputs`: a bundle and the distinct output requests of the targets prepared from it -> each
request resolved to its tensor names (outputs `tensors[i]`, one per request, in order).

A request is "default" (every output of the last layer), {"layers": [...]} and/or
{"tensors": [...]}; it resolves against the bundle's model exactly as the compiler resolves it
(udo_build.compiler.lower.resolve_outputs), and each output is the sorted names as canonical
JSON. A prepare takes its request's output as an input instead of the request itself, so two
spellings of one tensor set give one prepare key, one record. Parameters:
udo_build.recipe.model.OutputRequests (only the requests enter the key; where the recipe writes
them is for the error a name the model lacks gets, which names that recipe field).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ...recipe.model import OutputRequests
from ..actions import ActionContext, action_kind

if TYPE_CHECKING:
    from ..action_io import Produced


@action_kind("outputs", version=1, params=OutputRequests.KEY_PARAMS)
def outputs(ctx: ActionContext) -> Produced:
    from ...canonical import canonical_json
    from ...ir.bundle import read_bundle
    from ..action_io import Produced

    params = OutputRequests.from_params(ctx.params)
    model = read_bundle(ctx.input_reader("bundle"), "bundle").model
    resolved = [_resolve(model, params, i) for i in range(len(params.requests))]
    labels = "; ".join(f"{r.label} -> {len(names)} tensor{'s' * (len(names) != 1)}"
                       for r, names in zip(params.requests, resolved, strict=True))
    return Produced({f"tensors[{i}]": canonical_json(names) for i, names in enumerate(resolved)},
                    description=f"outputs of {model.graph.name}: {labels}")


def _resolve(model: Any, params: OutputRequests, i: int) -> list[str]:
    """The sorted tensor names of request `i`; a name the model lacks is a UserError at the
    recipe field that wrote the request."""
    from ...compiler.lower import resolve_outputs
    from ...errors import UserError

    request = params.requests[i]
    try:
        return sorted(resolve_outputs(model, request.to_json()))
    except UserError as exc:
        if i >= len(params.places):
            raise
        file, line, column, field = params.places[i]
        problem = exc.problem  # field "outputs.layers" or "outputs.tensors"
        sub = (problem.field or "").rpartition(".")[2]
        raise UserError(problem.message, file=file, line=line, column=column,
                        field=f"{field}.{sub}" if sub else field, hint=problem.hint) from None
