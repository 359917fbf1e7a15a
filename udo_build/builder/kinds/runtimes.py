"""`runtimes`: the recipe's runtime choices -> the canonical JSON of
udo_build.compiler.partition.RuntimeChoices (output `choices`).

Planned only when the recipe says which runtimes an op may use (`package.ops[i].runtimes`,
`model.runtimes`); the prepare, assemble and run steps then read its output as their input
`runtimes`, so a recipe that says nothing keys its actions as before. Parameter `choices`: each
`{"match": op type or node name, "runtimes", "field"}` or, for an op config's entry,
`{"config": i, "runtimes", "field"}`, which names the ops the config defines (input `origins`,
the opdef step's op -> config index).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

from ..actions import ActionContext, action_kind

if TYPE_CHECKING:
    from ..action_io import Produced


@action_kind("runtimes", version=1, params=("choices",))
def runtimes(ctx: ActionContext) -> Produced:
    from ...canonical import canonical_json
    from ...compiler.partition import RuntimeChoice, RuntimeChoices
    from ..action_io import Produced

    origins: dict[str, int] = {}
    if "origins" in ctx.input_names():
        origins = json.loads(ctx.input_bytes("origins"))
    found = []
    for row in ctx.params["choices"]:
        given = tuple(row["runtimes"])
        if "config" in row:
            ops = sorted(op for op, i in origins.items() if i == row["config"])
            found += [RuntimeChoice(op, given, row["field"]) for op in ops]
        else:
            found.append(RuntimeChoice(row["match"], given, row["field"]))
    choices = RuntimeChoices(tuple(found))
    said = ", ".join(f"{c.match}: {'/'.join(c.runtimes)}" for c in found) or "nothing"
    return Produced({"choices": canonical_json(choices.to_json())},
                    description=f"runtime choices of the recipe: {said}")
