"""Subnets: a graph split between the HTP and the CPU runtime, as the vendor runtime splits it.

    allowed = node_runtimes(model, bundle.opdefs, choices)   # node -> the runtimes it may use
    part = partition(model, allowed, outputs)                # the subnets, in order
    part.split                                               # False: one HTP subnet, as before

Which runtimes a node may use:

- a custom op: the backends its op definition runs on (SupportedBackend in XML, core_types in
  SNPE JSON, where the DSP core means the HTP from v68 on: udo_build.opdef.json_config): HTP
  when they list HTP, CPU when they list CPU; an op without a definition may use both;
- a standard op: the HTP when the HTP op set has it (the default package's ops not marked
  `cpu_only`: udo_build/kernels/default/htp.py), and the CPU always (the CPU runtime runs the
  float kernels);
- a node that reads or makes a tensor whose shape depends on a value known only at run time
  (an input read as a shape or axes; `run_time_shaped`): the CPU only, since a record fixes
  every shape;
- a recipe narrows both (`RuntimeChoices`): `package.ops[i].runtimes` for the ops of one op
  config, `model.runtimes` for an op type or a node name. A node's runtimes are what its op
  allows and every choice naming its op type or its name allows; none left is a user error
  naming the node, what its op allows and what the recipe says.

Each node takes the first runtime of the order of preference (`RUNTIMES`: HTP, then CPU, as the
vendor's `--runtime_order dsp,cpu`). The nodes the requested outputs need, in the graph's
topological order, are cut where the runtime changes: consecutive nodes of one runtime are one
subnet. A subnet's inputs are the tensors it reads that no node of it makes (graph inputs or
earlier subnets' outputs; never weights); its outputs are the tensors it makes that a later
subnet reads, and the requested outputs it makes (the vendor's rule for offline prepare with CPU
fallback: a record's outputs include every tensor a later subnet reads). A graph whose nodes all
run on the HTP is one subnet (`split` is False) and prepares and runs as it always did.

`cuts` (node names; udo_build.compiler.parts: a recipe's limit on record bytes) also start a new
subnet at those nodes when they run on the HTP: consecutive parts of one runtime, each its own
record, the tensors a later part reads its outputs as across any other boundary.

An HTP subnet is prepared as its own record from `subnet_bundle`: the subnet's nodes as a graph
named `<graph>:subnet<i>` (the record's identifier), its inputs and outputs at the shapes of
the whole graph at the target's input dimensions, the bundle's weights it reads, encodings and
op definitions.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from ..errors import UserError
from ..ir.graph import DEFAULT_PACKAGE, Graph, Model, Node, TensorInfo, needed_nodes

HTP, CPU = "HTP", "CPU"
RUNTIMES = (HTP, CPU)  # the order of preference


@dataclass(frozen=True)
class RuntimeChoice:
    """A recipe's word on the runtimes of the nodes `match` names (an op type or a node name);
    `field` is where the recipe says it (for messages)."""

    match: str
    runtimes: tuple[str, ...]
    field: str = ""


@dataclass(frozen=True)
class RuntimeChoices:
    """Every runtime choice of a recipe (the `runtimes` step's output, canonical JSON)."""

    choices: tuple[RuntimeChoice, ...] = ()

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | None) -> RuntimeChoices:
        rows = (data or {}).get("choices") or ()
        return cls(tuple(RuntimeChoice(r["match"], tuple(r["runtimes"]), r.get("field", ""))
                         for r in rows))

    def to_json(self) -> dict[str, Any]:
        return {"choices": [{"match": c.match, "runtimes": list(c.runtimes), "field": c.field}
                            for c in self.choices]}

    def naming(self, node: Node) -> list[RuntimeChoice]:
        return [c for c in self.choices if c.match in (node.name, node.op)]


@dataclass(frozen=True)
class Subnet:
    index: int
    runtime: str
    nodes: tuple[str, ...]
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]

    def identifier(self, graph: str) -> str:
        """The name of its graph, and of the records prepared from it."""
        return f"{graph}:subnet{self.index}"

    def to_json(self) -> dict[str, Any]:
        return {"index": self.index, "runtime": self.runtime, "nodes": list(self.nodes),
                "inputs": list(self.inputs), "outputs": list(self.outputs)}


@dataclass(frozen=True)
class Partition:
    graph: str
    subnets: tuple[Subnet, ...]
    cuts: tuple[str, ...] = ()  # the nodes that start a part (udo_build.compiler.parts)
    outputs: tuple[str, ...] = ()  # the requested outputs

    @property
    def split(self) -> bool:
        """Whether the graph is not one HTP subnet (then it prepares and runs by subnets)."""
        return not (len(self.subnets) == 1 and self.subnets[0].runtime == HTP)

    @property
    def switches(self) -> int:
        """How many times a run passes from one runtime to the other (not from a part to the
        next on the same runtime)."""
        pairs = zip(self.subnets, self.subnets[1:], strict=False)
        return sum(a.runtime != b.runtime for a, b in pairs)

    def htp(self) -> list[Subnet]:
        return [s for s in self.subnets if s.runtime == HTP]

    def to_json(self) -> dict[str, Any]:
        found: dict[str, Any] = {"subnets": [s.to_json() for s in self.subnets],
                                 "switches": self.switches}
        if self.cuts:  # (only then: a partition without parts writes the bytes it always did)
            found["cuts"] = list(self.cuts)
            found["outputs"] = sorted(self.outputs)
        return found


