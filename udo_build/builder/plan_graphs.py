"""The records the assemble step packs: each target's own, or the weight-shared one its graph
is in.

    combine:<SoC>/O<level>/<outputs>/<precision>   the prepared graphs of prepare.matrix.graphs
                                                   for one SoC, level, outputs and precision ->
                                                   one multi-graph record (kinds/prepare.py)

Each graph is its own `prepare` action, keyed as any (its SoC's arch and VTCM, level, input
dimensions, outputs, precision): changing one graph's dimensions re-runs its prepare, the
combine and what follows, never the other graphs'; two SoCs of equal arch and VTCM key their
prepares and their combines the same (built once). The combine's inputs and its `graphs`
parameter are in the order of the graphs' names, so the recipe's order of them enters no key.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..recipe import Recipe
    from .plan import Input, Plan


def plan_records(plan: Plan, recipe: Recipe) -> dict[str, Input]:
    """The assemble step's inputs `record[i]`: a target's prepare, or its graphs' combine
    (added to `plan` here), each once, in the order the recipe's targets first name them."""
    from .plan import Dep, PlannedAction

    groups: dict[str, dict[str, str]] = {}  # record id -> graph name -> prepare action
    for target in recipe.targets:
        if target.graph:
            groups.setdefault(target.record_id, {})[target.graph] = f"prepare:{target.id}"
    records: dict[str, Input] = {}
    for target in recipe.targets:
        rid = target.record_id
        if not target.graph:
            records[f"record[{len(records)}]"] = Dep(f"prepare:{target.id}", "record")
        elif f"combine:{rid}" not in plan.actions:
            graphs = sorted(groups[rid].items())
            plan.add(PlannedAction(
                f"combine:{rid}", "combine", {"graphs": [name for name, _ in graphs]},
                {f"graph[{i}]": Dep(aid, "record") for i, (_, aid) in enumerate(graphs)},
                f"combine {len(graphs)} graphs ({', '.join(n for n, _ in graphs)}) for "
                f"{target.soc.name}"))
            records[f"record[{len(records)}]"] = Dep(f"combine:{rid}", "record")
    return records