def op_runtimes(node: Node, opdefs: Mapping[str, Any] | None) -> tuple[str, ...]:
    """The runtimes a node's op may use, before the recipe's choices."""
    if node.package == DEFAULT_PACKAGE:
        from ..kernels.default import DEFAULT

        known = DEFAULT.has(node.op)
        return (CPU,) if known and not DEFAULT.on_htp(node.op) else RUNTIMES
    for op in (opdefs or {}).get("ops", ()):
        if op.get("name") == node.op:
            backends = set(op.get("backends") or ())
            return tuple(r for r in RUNTIMES if r in backends)
    return RUNTIMES


def node_runtimes(model: Model, opdefs: Mapping[str, Any] | None,
                  choices: RuntimeChoices = RuntimeChoices()) -> dict[str, tuple[str, ...]]:
    """Every node's runtimes, in the order of preference; a node left with none is a
    UserError naming it."""
    out = {}
    dynamic = run_time_shaped(model)
    for node in model.graph.nodes:
        own = op_runtimes(node, opdefs)
        why = next((dynamic[t] for t in (*node.inputs, *node.outputs) if t in dynamic), None)
        if why is not None:
            own = tuple(r for r in own if r == CPU)
            if not own:
                raise UserError(f"node {node.name} ({node.op}) has tensors whose shapes are "
                                f"known only at run time ({why}): an HTP record fixes every "
                                "shape, and its op has no CPU implementation; not supported",
                                hint="make the tensors that decide shapes constants of the "
                                "model (initializers)")
        allowed = own
        said = choices.naming(node)
        for choice in said:
            allowed = tuple(r for r in allowed if r in choice.runtimes)
        if not allowed:
            raise _nowhere(node, own, said)
        out[node.name] = allowed
    return out


def run_time_shaped(model: Model) -> dict[str, str]:
    """The tensors whose shapes depend on values known only at run time, at the model's own
    input dimensions -> why (compiler.shapes): their nodes run on the CPU runtime, as the
    vendor runtime falls back for what the HTP cannot hold (none when the model's input
    dimensions are not fixed, or its custom ops' shapes are unknown: prepare says so)."""
    from .driver import input_shapes

    try:
        return input_shapes(model, {}, {})[3]
    except UserError:
        return {}


def _nowhere(node: Node, own: Sequence[str], said: Sequence[RuntimeChoice]) -> UserError:
    where = "the default package" if node.package == DEFAULT_PACKAGE else "its op definition"
    parts = [f"{where} allows {', '.join(own) or 'no runtime udo-build runs (HTP, CPU)'}"]
    parts += [f"{c.field or 'the recipe'} allows {', '.join(c.runtimes)}" for c in said]
    hint = ("allow one of those runtimes for it in the recipe" if own and said else
            "list HTP or CPU in the op config's SupportedBackend (core_types: DSP or CPU)")
    return UserError(f"node {node.name} ({node.op}) may run on no runtime: "
                     + "; ".join(parts), field=said[0].field if said else None, hint=hint)


def partition(model: Model, allowed: Mapping[str, Sequence[str]],
              outputs: Sequence[str], cuts: Collection[str] = ()) -> Partition:
    """The subnets of the nodes `outputs` need (see the module's docstring); `cuts`: nodes
    that start a new HTP subnet (a part)."""
    groups: list[tuple[str, list[Node]]] = []
    cut = set(cuts)
    used = []
    for node in needed_nodes(model.graph.nodes, outputs):
        runtime = next(r for r in RUNTIMES if r in allowed.get(node.name, RUNTIMES))
        starts = node.name in cut and runtime == HTP
        used += [node.name] if starts else []
        if groups and groups[-1][0] == runtime and not starts:
            groups[-1][1].append(node)
        else:
            groups.append((runtime, [node]))
    requested = set(outputs)
    last_read = {i: k for k, (_, nodes) in enumerate(groups) for n in nodes for i in n.inputs}
    subnets = []
    for k, (runtime, nodes) in enumerate(groups):  # sets, not lists: linear in the nodes
        made = [o for n in nodes for o in n.outputs if o]
        made_set = set(made)
        reads = (i for n in nodes for i in n.inputs if i)
        inputs = [i for i in dict.fromkeys(reads) if i not in made_set
                  and i not in model.weights]
        subnets.append(Subnet(k, runtime, tuple(n.name for n in nodes), tuple(inputs),
                              tuple(o for o in made if last_read.get(o, -1) > k
                                    or o in requested)))
    return Partition(model.graph.name, tuple(subnets), tuple(used), tuple(outputs))


def subnet_model(model: Model, subnet: Subnet, infos: Mapping[str, TensorInfo]) -> Model:
    """The subnet as a model of its own: its nodes, inputs and outputs at the shapes of
    `infos` (the whole graph's, at the input dimensions prepared or run), the weights it
    reads."""
    by_name = {n.name: n for n in model.graph.nodes}
    nodes = tuple(by_name[name] for name in subnet.nodes)
    read = {i for n in nodes for i in n.inputs}
    made = {o for n in nodes for o in n.outputs if o}

    def info(name: str) -> TensorInfo:
        return infos.get(name) or TensorInfo(name, "float32")

    boundary = set(subnet.inputs) | set(subnet.outputs)
    graph = Graph(subnet.identifier(model.graph.name), tuple(info(i) for i in subnet.inputs),
                  tuple(info(o) for o in subnet.outputs), nodes,
                  tuple(info(t) for t in sorted(made - boundary) if t in infos))
    return Model(graph, {k: v for k, v in model.weights.items() if k in read})


def subnet_bundle(bundle: Any, subnet: Subnet, infos: Mapping[str, TensorInfo]) -> Any:
    """A bundle of the subnet alone (its model; the bundle's op definitions, encodings, meta)."""
    parts = {k: bundle.parts[k] for k in bundle.parts if not k.startswith("records/")}
    meta = {k: v for k, v in bundle.meta.items() if k != "records"}
    return replace(bundle, model=subnet_model(bundle.model, subnet, infos), meta=meta,
                   parts=parts)
